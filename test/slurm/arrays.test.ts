import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tasksOf } from '../../src/db/array-tasks.js';
import { killLeftovers } from '../helpers/cli-process.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

/**
 * Issue 16, job arrays on the real cluster: an array of a few tasks, one failing, followed to
 * its end by the daemon, every task's exit code and job id recorded, and the request failed
 * with the counts; then its failed task run again.
 */

let redis: TestRedis;
let d: RealDaemon;

beforeAll(async () => {
  redis = await startTestRedis();
  d = await startRealDaemon(redis);
});

afterAll(async () => {
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

interface ArrayView {
  expression: string;
  task_count: number;
  counts: Record<string, number>;
  failures: { task_id: number; job_id: number | null; state: string; exit_code: number | null }[];
  retry_of: string | null;
}

describe('an array job through the daemon on real Slurm', () => {
  it('follows every task to its end, with per-task exit codes, and retries the failed one', async () => {
    // Task 2 fails with exit 5 the first time; its retry completes.
    const once = `array-failed-once-${Date.now()}`;
    const body = [
      'sleep 1',
      `if [ "$SLURM_ARRAY_TASK_ID" = 2 ] && [ ! -e ${once} ]; then touch ${once}; exit 5; fi`,
    ].join('\n');
    const id = await d.submit(realSpec('sf-array', body, { array: '0-3%2' }));
    const failed = await d.waitForState(id, 'failed', 60_000);
    expect(failed.exit_code).toBe(5);
    expect(failed.reason).toContain('1 of 4 tasks did not complete (2: failed, exit 5)');
    const array = failed.array as ArrayView;
    expect(array).toMatchObject({ expression: '0-3%2', task_count: 4, counts: { completed: 3, failed: 1 } });
    expect(array.failures).toEqual([expect.objectContaining({ task_id: 2, state: 'failed', exit_code: 5 })]);
    const tasks = d.read((db) => tasksOf(db, id));
    expect(tasks.map((task) => [task.taskId, task.state, task.exitCode])).toEqual([
      [0, 'completed', 0],
      [1, 'completed', 0],
      [2, 'failed', 5],
      [3, 'completed', 0],
    ]);
    // Each task its own job; the last to start has the array's id, as slurmctld gives it.
    expect(new Set(tasks.map((task) => task.jobId)).size).toBe(4);
    expect(tasks.map((task) => task.jobId)).toContain(failed.job_id);
    expect(tasks.every((task) => task.nodes && task.startedAt && task.endedAt)).toBe(true);

    const retried = await d.api('POST', `/api/v1/jobs/${id}/retry-tasks`, {});
    expect(retried.status).toBe(201);
    const retry = retried.json as { id: string; array: string };
    expect(retry.array).toBe('2%2');
    const again = await d.waitForState(retry.id, 'completed', 60_000);
    expect(again.array).toMatchObject({ task_count: 1, counts: { completed: 1 }, failures: [], retry_of: id });
  });
});
