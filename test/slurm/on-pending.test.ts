import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killLeftovers } from '../helpers/cli-process.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { slurmCommand } from './cluster.js';
import { type RealDaemon, realSpec, requestRow, startRealDaemon } from './daemon-helpers.js';

/**
 * `on_pending` on the real Slurm 25.11.7: a job submitted to a partition that is DOWN (it takes
 * jobs and starts none: reason PartitionDown) is moved by the daemon, after its 5 s, to `debug`
 * by an update of the job, and completes there as the same Slurm job. The partition is made for
 * the test and deleted after it, whatever happened; the job is cancelled if it is left.
 */

const PARTITION = `sf-wait-${process.pid}`;
let redis: TestRedis;
let d: RealDaemon;
let jobId: number | null = null;

beforeAll(async () => {
  redis = await startTestRedis();
  d = await startRealDaemon(redis);
});

afterAll(async () => {
  if (jobId !== null) await slurmCommand('scancel', [String(jobId)]).catch(() => undefined);
  await slurmCommand('scontrol', ['delete', `PartitionName=${PARTITION}`]).catch(() => undefined);
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

describe('on_pending on real Slurm', () => {
  it('moves a job waiting in a DOWN partition to debug by update after its wait; it completes there', async () => {
    // Made right before the submission: `cluster.sh up`, which another test run sharing the
    // cluster may start at any time, ends with `scontrol reconfigure`, and that drops a partition
    // made by `scontrol create` (the submission is then refused, 2000).
    await slurmCommand('scontrol', ['create', `PartitionName=${PARTITION}`, 'Nodes=localhost', 'State=DOWN']);
    const id = await d.submit(
      realSpec('sf-on-pending', 'echo "ran in $SLURM_JOB_PARTITION"', {
        partition: PARTITION,
        cpus_per_task: 1,
        on_pending: { after: '5s', partitions: ['debug'] },
      }),
    );
    const pending = await d.waitForState(id, 'pending', 60_000);
    jobId = pending.job_id;
    const done = await d.waitForState(id, 'completed', 120_000);
    expect(done.job_id).toBe(jobId);
    const move = done.transitions.find((t) => t.source === 'move');
    expect(move).toMatchObject({ from: 'pending', to: 'pending' });
    expect(move?.reason).toMatch(new RegExp(`^waited \\d+s in ${PARTITION} \\(PartitionDown\\); moved to debug$`));
    expect(move?.detail).toBe(`job ${jobId} moved from partition ${PARTITION} to debug by update`);
    // Slurm's own record: the job ran in debug.
    const shown = await slurmCommand('scontrol', ['show', 'job', String(jobId)]).catch(() => '');
    if (shown) expect(shown).toMatch(/Partition=debug/);
    const { row } = await requestRow(d, id);
    expect(row).toMatchObject({ attempt: 1, nextAttemptId: null, pendingMove: null });
    jobId = null;
  });
});
