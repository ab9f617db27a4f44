import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tasksOf } from '../../src/db/array-tasks.js';
import { killLeftovers } from '../helpers/cli-process.js';
import { startFlakyProxy } from '../helpers/flaky-proxy.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { realSlurm } from './cluster.js';
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
    const tasks = await d.read((h) => tasksOf(h, id));
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

describe("an array whose tasks' accounting records never come", () => {
  it("ends from the controller's records of its tasks once accounting has said nothing for 30 s", async () => {
    // slurmdbd answers, without the array's records (a proxy takes them out): the controller,
    // which keeps ended tasks a minute (MinJobAge=60), has them.
    const proxy = await startFlakyProxy(realSlurm().url);
    proxy.rewrite = (req, body) =>
      req.url.startsWith('/slurmdb/') ? body.replace(/"jobs":\s*\[.*\],\s*"meta"/s, '"jobs":[],"meta"') : body;
    // Beside the file's daemon on the same Redis: its own queues, so only it takes its submissions.
    const other = await startRealDaemon(redis, { url: proxy.url, env: { SCHEDFLOW_QUEUE_PREFIX: 'sf-noacct' } });
    try {
      const body = '[ "$SLURM_ARRAY_TASK_ID" = 0 ] && exit 3\ntrue';
      const id = await other.submit(realSpec('sf-array-noacct', body, { array: '0-1' }));
      const ended = await other.waitForState(id, 'failed', 100_000);
      expect(ended.reason).toContain('1 of 2 tasks did not complete (0: failed, exit 3)');
      const tasks = await other.read((h) => tasksOf(h, id));
      expect(tasks.map((task) => [task.taskId, task.state, task.exitCode])).toEqual([
        [0, 'failed', 3],
        [1, 'completed', 0],
      ]);
      expect(tasks.every((task) => task.nodes && task.startedAt && task.endedAt)).toBe(true);
      // From the controller: accounting was asked (and answered nothing) before the wait ran out.
      expect(proxy.requests.some((r) => r.url.startsWith('/slurmdb/') && r.url.includes('/jobs'))).toBe(true);
      expect(proxy.requests.some((r) => /\/slurm\/v[\d.]+\/jobs(\?|$)/.test(r.url))).toBe(true);
    } finally {
      await other.stop();
      await proxy.close();
    }
  }, 150_000);
});

describe("an array's job id held by another job (as after slurmctld lost the array in a crash)", () => {
  it("never takes the other job's records for its tasks: they end node_fail, JobLostByController", async () => {
    // Real answers, with what a reused id would show: accounting's records of another name (it
    // keeps no comments here), the controller's with another request's marker.
    const name = `sf-array-ours-${Date.now()}`;
    const proxy = await startFlakyProxy(realSlurm().url);
    proxy.rewrite = (req, body) => {
      if (req.url.startsWith('/slurmdb/')) return body.replaceAll(`"${name}"`, '"sf-someone-else"');
      if (/\/slurm\/v[\d.]+\/jobs(\?|$)/.test(req.url)) {
        return body.replace(/"comment": "schedflow:[^"]*"/g, '"comment": "schedflow:someone-else"');
      }
      return body;
    };
    const other = await startRealDaemon(redis, { url: proxy.url, env: { SCHEDFLOW_QUEUE_PREFIX: 'sf-reused' } });
    try {
      const id = await other.submit(realSpec(name, 'exit 0', { array: '0-1' }));
      const ended = await other.waitForState(id, 'failed', 100_000);
      const tasks = await other.read((h) => tasksOf(h, id));
      // The jobs completed with exit 0: never recorded as this request's, whose jobs they may not be.
      expect(tasks.map((task) => [task.taskId, task.state, task.reason, task.exitCode])).toEqual([
        [0, 'node_fail', 'JobLostByController', null],
        [1, 'node_fail', 'JobLostByController', null],
      ]);
      expect(ended.reason).toContain('2 of 2 tasks did not complete (0: node_fail; 1: node_fail)');
    } finally {
      await other.stop();
      await proxy.close();
    }
  }, 150_000);
});

describe('an array the controller and accounting stop showing', () => {
  it('is lost after the grace, task by task, and followed again once its tasks are seen', async () => {
    // While `hidden`, the controller's answers (light and full) lack the array's tasks and
    // accounting's lack its records: as after slurmctld lost it, with slurmdbd not told yet.
    let hidden = false;
    const proxy = await startFlakyProxy(realSlurm().url);
    proxy.rewrite = (req, body) => {
      const hides = req.url.startsWith('/slurmdb/') || /\/slurm\/v[\d.]+\/jobs(\/state)?(\?|$)/.test(req.url);
      return hidden && hides ? body.replace(/"jobs":\s*\[.*\],\s*"meta"/s, '"jobs":[],"meta"') : body;
    };
    const other = await startRealDaemon(redis, {
      url: proxy.url,
      env: { SCHEDFLOW_QUEUE_PREFIX: 'sf-lost', SCHEDFLOW_LOST_GRACE_MS: '3000' },
    });
    try {
      const id = await other.submit(realSpec('sf-array-lost', 'sleep 25', { array: '0-1' }));
      await other.waitForState(id, 'running', 60_000);
      hidden = true;
      const lost = await other.waitForState(id, 'lost', 60_000);
      expect(lost.transitions.at(-1)?.detail).toMatch(
        /^all 2 tasks of array job \d+ have been missing from the controller and from accounting for over 3 s/,
      );
      expect((await other.read((h) => tasksOf(h, id))).map((task) => task.state)).toEqual(['lost', 'lost']);
      // Seen again (still running, or ended in accounting): followed to the end, never assumed finished.
      hidden = false;
      const done = await other.waitForState(id, 'completed', 90_000);
      expect(done.transitions.map((t) => t.to)).toContain('lost');
      expect((await other.read((h) => tasksOf(h, id))).map((task) => [task.state, task.exitCode])).toEqual([
        ['completed', 0],
        ['completed', 0],
      ]);
    } finally {
      await other.stop();
      await proxy.close();
    }
  }, 200_000);
});
