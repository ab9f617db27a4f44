import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/lib/clock.js';
import { SchedClient } from '../../../src/sched/client.js';
import { UpstreamUnavailableError } from '../../../src/sched/sched-errors.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';
import { untilNextSecond } from '../../helpers/wall-clock.js';

import { clientFile, clients, connect, profile, sim, spec } from './client-files.js';

const silent = pino({ level: 'silent' });

/** The scheduler client against a simulator: freshness, stale-if-error, rate limits, idempotent submission (client.test.ts has the rest). */

clientFile();

describe('freshness, stale-if-error, rate limits', () => {
  const setUpstream = (target: TestSim, state: Record<string, string>) =>
    http(`${target.url}/_sim/upstream`, { headers: target.admin, method: 'PUT', body: state });

  it('every read carries its freshness; polling reads accept stale data while the scheduler is down', async () => {
    // The proxy's clock is moved past the 2 s lifetime: the client reads ages from its headers.
    const clock = new ManualClock();
    const clocked = await startSim({}, false, [], clock);
    try {
      const client = await connect({ retries: { attempts: 1 } }, ALICE_TOKEN, clocked.url);
      const fresh = await client.listJobs({ forPolling: true });
      expect(fresh.freshness).toMatchObject({ stale: false, maxAgeSec: 2 });
      expect(fresh.freshness.ageSec).toBeLessThanOrEqual(2);
      await setUpstream(clocked, { slurmctld: 'down' });
      await clock.advance(2600);
      const stale = await client.listJobs({ forPolling: true });
      expect(stale.freshness.stale).toBe(true);
      expect(stale.freshness.ageSec).toBeGreaterThanOrEqual(2);
      expect(stale.data.jobs.map((j) => j.job_id)).toEqual(fresh.data.jobs.map((j) => j.job_id));
      await expect(client.listJobs()).rejects.toThrow(UpstreamUnavailableError);
    } finally {
      await clocked.stop();
    }
  });

  it('the poller’s active-states accounting query keeps one URL, so an outage is served its cached answer', async () => {
    const clock = new ManualClock();
    const clocked = await startSim({}, false, [], clock);
    const client = await connect({ retries: { attempts: 1 } }, ALICE_TOKEN, clocked.url);
    const { job_id } = await client.submit(
      spec({ name: 'active-states', script: '#!/bin/sh\nsleep 5\n' }),
      'marker-active-states',
    );
    const query = { jobIds: [job_id], startTime: Math.floor(Date.now() / 1000) - 60, states: ['PENDING', 'RUNNING'] };
    const fresh = await client.listAccountingJobs(query, { forPolling: true });
    expect(fresh.data.map((j) => j.job_id)).toEqual([job_id]);
    await setUpstream(clocked, { slurmdbd: 'down' });
    try {
      // Past the accounting cache lifetime (the proxy's clock), and into the next second of real
      // time, which the client's URLs are made from: `end_time=now` would be a new URL by now.
      await clock.advance(2100);
      await untilNextSecond();
      const stale = await client.listAccountingJobs(query, { forPolling: true });
      expect(stale.freshness.stale).toBe(true);
      expect(stale.data.map((j) => j.job_id)).toEqual([job_id]);
    } finally {
      await setUpstream(clocked, { slurmdbd: 'up' });
      await client.cancel(job_id);
      await clocked.stop();
    }
  });

  it('429: retried with backoff honouring Retry-After, then succeeds', async () => {
    const limited = await startSim({ rateLimit: { capacity: 2, refillPerSecond: 1 } });
    try {
      const client = await connect(
        { rateLimit: { capacity: 50, refillPerSecond: 50 }, retries: { attempts: 4, baseDelayMs: 10, maxDelayMs: 50 } },
        ALICE_TOKEN,
        limited.url,
      );
      const started = Date.now();
      for (let i = 0; i < 3; i++) await client.listAccountingJobs({ jobNames: [`n${i}`] });
      const retries = client.logLines.filter((l) => l.msg === 'scheduler request failed; retrying');
      expect(retries.length).toBeGreaterThan(0);
      expect(retries[0]).toMatchObject({ code: 'SCHEDFLOW_ERR_SCHED_RATE_LIMITED', status: 429 });
      // Retry-After says 1 s; backoff alone would have waited at most 50 ms.
      expect(retries[0]?.delayMs as number).toBeGreaterThanOrEqual(1000);
      expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    } finally {
      await limited.stop();
    }
  });

  it('429: a Retry-After is waited out on the client’s clock, which a test moves instead of waiting', async () => {
    // One token every 100 s at the proxy: each 429 says Retry-After: 100, so on real time the
    // reads below would take minutes; both sides read the same ManualClock, moved by the test.
    const clock = new ManualClock();
    const limited = await startSim({ rateLimit: { capacity: 3, refillPerSecond: 0.01 } }, false, [], clock);
    try {
      const client = await SchedClient.connect(
        profile(
          {
            rateLimit: { capacity: 50, refillPerSecond: 50 },
            retries: { attempts: 4, baseDelayMs: 10, maxDelayMs: 50 },
          },
          limited.url,
        ),
        { logger: silent, env: { SCHED_TOKEN: ALICE_TOKEN }, clock },
      );
      clients.push(client);
      let done = false;
      const reads = (async () => {
        for (let i = 0; i < 4; i++) await client.listAccountingJobs({ jobNames: [`c${i}`] });
        done = true;
      })();
      let moved = 0;
      while (!done) {
        // A 429 answered (real I/O), and the client asleep on its clock: move it past Retry-After.
        await waitFor(async () => (done || clock.pending > 0 ? true : undefined), { intervalMs: 10, what: 'a 429' });
        if (done) break;
        await clock.advance(100_000);
        moved++;
        expect(moved).toBeLessThan(10);
      }
      await reads;
      // Each move was a Retry-After of 100 s waited out on the clock (the test's timeout is 30 s).
      expect(moved).toBeGreaterThan(0);
    } finally {
      await limited.stop();
    }
  });

  it('the client-side budget keeps a burst under the proxy limit: no 429 at all', async () => {
    const limited = await startSim({ rateLimit: { capacity: 3, refillPerSecond: 4 } });
    try {
      const client = await connect({ rateLimit: { capacity: 2, refillPerSecond: 3 } }, ALICE_TOKEN, limited.url);
      await Promise.all(Array.from({ length: 8 }, (_, i) => client.listAccountingJobs({ jobNames: [`b${i}`] })));
      expect(client.logLines.filter((l) => l.msg === 'scheduler request failed; retrying')).toEqual([]);
    } finally {
      await limited.stop();
    }
  });
});

