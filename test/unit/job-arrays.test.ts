import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { formatCounts, summarizeArray, type TaskView } from '../../src/requests/array-state.js';
import { codecV0044 } from '../../src/sched/codecs/v0.0.44.js';
import {
  ArraySyntaxError,
  formatIndexes,
  formatJobArray,
  indexesOf,
  parseArrayExpression,
  parseJobArray,
  taskCountOf,
} from '../../src/sched/job-array.js';
import { jobSpecSchema } from '../../src/sched/job-spec.js';

const fixture = (name: string) =>
  JSON.parse(readFileSync(new URL(`../fixtures/real-slurm-25.11/${name}`, import.meta.url), 'utf8')) as {
    jobs: unknown[];
  };

describe('the array expression', () => {
  it('reads ranges, steps, lists and the throttle as Slurm does', () => {
    expect(parseJobArray('0-99%10')).toEqual({ indexes: Array.from({ length: 100 }, (_, i) => i), throttle: 10 });
    expect(parseJobArray('1,3,5-7')).toEqual({ indexes: [1, 3, 5, 6, 7], throttle: null });
    expect(parseJobArray('0-15:4')).toEqual({ indexes: [0, 4, 8, 12], throttle: null });
    expect(parseJobArray('3,1,3').indexes).toEqual([1, 3]);
    expect(parseJobArray('7').indexes).toEqual([7]);
  });

  it('refuses what slurmctld refuses, saying what to write', () => {
    for (const [text, words] of [
      ['', 'empty'],
      ['5-1', 'ends before it starts'],
      ['0-5%x', 'not a throttle'],
      ['0-5%0', '%1 or more'],
      ['1-2-3', 'not an index or range'],
      ['0-4:0', 'at least 1'],
      ['a', 'not an index or range'],
      ['1%2%3', 'more than one'],
    ] as const) {
      expect(() => parseJobArray(text), text).toThrow(ArraySyntaxError);
      expect(() => parseJobArray(text), text).toThrow(words);
    }
    expect(() => parseJobArray('0-1001', 1001)).toThrow('from 0 to 1000 (MaxArraySize 1001)');
    expect(parseJobArray('0-1000', 1001).indexes).toHaveLength(1001);
  });

  it('is read without listing its indexes, and listed within its largest index however ranges overlap', () => {
    // Four million indexes named, none listed: what the door reads to refuse it.
    expect(parseArrayExpression('0-4000000%1')).toEqual({
      ranges: [{ start: 0, last: 4_000_000, step: 1 }],
      throttle: 1,
      maxIndex: 4_000_000,
    });
    // A range's end rounded down to its step: the largest index it names.
    expect(parseArrayExpression('0-10:4').maxIndex).toBe(8);
    const many = parseArrayExpression(Array.from({ length: 5000 }, (_, i) => `0-1000:${i + 1}`).join(','));
    const started = performance.now();
    expect(taskCountOf(many)).toBe(1001);
    expect(indexesOf(many)).toHaveLength(1001);
    // 30 ms on an idle machine; the bound is for a walk of every named index (5 million here),
    // not for a loaded machine's slowness.
    expect(performance.now() - started).toBeLessThan(2000);
    expect(indexesOf(parseArrayExpression('10-20:5,0-12:6,12'))).toEqual([0, 6, 10, 12, 15, 20]);
  });

  it('refuses an expression of more than 65,536 characters, and never echoes one back whole', () => {
    const long = '1,'.repeat(40_000);
    expect(() => parseArrayExpression(long)).toThrow('over 65536');
    const junk = `${'9'.repeat(1000)}x`;
    expect(() => parseArrayExpression(junk)).toThrow(ArraySyntaxError);
    try {
      parseArrayExpression(junk);
    } catch (error) {
      expect((error as Error).message.length).toBeLessThan(200);
    }
    expect(() => parseArrayExpression('9'.repeat(400), 1001)).toThrow(/^index 9{20}… is over the cluster's limit/);
  });

  it('writes indexes back compactly', () => {
    expect(formatIndexes([5, 0, 1, 2, 7, 9, 10])).toBe('0-2,5,7,9-10');
    expect(formatJobArray({ indexes: [3, 7], throttle: 2 })).toBe('3,7%2');
  });

  it('is checked where a job spec comes in', () => {
    const spec = { name: 'a', script: '#!/bin/sh\n' };
    expect(jobSpecSchema.safeParse({ ...spec, array: '0-9%2' }).success).toBe(true);
    const bad = jobSpecSchema.safeParse({ ...spec, array: '9-0' });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]).toMatchObject({ path: ['array'], message: expect.stringContaining('ends before') });
  });
});

const task = (taskId: number, state: TaskView['state'], exitCode: number | null = null): TaskView => ({
  taskId,
  state,
  exitCode,
  startedAt: state === 'pending' ? null : 1000 + taskId,
  endedAt: ['pending', 'running'].includes(state) ? null : 2000 + taskId,
});

