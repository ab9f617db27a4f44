import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { history } from '../../../src/db/accounting.js';
import { getRequest, transitionsOf } from '../../../src/db/requests.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';
import { spec } from './daemon-files.js';

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

/** A daemon on a simulator: each way a request ends, and the import of accounting records. */

describe('a request reaches its end state, recorded with every transition', () => {
  it('COMPLETED, through accepted → queued → submitting → submitted → running → completed', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 3\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const row = await td.waitForState(id, 'completed');
    expect(row).toMatchObject({ exitCode: 0, adopted: false });
    expect(row.jobId).toEqual(expect.any(Number));
    expect(await td.states(id)).toEqual(['accepted', 'queued', 'submitting', 'submitted', 'running', 'completed']);
    const sources = (await transitionsOf(td.daemon.history.store, id)).map((t) => t.source);
    expect(sources.at(-1)).toBe('accounting');
    expect(row.startedAt).toBeLessThanOrEqual(row.endedAt ?? 0);
  });

  it('a failing script is FAILED with its exit code', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nexit 7\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    expect(await td.waitForState(id, 'failed')).toMatchObject({ exitCode: 7, reason: 'NonZeroExitCode' });
  });

  it('a job cancelled on the cluster is CANCELLED', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 60\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const running = await td.waitForState(id, 'running');
    const res = await http(`${sim.url}/sched/v0.0.44/job/${running.jobId}`, {
      method: 'DELETE',
      headers: bearer(ALICE_TOKEN),
    });
    expect(res.status).toBe(200);
    expect(await td.waitForState(id, 'cancelled')).toMatchObject({ signal: 15 });
  });

  it('a cancelled job still completing is recorded once its script has ended, with how it ended', async () => {
    // KillWait past the script's two seconds: it ends by its own exit, not a SIGKILL.
    sim = await startSim({ killWaitSec: 10 });
    td = await startTestDaemon(sim.url, redis.url);
    // The script takes the SIGTERM and exits 3 two seconds later: until then the controller
    // says CANCELLED,COMPLETING, as a real slurmctld does, and neither record has the exit code.
    const script = "#!/bin/sh\ntrap 'sleep 2; exit 3' TERM\nsleep 60 &\nwait\n";
    const id = await td.daemon.submit({ spec: spec(sim, { script }), owner: 'default', actor: 'test', origin: 'api' });
    const running = await td.waitForState(id, 'running');
    const res = await http(`${sim.url}/sched/v0.0.44/job/${running.jobId}`, {
      method: 'DELETE',
      headers: bearer(ALICE_TOKEN),
    });
    expect(res.status).toBe(200);
    expect(await td.waitForState(id, 'cancelled')).toMatchObject({ exitCode: 3, signal: null });
  });

  it('a state change seen in the light listing is recorded with the full record: reason, start time', async () => {
    sim = await startSim({ cpus: 1 });
    td = await startTestDaemon(sim.url, redis.url);
    const blocker = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 6\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    // jobs/state carries neither; they come from the full record fetched for the change (or, when
    // the proxy's cached accounting answer is from before the change, at the next cycle).
    const store = td.daemon.history.store;
    const row = (id: string) => getRequest(store, id);
    const running = await waitFor(
      async () => {
        const r = await row(blocker);
        return r?.state === 'running' && r.startedAt !== null ? r : undefined;
      },
      { what: 'the running job with its start time' },
    );
    const waiting = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\ntrue\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await waitFor(
      async () => {
        const r = await row(waiting);
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
    const id = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 1\nexit 4\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(id, 'pending');
    const ended = await td.waitForState(id, 'failed', 15_000);
    expect(ended).toMatchObject({ exitCode: 4 });
    expect((await transitionsOf(td.daemon.history.store, id)).at(-1)?.source).toBe('accounting');
  });

  it('a job over its time limit is TIMEOUT', async () => {
    sim = await startSim({ timeScale: 60 });
    td = await startTestDaemon(sim.url, redis.url);
    const id = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 30\n', time_limit: 1 }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(id, 'timeout');
  });

  it('a submission the scheduler refuses fails the request with its message, without retrying forever', async () => {
    sim = await startSim();
    // A profile that does not say which account its token is bound to: nothing refuses the
    // job at the door (src/requests/door.ts), so the scheduler's own refusal is what is tested.
    td = await startTestDaemon(sim.url, redis.url, {}, {}, {}, { unbound: {} });
    const id = await td.daemon.submit({
      profile: 'unbound',
      spec: spec(sim, { account: 'other' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const row = await td.waitForState(id, 'submit_failed');
    expect(row.errorCode).toBe('SCHEDFLOW_ERR_SCHED_FORBIDDEN');
    expect(row.errorMessage).toMatch(/account restriction/);
    // The history is written before BullMQ records the attempt's end: wait for the job to finish.
    const submitQueue = td.daemon.queues.submit;
    const job = await waitFor(
      async () => {
        const state = await submitQueue.getJobState(id);
        return state === 'completed' || state === 'failed' ? submitQueue.getJob(id) : undefined;
      },
      { what: `submit job ${id} to finish` },
    );
    expect(job?.attemptsMade).toBe(1);
  });
});

describe('reconcile', () => {
  it('imports accounting records: own jobs get accounting fields, others are external', async () => {
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url);
    const own = await td.daemon.submit({
      spec: spec(sim, { name: 'own' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
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
    const store = td.daemon.history.store;
    const rows = await waitFor(
      async () => {
        const h = await history(store);
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
