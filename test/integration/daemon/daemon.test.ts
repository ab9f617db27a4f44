import { join } from 'node:path';
import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { getProfileSync, history } from '../../../src/db/accounting.js';
import { openDatabase } from '../../../src/db/database.js';
import { createRequest, getRequest, listRequests, transitionsOf } from '../../../src/db/requests.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';

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

function spec(s: TestSim, overrides: Record<string, unknown> = {}) {
  return jobSpecSchema.parse({
    name: 'daemon-test',
    script: '#!/bin/sh\ntrue\n',
    current_working_directory: s.workDir,
    ...overrides,
  });
}

async function setUpstream(s: TestSim, state: Record<string, 'up' | 'down'>) {
  const res = await http(`${s.url}/_sim/upstream`, { method: 'PUT', body: state });
  expect(res.status).toBe(200);
}

describe('a request reaches its end state, recorded with every transition', () => {
  it('COMPLETED, through accepted → queued → submitting → submitted → running → completed', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\nsleep 3\n' }), origin: 'api' });
    const row = await td.waitForState(id, 'completed');
    expect(row).toMatchObject({ exitCode: 0, adopted: false });
    expect(row.jobId).toEqual(expect.any(Number));
    expect(td.states(id)).toEqual(['accepted', 'queued', 'submitting', 'submitted', 'running', 'completed']);
    const sources = transitionsOf(td.daemon.history.db, id).map((t) => t.source);
    expect(sources.at(-1)).toBe('accounting');
    expect(row.startedAt).toBeLessThanOrEqual(row.endedAt ?? 0);
  });

  it('a failing script is FAILED with its exit code', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\nexit 7\n' }), origin: 'api' });
    expect(await td.waitForState(id, 'failed')).toMatchObject({ exitCode: 7, reason: 'NonZeroExitCode' });
  });

  it('a job cancelled on the cluster is CANCELLED', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\nsleep 60\n' }), origin: 'api' });
    const running = await td.waitForState(id, 'running');
    const res = await http(`${sim.url}/sched/v0.0.44/job/${running.jobId}`, {
      method: 'DELETE',
      headers: bearer(ALICE_TOKEN),
    });
    expect(res.status).toBe(200);
    expect(await td.waitForState(id, 'cancelled')).toMatchObject({ signal: 15 });
  });

  it('a state change seen in the light listing is recorded with the full record: reason, start time', async () => {
    sim = await startSim({ cpus: 1 });
    td = await startTestDaemon(sim.url, redis.url);
    const blocker = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\nsleep 6\n' }), origin: 'api' });
    // jobs/state carries neither; they come from the full record fetched for the change (or, when
    // the proxy's cached accounting answer is from before the change, at the next cycle).
    const row = (id: string) => getRequest(td?.daemon.history.db as never, id);
    const running = await waitFor(
      async () => {
        const r = row(blocker);
        return r?.state === 'running' && r.startedAt !== null ? r : undefined;
      },
      { what: 'the running job with its start time' },
    );
    const waiting = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\ntrue\n' }), origin: 'api' });
    await waitFor(
      async () => {
        const r = row(waiting);
        return r?.state === 'pending' && r.reason === 'Resources' ? r : undefined;
      },
      { what: "the pending job with Slurm's reason" },
    );
    const done = await td.waitForState(waiting, 'completed', 30_000);
    expect(done.startedAt).toBeGreaterThanOrEqual(running.startedAt ?? 0);
  });

  it('accounting cached for 30 s: the answer fetched when the job started does not hold back its end', async () => {
    sim = await startSim({
      cpus: 1,
      cacheTtlSec: { jobs: 2, job: 2, jobsState: 2, ping: 2, meta: 60, partitions: 2, nodes: 2, dbJobs: 30, dbJob: 30 },
    });
    // No import in between: the end must come from polling.
    td = await startTestDaemon(sim.url, redis.url, { reconcileEveryMs: 600_000 });
    // A job schedflow does not follow takes the CPU, so the one it follows is PENDING, then RUNNING
    // (polling fetches the full record at each change, with the same job ids), then fails.
    const blocker = await http(`${sim.url}/sched/v0.0.44/job/submit`, {
      method: 'POST',
      headers: bearer(ALICE_TOKEN),
      body: {
        job: {
          name: 'blocker',
          script: '#!/bin/sh\nsleep 3\n',
          current_working_directory: sim.workDir,
          environment: ['PATH=/usr/bin:/bin'],
        },
      },
    });
    expect(blocker.status).toBe(200);
    const id = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\nsleep 1\nexit 4\n' }), origin: 'api' });
    await td.waitForState(id, 'pending');
    const ended = await td.waitForState(id, 'failed', 15_000);
    expect(ended).toMatchObject({ exitCode: 4 });
    expect(transitionsOf(td.daemon.history.db, id).at(-1)?.source).toBe('accounting');
  });

  it('a job over its time limit is TIMEOUT', async () => {
    sim = await startSim({ timeScale: 60 });
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 30\n', time_limit: 1 }),
      origin: 'api',
    });
    await td.waitForState(id, 'timeout');
  });

  it('a submission the scheduler refuses fails the request with its message, without retrying forever', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({ spec: spec(sim, { account: 'other' }), origin: 'api' });
    const row = await td.waitForState(id, 'submit_failed');
    expect(row.errorCode).toBe('SCHEDFLOW_ERR_SCHED_FORBIDDEN');
    expect(row.errorMessage).toMatch(/account restriction/);
    const job = await td.daemon.queues.submit.getJob(id);
    expect(job?.attemptsMade).toBe(1);
  });
});

