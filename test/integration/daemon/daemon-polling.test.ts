import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { getProfileSync } from '../../../src/db/accounting.js';
import { listRequests, transitionsOf } from '../../../src/db/requests.js';
import { isTerminalRequest } from '../../../src/requests/request-state.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { type RecordedRequest, startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';
import { setUpstream, spec } from './daemon-files.js';

let redis: TestRedis;
let sim: TestSim | undefined;
let td: TestDaemon | undefined;

beforeAll(async () => {
  redis = await startTestRedis();
});

afterAll(async () => {
  await redis.stop();
});

afterEach(async () => {
  await td?.stop();
  await sim?.stop();
  td = undefined;
  sim = undefined;
});

/** A daemon on a simulator: what polling costs, and what it does when the scheduler's answers fail or lack a job. */

describe('polling', () => {
  it('costs the same few requests per cycle whatever the number of tracked jobs', async () => {
    sim = await startSim({ cpus: 64 });
    const proxy = await startFlakyProxy(sim.url);
    try {
      td = await startTestDaemon(proxy.url, redis.url, {}, { rateLimit: { capacity: 100, refillPerSecond: 100 } });
      const daemon = td.daemon;
      const ids = await Promise.all(
        Array.from({ length: 30 }, () =>
          // Running through the whole window however long starting them all takes (they are killed
          // with the simulator): an end in it would rightly cost an accounting request.
          daemon.submit({
            spec: spec(sim as TestSim, { script: '#!/bin/sh\nsleep 300\n' }),
            owner: 'default',
            actor: 'test',
            origin: 'api',
          }),
        ),
      );
      await waitFor(
        async () => {
          const rows = await listRequests(daemon.history.store);
          // A job that ended will never run: say how, rather than wait out the bound.
          const ended = rows.filter((row) => isTerminalRequest(row.state));
          if (ended.length)
            throw new Error(
              `jobs ended before the window: ${ended.map((r) => `${r.state} ${r.errorMessage ?? ''}`).join('; ')}`,
            );
          return rows.filter((row) => row.state === 'running').length === ids.length ? true : undefined;
        },
        { what: 'all jobs running', timeoutMs: 90_000 },
      );
      const before = proxy.requests.length;
      const isState = (r: { method: string; url: string }) => r.method === 'GET' && r.url.includes('/jobs/state');
      // Three of the daemon's own cycles, however long a loaded machine makes them: what they ask
      // is counted between the first and the third.
      const cycles = await waitFor(
        async () => {
          const seen = proxy.requests.slice(before).filter(isState);
          return seen.length >= 3 ? seen.slice(0, 3) : undefined;
        },
        { what: 'three poll cycles', timeoutMs: 60_000 },
      );
      const [first, , third] = cycles as [RecordedRequest, RecordedRequest, RecordedRequest];
      const during = proxy.requests
        .slice(before)
        .filter((r) => r.method === 'GET' && r.atMs >= first.atMs && r.atMs <= third.atMs);
      const stateCalls = during.filter(isState);
      expect(stateCalls).toHaveLength(3);
      // No faster than the 2 s cache lifetime sets the interval.
      for (let i = 1; i < cycles.length; i++) {
        expect((cycles[i] as RecordedRequest).atMs - (cycles[i - 1] as RecordedRequest).atMs).toBeGreaterThanOrEqual(
          1500,
        );
      }
      expect(during.filter((r) => /\/job\/\d+/.test(r.url))).toEqual([]);
      // Each names every tracked job at once.
      for (const call of stateCalls) expect(call.url.match(/job_id=/g)).toHaveLength(ids.length);
      // Beside them only reconcile's read of the account's window, no job named, on its own timer
      // (every 2 s in the test daemon).
      const accounting = during.filter((r) => /\/scheddb\/v[\d.]+\/jobs\?start_time=/.test(r.url));
      for (const call of accounting) expect(call.url).not.toContain('job_id');
      expect(during.map((r) => r.url)).toHaveLength(stateCalls.length + accounting.length);
    } finally {
      await proxy.close();
    }
  }, 150_000);

  it('an outage longer than the cache lifetime loses nothing and fails nothing; tracking resumes', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    // Short enough to end during the outage: tracking must find its end once the scheduler is back.
    const id = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 3\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const running = await td.waitForState(id, 'running');
    // A poll has seen the job (so the proxy holds an answer to fall back on) before the outage begins.
    const store = td.daemon.history.store;
    await waitFor(
      async () => (((await getProfileSync(store, 'test'))?.lastPollAt ?? 0) > running.updatedAt ? true : undefined),
      { what: 'a poll after the job started' },
    );
    await setUpstream(sim, { slurmctld: 'down', slurmdbd: 'down' });
    const s = sim;
    // Until the job has ended unseen, and polls have gone on with answers older than twice the
    // cache lifetime (all the proxy can give while the scheduler is down).
    await waitFor(
      async () => {
        const sync = await getProfileSync(store, 'test');
        const ended = s.server.cluster.getJob(running.jobId as number)?.state === 'COMPLETED';
        const pastLifetime = (sync?.lastPollAgeSec ?? 0) > 2 * (sync?.lastMaxAgeSec ?? Number.POSITIVE_INFINITY);
        return ended && pastLifetime ? true : undefined;
      },
      { what: 'the job to end and polls on answers past twice their lifetime', timeoutMs: 20_000 },
    );
    const during = (await listRequests(store, {}))[0];
    expect(during?.state).toBe('running');
    // The poller kept going on stale answers, and says so: a stale answer is not a successful poll.
    const sync = await getProfileSync(store, 'test');
    expect(sync, JSON.stringify(sync)).toMatchObject({ lastPollOk: false, lastPollStale: true });
    await setUpstream(sim, { slurmctld: 'up', slurmdbd: 'up' });
    await td.waitForState(id, 'completed');
    expect(await td.states(id)).not.toContain('lost');
    expect(await td.states(id)).not.toContain('failed');
  }, 40_000);

  it('with accounting down, a job that left the controller is not concluded; it resolves when accounting returns', async () => {
    sim = await startSim({ minJobAgeSec: 0 });
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 2\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const running = await td.waitForState(id, 'running');
    await setUpstream(sim, { slurmdbd: 'down' });
    // Polls over two cache lifetimes after the job left the controller: each found it gone from
    // a fresh listing and asked accounting in vain.
    const s = sim;
    const leftAt = await waitFor(
      async () => {
        const job = s.server.cluster.getJob(running.jobId as number);
        return job && !s.server.cluster.isInController(job) ? Date.now() : undefined;
      },
      { what: 'the job to leave the controller', intervalMs: 50 },
    );
    const store = td.daemon.history.store;
    await waitFor(
      async () => (((await getProfileSync(store, 'test'))?.lastPollAt ?? 0) > leftAt + 2 * 2000 ? true : undefined),
      { what: 'polls two cache lifetimes after the job left' },
    );
    expect(await td.states(id)).toEqual(['accepted', 'queued', 'submitting', 'submitted', 'running']);
    // …and says so, where admins look (the profiles page and /metrics read this).
    expect(await getProfileSync(store, 'test')).toMatchObject({
      accountingOk: false,
      accountingError: expect.stringMatching(/HTTP 500|unavailable/),
    });
    await setUpstream(sim, { slurmdbd: 'up' });
    await td.waitForState(id, 'completed');
    expect(await getProfileSync(store, 'test')).toMatchObject({ accountingOk: true, accountingError: null });
  }, 40_000);

  it('a job in neither controller nor accounting becomes lost after the grace period, then resolves', async () => {
    sim = await startSim({ minJobAgeSec: 0 });
    const proxy = await startFlakyProxy(sim.url);
    try {
      // A short grace: its length is not what is tested, that it is waited out is.
      td = await startTestDaemon(proxy.url, redis.url, { lostGraceMs: 1500 });
      const id = await td.daemon.submit({
        spec: spec(sim, { script: '#!/bin/sh\nsleep 1\n' }),
        owner: 'default',
        actor: 'test',
        origin: 'api',
      });
      await td.waitForState(id, 'running');
      // An accounting that has no record of the job (lagging, or purged).
      proxy.rewrite = (req, body) =>
        req.url.startsWith('/scheddb/') ? body.replace(/"jobs":\[.*\],"meta"/s, '"jobs":[],"meta"') : body;
      const lost = await td.waitForState(id, 'lost', 30_000);
      expect(lost.state).toBe('lost');
      const detail = (await transitionsOf(td.daemon.history.store, id)).at(-1)?.detail;
      expect(detail).toMatch(/missing from the controller and from accounting .* not assumed finished/);
      proxy.rewrite = undefined;
      await td.waitForState(id, 'completed');
    } finally {
      await proxy.close();
    }
  }, 60_000);
});
