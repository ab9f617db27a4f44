import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { getRequest, patchRequest, transitionsOf } from '../../../src/db/requests.js';
import { getRun, stepRequests } from '../../../src/db/runs.js';
import { deliveriesOfRequest } from '../../../src/db/webhooks.js';
import { ManualClock, systemClock } from '../../../src/lib/clock.js';
import { createLogger } from '../../../src/logger.js';
import { attemptsOf } from '../../../src/requests/attempts.js';
import { type MoverScheduler, movePendingJobs } from '../../../src/requests/pending-mover.js';
import type { SchedClient } from '../../../src/sched/client.js';
import { JobUpdateRefusedError } from '../../../src/sched/sched-errors.js';
import { apiClient, errorOf, shellSpec } from '../../helpers/api.js';
import { daemonTestEnv, startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';

/**
 * `on_pending` end to end, against the simulator: a job that waits in a DOWN partition (it takes
 * jobs and starts none, reason PartitionDown, as slurmctld's) is moved by update to the next
 * partition of its list once its wait is over, and runs there; one that starts first is never
 * moved. The daemon's clock is a ManualClock: 30 minutes pass in one move of it.
 */

const env = daemonTestEnv();

const PARTITIONS = [
  { name: 'debug', default: true },
  { name: 'wait', state: 'DOWN' as const },
];

async function daemonOnClock(simUrl: string, clock: ManualClock): Promise<TestDaemon> {
  const td = await startTestDaemon(simUrl, env.redis.url, { pipelineTickMs: 300 }, {}, {}, {}, clock);
  env.defer(() => td.stop());
  return td;
}

/** Moves the daemon's clock a second at a time (its polls are due on it) until `done`. */
async function stepUntil(clock: ManualClock, done: () => Promise<boolean>, what: string): Promise<void> {
  for (let steps = 0; !(await done()); steps++) {
    if (steps > 150) throw new Error(`gave up waiting for ${what}`);
    await clock.advance(1_000);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('on_pending', () => {
  it('moves a job that waited its time in a partition to the next one, by update; it runs there', async () => {
    const clock = new ManualClock(Date.now() - 3_600_000);
    const sim = await env.sim({ partitions: PARTITIONS });
    const td = await daemonOnClock(sim.url, clock);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const store = td.daemon.history.store;

    const created = await api.call('POST', '/api/v1/jobs', {
      token,
      body: {
        spec: {
          ...shellSpec('moved', 'echo ran in $SLURM_JOB_PARTITION', sim.workDir),
          partition: 'wait',
          on_pending: { after: '30m', partitions: ['debug'] },
        },
      },
    });
    expect(created.status).toBe(201);
    const { id } = created.json as { id: string };
    await stepUntil(clock, async () => (await getRequest(store, id))?.reason === 'PartitionDown', 'PartitionDown');
    const before = await getRequest(store, id);
    expect(before).toMatchObject({ state: 'pending', pendingMove: { next: 0, partition: 'wait' } });
    // The wait counts from the submission, and the steps above took as many clock seconds as the
    // poller needed to see PartitionDown (over a minute on a loaded machine): 20 s short of the
    // wait, ticks go by (real time) and it stays.
    const dueAt = (before?.submittedAt as number) + 30 * 60_000;
    await clock.advance(dueAt - 20_000 - clock.now());
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await transitionsOf(store, id)).filter((t) => t.source === 'move')).toEqual([]);

    // Now due: the mover's tick (real time) moves it with the clock standing at the due time.
    await clock.advance(20_000);
    await waitFor(async () => (await transitionsOf(store, id)).find((t) => t.source === 'move'), {
      what: 'the move',
    });
    await stepUntil(clock, async () => (await getRequest(store, id))?.state === 'completed', 'the moved job to end');
    const moves = (await transitionsOf(store, id)).filter((t) => t.source === 'move');
    expect(moves).toEqual([
      expect.objectContaining({
        fromState: 'pending',
        toState: 'pending',
        reason: 'waited 30m in wait (PartitionDown); moved to debug',
      }),
    ]);
    const after = await getRequest(store, id);
    // Ran as the same job, the same request; nothing left to move.
    expect(after).toMatchObject({ jobId: before?.jobId, attempt: 1, nextAttemptId: null, pendingMove: null });
    const shown = await api.call('GET', `/api/v1/jobs/${id}`, { token });
    const transitions = (shown.json as { transitions: { to: string; source: string; reason: string | null }[] })
      .transitions;
    expect(transitions).toContainEqual(
      expect.objectContaining({
        to: 'pending',
        source: 'move',
        reason: 'waited 30m in wait (PartitionDown); moved to debug',
      }),
    );
  });

  it('never moves a job that started before its wait was over', async () => {
    const clock = new ManualClock(Date.now() - 3_600_000);
    const sim = await env.sim({ partitions: PARTITIONS });
    const td = await daemonOnClock(sim.url, clock);
    const store = td.daemon.history.store;
    const id = await td.daemon.submit({
      spec: {
        ...(shellSpec('stays', 'sleep 2', sim.workDir) as { name: string; script: string }),
        partition: 'debug',
        on_pending: { after: 60, partitions: ['wait'] },
      },
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await stepUntil(clock, async () => (await getRequest(store, id))?.startedAt != null, 'the job to start');
    // Long past its wait, while it runs and after it ended.
    await clock.advance(3_600_000);
    await stepUntil(clock, async () => (await getRequest(store, id))?.state === 'completed', 'the job to end');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await transitionsOf(store, id)).map((t) => t.source)).not.toContain('move');
    expect(await getRequest(store, id)).toMatchObject({ attempt: 1, nextAttemptId: null, pendingMove: null });
  });

  it('refuses at the door, naming the field, what cannot be followed', async () => {
    const sim = await env.sim({ partitions: PARTITIONS });
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit']);
    const bad = await api.call('POST', '/api/v1/jobs', {
      token,
      body: {
        spec: {
          ...shellSpec('bad', 'true'),
          partition: 'wait',
          on_pending: { after: '0s', partitions: ['wait', 'debug', 'debug'] },
        },
      },
    });
    expect(bad.status).toBe(400);
    const fields = Object.fromEntries((errorOf(bad).fields ?? []).map((f) => [f.path, f.reason]));
    expect(fields).toMatchObject({
      'spec.on_pending.after': '"0s" is not a positive duration',
      'spec.on_pending.partitions.2': 'partition "debug" is named twice',
    });
  });

  it('where Slurm refuses the update, holds the job, cancels it and submits it again there: one live job, the move an attempt', async () => {
    const sim = await env.sim({ partitions: PARTITIONS });
    // The daemon's own mover would move the job by update (the simulator takes it): its tick is an
    // hour apart here, and the mover under test asks the simulator through a client that refuses
    // a change of partition as a site's scheduler may (Slurm's 2002), and passes the rest on.
    const td = await startTestDaemon(sim.url, env.redis.url, { pipelineTickMs: 3_600_000, pollFloorMs: 300 });
    env.defer(() => td.stop());
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const store = td.daemon.history.store;
    const created = await api.call('POST', '/api/v1/jobs', {
      token,
      body: {
        spec: {
          ...shellSpec('resubmitted', 'echo ran in $SLURM_JOB_PARTITION', sim.workDir),
          partition: 'wait',
          on_pending: { after: '1s', partitions: ['debug'] },
        },
        webhook_url: 'http://127.0.0.1:9/never',
      },
    });
    expect(created.status).toBe(201);
    const { id } = created.json as { id: string };
    const first = await waitFor(
      async () => {
        const row = await getRequest(store, id);
        return row?.reason === 'PartitionDown' ? row : undefined;
      },
      { what: 'PartitionDown', timeoutMs: 20_000, intervalMs: 100 },
    );
    const refusing = (client: SchedClient): MoverScheduler => ({
      getJob: (jobId, options) => client.getJob(jobId, options),
      cancel: (jobId, options) => client.cancel(jobId, options),
      updateJob: async (jobId, update, options) => {
        if (update.partition === undefined) return client.updateJob(jobId, update, options);
        throw new JobUpdateRefusedError(
          `Slurm refused the update of job ${jobId}: Access/permission denied (error 2002)`,
          { status: 500, message: 'Access/permission denied', slurmErrors: [], request: `POST job/${jobId}` },
          2002,
          'Access/permission denied',
        );
      },
    });
    const mover = {
      store,
      submitQueue: {
        queue: td.daemon.queues.submit,
        logger: createLogger({ level: 'silent' }),
        redisReachable: () => true,
        sweepLater: () => undefined,
      },
      clock: systemClock,
      logger: createLogger({ level: process.env.LOG_LEVEL ?? 'silent' }),
      scheduler: (profile: string) => refusing(td.daemon.clients.get(profile)),
    };
    // Ticks: the first holds the job and may find only an older record (the proxy caches reads);
    // a later one cancels it and makes the next attempt.
    const next = await waitFor(async () => (await movePendingJobs(mover)).resubmitted[0], {
      what: 'the move by resubmission',
      timeoutMs: 20_000,
      intervalMs: 500,
    });
    const old = await getRequest(store, id);
    expect(old).toMatchObject({ state: 'cancelled', nextAttemptId: next, pendingMove: null });
    const end = (await transitionsOf(store, id)).at(-1);
    expect(end).toMatchObject({ fromState: 'pending', toState: 'cancelled', source: 'move' });
    expect(end?.reason).toMatch(
      /^waited \d+s in wait \(PartitionDown\); moved to debug \(Slurm refused the update: cancelled and submitted again there\)$/,
    );
    // Its job never ran: cancelled while held (read until the proxy's cached record has expired).
    const oldJob = await waitFor(
      async () => {
        const job = (await td.daemon.clients.get('test').getJob(first.jobId as number)).data;
        return job.state === 'CANCELLED' ? job : undefined;
      },
      { what: 'the first job cancelled', timeoutMs: 10_000, intervalMs: 500 },
    );
    expect(oldJob.start_time).toBeNull();

    const done = await td.waitForState(next, 'completed');
    expect(done).toMatchObject({ attempt: 2, firstAttemptId: id, pendingMove: null });
    // Submitted where it moved to, with nothing left of its list.
    expect(done.spec).toMatchObject({ partition: 'debug' });
    expect(done.spec).not.toHaveProperty('on_pending');
    expect(done.jobId).not.toBe(first.jobId);
    expect((await attemptsOf(store, id)).map((a) => [a.attempt, a.state])).toEqual([
      [1, 'cancelled'],
      [2, 'completed'],
    ]);
    // The move's cancel is not the request's end: job.finished goes out once, for the last attempt.
    expect(await deliveriesOfRequest(store, id)).toEqual([]);
    const attemptTransitions = (await transitionsOf(store, next)).map((t) => `${t.toState} (${t.source})`);
    expect(attemptTransitions.slice(0, 2)).toEqual(['accepted (move)', 'queued (move)']);
  });

  it('a move racing a start never cancels the running job: held and found running, it is released and left', async () => {
    const clock = new ManualClock(Date.now() - 3_600_000);
    const sim = await env.sim({ partitions: PARTITIONS });
    // On a clock that stands still the daemon does not poll: its history still says `submitted`
    // while the simulator runs the job, as when a start and a move cross.
    const td = await daemonOnClock(sim.url, clock);
    const store = td.daemon.history.store;
    // It runs until the mover has looked (a sleep could end first on a loaded machine).
    const gate = join(sim.workDir, 'raced.go');
    const id = await td.daemon.submit({
      spec: {
        ...(shellSpec('raced', `while [ ! -e ${gate} ]; do sleep 0.2; done`, sim.workDir) as {
          name: string;
          script: string;
        }),
        partition: 'debug',
        on_pending: { after: 1, partitions: ['wait'] },
      },
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const submitted = await td.waitForState(id, 'submitted');
    const client = td.daemon.clients.get('test');
    await waitFor(
      async () => ((await client.getJob(submitted.jobId as number)).data.state === 'RUNNING' ? true : undefined),
      { what: 'the job to run', timeoutMs: 10_000, intervalMs: 300 },
    );
    expect((await getRequest(store, id))?.state).toBe('submitted');
    // The move half-way (its update refused, the job held and marked), as a mover that raced the start left it.
    await client.updateJob(submitted.jobId as number, { hold: true });
    const move = (await getRequest(store, id))?.pendingMove;
    await patchRequest(store, id, { pendingMove: { ...(move as NonNullable<typeof move>), movingTo: 'wait' } });
    const mover = {
      store,
      submitQueue: {
        queue: td.daemon.queues.submit,
        logger: createLogger({ level: 'silent' }),
        redisReachable: () => true,
        sweepLater: () => undefined,
      },
      clock: systemClock,
      logger: createLogger({ level: process.env.LOG_LEVEL ?? 'silent' }),
      scheduler: (profile: string) => td.daemon.clients.get(profile),
    };
    expect(await movePendingJobs(mover)).toEqual({ moved: [], resubmitted: [] });
    expect(await getRequest(store, id)).toMatchObject({
      state: 'submitted',
      nextAttemptId: null,
      pendingMove: { movingTo: null, note: 'not moved: it started before it could be' },
    });
    // Nothing more is tried, and the job runs to its end.
    expect(await movePendingJobs(mover)).toEqual({ moved: [], resubmitted: [] });
    writeFileSync(gate, '');
    await stepUntil(clock, async () => (await getRequest(store, id))?.state === 'completed', 'the job to end');
    expect((await transitionsOf(store, id)).map((t) => t.source)).not.toContain('move');
  });

  it('moves a pipeline step that waits too long, and its run goes on', async () => {
    const sim = await env.sim({ partitions: PARTITIONS });
    const pipeline = [
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      '  first:',
      '    partition: wait',
      '    on_pending: { after: 1s, partitions: [debug] }',
      '    script: "#!/bin/sh\\ntrue\\n"',
      '  second:',
      '    needs: [first]',
      '    script: "#!/bin/sh\\ntrue\\n"',
    ].join('\n');
    const td = await env.daemon(sim.url, { pipelineTickMs: 300, pollFloorMs: 300 }, { 'waits.yaml': pipeline });
    const run = await td.daemon.pipelines.trigger('waits', { actor: 'test', trigger: 'api' });
    const store = td.daemon.history.store;
    const ended = await waitFor(
      async () => {
        const row = await getRun(store, run.id);
        return row && ['succeeded', 'failed', 'cancelled'].includes(row.state) ? row : undefined;
      },
      { what: 'the run to end', timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(ended.state).toBe('succeeded');
    const steps = await stepRequests(store, run.id);
    const first = steps.find((r) => r.step === 'first');
    const moves = (await transitionsOf(store, first?.id as string)).filter((t) => t.source === 'move');
    expect(moves.map((t) => t.reason)).toEqual([
      expect.stringMatching(/^waited \d+s in wait \(PartitionDown\); moved to debug$/),
    ]);
  });
});
