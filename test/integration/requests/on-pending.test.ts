import { describe, expect, it } from 'vitest';
import { getRequest, transitionsOf } from '../../../src/db/requests.js';
import { ManualClock } from '../../../src/lib/clock.js';
import { apiClient, errorOf, shellSpec } from '../../helpers/api.js';
import { daemonTestEnv, startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';

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
    // The wait is not over: ticks go by (real time) and it stays.
    await clock.advance(29 * 60_000);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await transitionsOf(store, id)).filter((t) => t.source === 'move')).toEqual([]);

    await clock.advance(60_000);
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
});