describe('idempotent submission', () => {
  it('finds a job by its marker, in the controller and in accounting', async () => {
    const client = await connect();
    const { job_id } = await client.submit(spec({ name: 'marked' }), 'marker-1');
    expect((await client.findByMarker('marker-1'))?.job_id).toBe(job_id);
    expect(await client.findByMarker('marker-unknown')).toBeNull();
  });

  it('a job that has left the controller listing is found by its marker in accounting', async () => {
    const proxy = await startFlakyProxy(sim.url);
    try {
      const client = await connect({}, ALICE_TOKEN, proxy.url);
      const { job_id } = await client.submit(spec({ name: 'gone-from-controller' }), 'marker-acct');
      // slurmdbd's window ends at now, exclusive: a job that became eligible this very second is
      // not in it yet (as on a real cluster, where its record may not even have arrived). The
      // simulator's accounting keeps real time, in whole seconds.
      await untilNextSecond();
      // What the controller says once MinJobAge has passed: the job is no longer listed.
      proxy.rewrite = (req, body) =>
        /\/sched\/[^/]+\/jobs(\?|$)/.test(req.url) ? JSON.stringify({ ...JSON.parse(body), jobs: [] }) : body;
      const found = await client.findByMarker('marker-acct', { submittedAfter: Math.floor(Date.now() / 1000) - 60 });
      expect(found?.job_id).toBe(job_id);
      expect(proxy.requests.some((r) => r.url.includes('/scheddb/'))).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it('an answer lost and the marker lookup failing too: no second POST, a retryable error', async () => {
    const proxy = await startFlakyProxy(sim.url);
    try {
      const client = await connect({}, ALICE_TOKEN, proxy.url);
      proxy.dropAnswerOnce((r) => r.method === 'POST');
      for (let i = 0; i < 10; i++) proxy.dropAnswerOnce((r) => r.method === 'GET');
      const error = await client.submit(spec({ name: 'lost-twice' }), 'lost-2').catch((e: unknown) => e);
      expect(error).toMatchObject({ retryable: true });
      expect(proxy.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
      expect(client.logLines.some((l) => /not submitting again/.test(l.msg))).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it('an answer lost after Slurm accepted the job: the retry adopts it, one job exists', async () => {
    const proxy = await startFlakyProxy(sim.url);
    try {
      const client = await connect({}, ALICE_TOKEN, proxy.url);
      proxy.dropAnswerOnce((r) => r.method === 'POST');
      const result = await client.submit(spec({ name: 'lost-answer' }), 'lost-1');
      expect(result.adopted).toBe(true);
      const submits = proxy.requests.filter((r) => r.method === 'POST');
      expect(submits).toHaveLength(1);
      const history = await client.listAccountingJobs({ jobNames: ['lost-answer'] });
      expect(history.data.map((j) => j.job_id)).toEqual([result.job_id]);
    } finally {
      await proxy.close();
    }
  });
});