describe('polling', () => {
  it('costs the same few requests per cycle whatever the number of tracked jobs', async () => {
    sim = await startSim({ cpus: 64 });
    const proxy = await startFlakyProxy(sim.url);
    try {
      td = await startTestDaemon(proxy.url, redis.url, {}, { rateLimit: { capacity: 100, refillPerSecond: 100 } });
      const daemon = td.daemon;
      const ids = await Promise.all(
        Array.from({ length: 30 }, () =>
          daemon.submit({ spec: spec(sim as TestSim, { script: '#!/bin/sh\nsleep 8\n' }), origin: 'api' }),
        ),
      );
      await waitFor(
        async () => (listRequests(daemon.history.db, { state: ['running'] }).length === ids.length ? true : undefined),
        { what: 'all jobs running' },
      );
      const before = proxy.requests.length;
      await new Promise((r) => setTimeout(r, 4500));
      const during = proxy.requests.slice(before).filter((r) => r.method === 'GET');
      const stateCalls = during.filter((r) => r.url.includes('/jobs/state'));
      // Two cycles at most in 4.5 s (the 2 s cache lifetime sets the interval), one request each.
      expect(stateCalls.length).toBeGreaterThanOrEqual(1);
      expect(stateCalls.length).toBeLessThanOrEqual(3);
      expect(during.filter((r) => /\/job\/\d+/.test(r.url))).toEqual([]);
      expect(during.length).toBeLessThanOrEqual(stateCalls.length * 2 + 1);
    } finally {
      await proxy.close();
    }
  });

  it('an outage longer than the cache lifetime loses nothing and fails nothing; tracking resumes', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\nsleep 6\n' }), origin: 'api' });
    const running = await td.waitForState(id, 'running');
    // A poll has seen the job (so the proxy holds an answer to fall back on) before the outage begins.
    const db = td.daemon.history.db;
    await waitFor(async () => ((getProfileSync(db, 'test')?.lastPollAt ?? 0) > running.updatedAt ? true : undefined), {
      what: 'a poll after the job started',
    });
    await setUpstream(sim, { slurmctld: 'down', slurmdbd: 'down' });
    await new Promise((r) => setTimeout(r, 8000));
    const during = listRequests(td.daemon.history.db, {})[0];
    expect(during?.state).toBe('running');
    // The poller kept going on stale answers, and says so: a stale answer is not a successful poll.
    const sync = getProfileSync(td.daemon.history.db, 'test');
    expect(sync, JSON.stringify(sync)).toMatchObject({ lastPollOk: false, lastPollStale: true });
    await setUpstream(sim, { slurmctld: 'up', slurmdbd: 'up' });
    await td.waitForState(id, 'completed');
    expect(td.states(id)).not.toContain('lost');
    expect(td.states(id)).not.toContain('failed');
  }, 40_000);

  it('with accounting down, a job that left the controller is not concluded; it resolves when accounting returns', async () => {
    sim = await startSim({ minJobAgeSec: 0 });
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\nsleep 2\n' }), origin: 'api' });
    await td.waitForState(id, 'running');
    await setUpstream(sim, { slurmdbd: 'down' });
    await new Promise((r) => setTimeout(r, 6000));
    expect(td.states(id)).toEqual(['accepted', 'queued', 'submitting', 'submitted', 'running']);
    // …and says so, where admins look (the profiles page and /metrics read this).
    expect(getProfileSync(td.daemon.history.db, 'test')).toMatchObject({
      accountingOk: false,
      accountingError: expect.stringMatching(/HTTP 500|unavailable/),
    });
    await setUpstream(sim, { slurmdbd: 'up' });
    await td.waitForState(id, 'completed');
    expect(getProfileSync(td.daemon.history.db, 'test')).toMatchObject({ accountingOk: true, accountingError: null });
  }, 40_000);

  it('a job in neither controller nor accounting becomes lost after the grace period, then resolves', async () => {
    sim = await startSim({ minJobAgeSec: 0 });
    const proxy = await startFlakyProxy(sim.url);
    try {
      td = await startTestDaemon(proxy.url, redis.url);
      const id = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\nsleep 1\n' }), origin: 'api' });
      await td.waitForState(id, 'running');
      // An accounting that has no record of the job (lagging, or purged).
      proxy.rewrite = (req, body) =>
        req.url.startsWith('/scheddb/') ? body.replace(/"jobs":\[.*\],"meta"/s, '"jobs":[],"meta"') : body;
      const lost = await td.waitForState(id, 'lost', 30_000);
      expect(lost.state).toBe('lost');
      const detail = transitionsOf(td.daemon.history.db, id).at(-1)?.detail;
      expect(detail).toMatch(/missing from the controller and from accounting .* not assumed finished/);
      proxy.rewrite = undefined;
      await td.waitForState(id, 'completed');
    } finally {
      await proxy.close();
    }
  }, 60_000);

  it('a simulator restart: a job that was running is NODE_FAIL, a pending one still completes', async () => {
    sim = await startSim({ cpus: 1 });
    td = await startTestDaemon(sim.url, redis.url);
    const running = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\nsleep 60\n' }), origin: 'api' });
    const pending = await td.daemon.submit({ spec: spec(sim, { name: 'second' }), origin: 'api' });
    await td.waitForState(running, 'running');
    await td.waitForState(pending, 'pending');
    await sim.restart();
    await td.waitForState(running, 'node_fail');
    await td.waitForState(pending, 'completed');
  }, 40_000);
});

