import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRequest, transitionsOf } from '../../../src/db/requests.js';
import { openHistoryOf, startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
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

/** A daemon on a simulator: restarts of the simulator, Redis and the daemon, and submissions BullMQ gave up on. */

describe('restarts', () => {
  it('a simulator restart: a job that was running is NODE_FAIL, a pending one still completes', async () => {
    sim = await startSim({ cpus: 1 });
    td = await startTestDaemon(sim.url, redis.url);
    const running = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 60\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    // Submitted once the first holds the only CPU: two submit workers may take two requests in
    // either order, and a second that ran first was never pending (seen under load).
    await td.waitForState(running, 'running');
    const pending = await td.daemon.submit({
      spec: spec(sim, { name: 'second' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(pending, 'pending');
    await sim.restart();
    await td.waitForState(running, 'node_fail');
    await td.waitForState(pending, 'completed');
  }, 40_000);

  it('Redis killed and restarted: queued work is kept and new work flows', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const first = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 3\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(first, 'running');
    await redis.restart();
    const second = await td.daemon.submit({
      spec: spec(sim, { name: 'after-redis' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(first, 'completed', 30_000);
    await td.waitForState(second, 'completed', 30_000);
  }, 60_000);

  it('a daemon restart tracks every unfinished request again and submits what was only accepted', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const longJob = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 5\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(longJob, 'running');
    await td.restart();
    await td.waitForState(longJob, 'completed');
    expect((await td.states(longJob)).filter((s) => s === 'submitted')).toHaveLength(1);
  }, 40_000);
});

describe('a submit BullMQ gives up on', () => {
  const failedBy = (job: Job | undefined) => job?.failedReason;

  it('fails its request with the last error instead of leaving it submitting', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    await setUpstream(sim, { slurmctld: 'down' });
    const { store } = td.daemon.history;
    await createRequest(store, {
      id: 'given-up',
      profile: 'test',
      name: 'x',
      spec: spec(sim),
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at: Date.now(),
      source: 'api',
    });
    // One attempt instead of the queue's dozen, so giving up comes at once.
    await td.daemon.queues.submit.add('submit', { requestId: 'given-up' }, { jobId: 'given-up', attempts: 1 });
    const row = await td.waitForState('given-up', 'submit_failed');
    expect(row.jobId).toBeNull();
    const last = (await transitionsOf(store, 'given-up')).at(-1);
    expect(last?.detail).toMatch(/^gave up after 1 submit attempt\(s\): .+/);
    expect(failedBy(await td.daemon.queues.submit.getJob('given-up'))).toBe(last?.detail?.replace(/^[^:]+: /, ''));
  }, 30_000);

  it('a stored spec no scheduler would take (accepted before the door checked it) fails at once, never retried', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    await createRequest(td.daemon.history.store, {
      id: 'bad-spec',
      profile: 'test',
      name: 'x',
      spec: { ...spec(sim), time_limt: 5 },
      owner: 'default',
      actor: 'test',
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
      const history = await openHistoryOf(td as TestDaemon);
      await createRequest(history.store, {
        id: 'orphan',
        profile: 'test',
        name: 'x',
        spec: spec(sim as TestSim),
        owner: 'default',
        actor: 'test',
        origin: 'api',
        at: Date.now(),
        source: 'api',
      });
      await history.close();
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