describe("the request's state from its tasks", () => {
  it('is pending, then running, then completed', () => {
    expect(summarizeArray([task(0, 'pending'), task(1, 'pending')]).state).toBe('PENDING');
    expect(summarizeArray([task(0, 'running'), task(1, 'pending')]).state).toBe('RUNNING');
    expect(summarizeArray([task(0, 'completed', 0), task(1, 'pending')])).toMatchObject({
      state: 'RUNNING',
      endedAt: null,
    });
    expect(summarizeArray([task(0, 'completed', 0), task(1, 'completed', 0)])).toMatchObject({
      state: 'COMPLETED',
      exitCode: 0,
      reason: null,
      startedAt: 1000,
      endedAt: 2001,
    });
  });

  it('is failed when some task did not complete, with counts and the failures in the reason', () => {
    const tasks = [task(0, 'completed', 0), task(1, 'failed', 3), task(2, 'timeout'), task(3, 'completed', 0)];
    const summary = summarizeArray(tasks);
    expect(summary).toMatchObject({
      state: 'FAILED',
      exitCode: 3,
      counts: { completed: 2, failed: 1, timeout: 1 },
      reason: '2 of 4 tasks did not complete (1: failed, exit 3; 2: timeout)',
    });
    expect(formatCounts(summary.counts)).toBe('2 completed, 1 failed, 1 timeout');
  });

  it('is cancelled when every task that did not complete was cancelled', () => {
    const summary = summarizeArray([task(0, 'completed', 0), task(1, 'cancelled'), task(2, 'cancelled')]);
    expect(summary).toMatchObject({
      state: 'CANCELLED',
      reason: '2 of 3 tasks were cancelled (1: cancelled; 2: cancelled)',
    });
  });

  it('is running while a task runs, its start not known yet (from the light listing alone)', () => {
    const running = { ...task(0, 'running'), startedAt: null };
    expect(summarizeArray([running, task(1, 'pending')])).toMatchObject({ state: 'RUNNING', lost: 0 });
  });

  it('counts the tasks the scheduler has not reported yet (no row) as pending', () => {
    expect(summarizeArray([], 3)).toMatchObject({ state: 'PENDING', counts: { pending: 3 } });
    const partly = summarizeArray([task(0, 'completed', 0), task(1, 'failed', 2)], 4);
    expect(partly).toMatchObject({ state: 'RUNNING', endedAt: null, counts: { pending: 2, completed: 1, failed: 1 } });
    expect(partly.reason).toBe('1 of 4 tasks did not complete (1: failed, exit 2)');
    expect(summarizeArray([task(0, 'lost')], 2)).toMatchObject({ lost: 0 });
  });

  it('is lost once only lost tasks are left, and not while another runs', () => {
    expect(summarizeArray([task(0, 'lost'), task(1, 'running')])).toMatchObject({ state: 'RUNNING', lost: 0 });
    const left = summarizeArray([task(0, 'lost'), task(1, 'completed', 0), task(2, 'lost')]);
    expect(left).toMatchObject({ lost: 2, endedAt: null, counts: { lost: 2, completed: 1 } });
    expect(formatCounts(left.counts)).toBe('1 completed, 2 lost');
  });
});

describe("real Slurm 25.11's array answers", () => {
  it('names each task in jobs/state as <job id>_<task id>, pending tasks under the array record', () => {
    const entries = fixture('array_jobs_state_pending_running_v0.0.44.json').jobs.map(codecV0044.decodeJobState);
    expect(entries.map((e) => [e.job_id, e.array_task_id, e.state])).toEqual([
      [3, 1, 'RUNNING'],
      [2, 0, 'RUNNING'],
      [1, 2, 'PENDING'],
      [1, 3, 'PENDING'],
      [1, 4, 'PENDING'],
      [1, 5, 'PENDING'],
    ]);
  });

  it('gives every task a record of its own in the controller and accounting', () => {
    const controller = fixture('array_job_ended_v0.0.44.json').jobs.map(codecV0044.decodeControllerJob);
    expect(controller.map((j) => [j.job_id, j.array_job_id, j.array_task_id, j.state, j.exit_code])).toContainEqual([
      5,
      1,
      3,
      'FAILED',
      3,
    ]);
    const accounting = fixture('array_slurmdb_jobs_pending_running_v0.0.44.json').jobs.map(
      codecV0044.decodeAccountingJob,
    );
    expect(accounting.map((j) => [j.job_id, j.array_job_id, j.array_task_id, j.state])).toEqual([
      [1, 1, null, 'PENDING'],
      [2, 1, 0, 'RUNNING'],
      [3, 1, 1, 'RUNNING'],
    ]);
  });
});