describe('restarts', () => {
  it('Redis killed and restarted: queued work is kept and new work flows', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const first = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\nsleep 3\n' }), origin: 'api' });
    await td.waitForState(first, 'running');
    await redis.restart();
    const second = await td.daemon.submit({ spec: spec(sim, { name: 'after-redis' }), origin: 'api' });
    await td.waitForState(first, 'completed', 30_000);
    await td.waitForState(second, 'completed', 30_000);
  }, 60_000);

  it('a daemon restart tracks every unfinished request again and submits what was only accepted', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const longJob = await td.daemon.submit({ spec: spec(sim, { script: '#!/bin/sh\nsleep 5\n' }), origin: 'api' });
    await td.waitForState(longJob, 'running');
    await td.restart();
    await td.waitForState(longJob, 'completed');
    expect(td.states(longJob).filter((s) => s === 'submitted')).toHaveLength(1);
  }, 40_000);
});

describe('a submit BullMQ gives up on', () => {
  const failedBy = (job: Job | undefined) => job?.failedReason;

  it('fails its request with the last error instead of leaving it submitting', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    await setUpstream(sim, { slurmctld: 'down' });
    const { db } = td.daemon.history;
    createRequest(db, {
      id: 'given-up',
      profile: 'test',
      name: 'x',
      spec: spec(sim),
      origin: 'api',
      at: Date.now(),
      source: 'api',
    });
    // One attempt instead of the queue's dozen, so giving up comes at once.
    await td.daemon.queues.submit.add('submit', { requestId: 'given-up' }, { jobId: 'given-up', attempts: 1 });
    const row = await td.waitForState('given-up', 'submit_failed');
    expect(row.jobId).toBeNull();
    const last = transitionsOf(db, 'given-up').at(-1);
    expect(last?.detail).toMatch(/^gave up after 1 submit attempt\(s\): .+/);
    expect(failedBy(await td.daemon.queues.submit.getJob('given-up'))).toBe(last?.detail?.replace(/^[^:]+: /, ''));
  }, 30_000);

  it('a stored spec no scheduler would take (accepted before the door checked it) fails at once, never retried', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const { db } = td.daemon.history;
    createRequest(db, {
      id: 'bad-spec',
      profile: 'test',
      name: 'x',
      spec: { ...spec(sim), time_limt: 5 },
      origin: 'api',
      at: Date.now(),
      source: 'api',
    });
    // The queue's own dozen attempts: only a fatal error ends it at the first.
    await td.daemon.queues.submit.add('submit', { requestId: 'bad-spec' }, { jobId: 'bad-spec' });
    const row = await td.waitForState('bad-spec', 'submit_failed', 10_000);
    expect(row).toMatchObject({ errorCode: 'SCHEDFLOW_ERR_INVALID_SPEC', jobId: null });
    expect(row.errorMessage).toMatch(/time_limt: unknown member "time_limt"; did you mean "time_limit"\?/);
    expect((await td.daemon.queues.submit.getJob('bad-spec'))?.attemptsMade).toBe(1);
  }, 30_000);

  it('without the history knowing (the process died first) is retried at restart', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const { queuePrefix } = td.daemon.config;
    const connection = { host: new URL(redis.url).hostname, port: Number(new URL(redis.url).port) };
    await td.restart(async () => {
      const history = openDatabase(join(td?.dataDir as string, 'history.sqlite'));
      createRequest(history.db, {
        id: 'orphan',
        profile: 'test',
        name: 'x',
        spec: spec(sim as TestSim),
        origin: 'api',
        at: Date.now(),
        source: 'api',
      });
      history.close();
      const queue = new Queue('submit', { connection, prefix: queuePrefix });
      await queue.add('submit', { requestId: 'orphan' }, { jobId: 'orphan', attempts: 1 });
      // A worker that fails the job without recording anything, as a process killed mid-attempt would leave it.
      const worker = new Worker(
        'submit',
        async () => {
          throw new UnrecoverableError('process died');
        },
        { connection, prefix: queuePrefix },
      );
      await waitFor(async () => ((await queue.getJob('orphan'))?.failedReason ? true : undefined), {
        what: 'the job to fail',
      });
      await worker.close();
      await queue.close();
    });
    const row = await td.waitForState('orphan', 'completed');
    expect(row.jobId).toEqual(expect.any(Number));
  }, 30_000);
});

describe('reconcile', () => {
  it('imports accounting records: own jobs get accounting fields, others are external', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const own = await td.daemon.submit({ spec: spec(sim, { name: 'own' }), origin: 'api' });
    const external = await http(`${sim.url}/sched/v0.0.44/job/submit`, {
      method: 'POST',
      headers: bearer(ALICE_TOKEN),
      body: {
        job: {
          name: 'not-ours',
          script: '#!/bin/sh\ntrue\n',
          current_working_directory: sim.workDir,
          environment: ['PATH=/usr/bin:/bin'],
        },
      },
    });
    const externalId = (external.json as { job_id: number }).job_id;
    await td.waitForState(own, 'completed');
    const rows = await waitFor(
      async () => {
        const h = history(td?.daemon.history.db as never);
        const done = (r: { accountingState: string }) => r.accountingState === 'COMPLETED';
        const both = h.some((r) => r.jobId === externalId && done(r)) && h.some((r) => r.requestId === own && done(r));
        return both ? h : undefined;
      },
      { what: 'the reconciler to import both jobs' },
    );
    expect(rows.find((r) => r.jobId === externalId)).toMatchObject({
      external: true,
      accountingState: 'COMPLETED',
      localState: null,
    });
    expect(rows.find((r) => r.requestId === own)).toMatchObject({
      external: false,
      accountingState: 'COMPLETED',
      localState: 'completed',
    });
  }, 30_000);
});
