import { describe, expect, it } from 'vitest';
import { getAccountingJob } from '../../../src/db/accounting.js';
import { tasksOf } from '../../../src/db/array-tasks.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';

/**
 * Issue 31, an array job from the shell: `jobs show` gives its outcome by its tasks (the UI's
 * words), a table of its tasks (failures first) with each one's output file, and how to read one;
 * `jobs output 123_4` reads task 4's output, as `--task 4` does.
 */

const env = daemonTestEnv();

const SCRIPT = [
  '#!/bin/sh',
  'echo "task $SLURM_ARRAY_TASK_ID says hi"',
  '[ "$SLURM_ARRAY_TASK_ID" = 2 ] && { echo "task 2 broke" >&2; exit 5; }',
  'true',
].join('\n');

describe('an array job from the shell', () => {
  it("jobs show: the outcome by tasks, each task's state, exit and output file; jobs output 123_4: that task's output", async () => {
    const sim = await env.sim({ cpus: 4 });
    const td = await env.daemon(sim.url);
    const cli = (...args: string[]) => runCli([...args, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    const id = await td.daemon.submit({
      spec: jobSpecSchema.parse({
        name: 'arr-show',
        script: SCRIPT,
        array: '0-3',
        current_working_directory: sim.workDir,
      }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const row = await td.waitForState(id, 'failed', 30_000);
    const arrayId = row.jobId as number;
    const tasks = await tasksOf(td.daemon.history.store, id);
    const task2 = tasks.find((t) => t.taskId === 2);
    await waitFor(async () => getAccountingJob(td.daemon.history.store, row.profile, task2?.jobId as number), {
      what: "task 2's accounting record",
      timeoutMs: 10_000,
    });

    const [shown, byRef, byFlag, clash, taskShown] = await Promise.all([
      cli('jobs', 'show', id),
      cli('jobs', 'output', `${arrayId}_2`),
      cli('jobs', 'output', `${arrayId}_1`, '--task', '1'),
      cli('jobs', 'output', `${arrayId}_1`, '--task', '3'),
      cli('jobs', 'show', `${arrayId}_2`),
    ]);

    expect(shown.code, shown.stderr).toBe(0);
    // The UI's words for the array's outcome, and no one file or one task's record as the array's.
    expect(shown.stdout).toContain('outcome   1 of 4 tasks failed, 3 completed');
    expect(shown.stdout).toContain("exit      5 (the highest of its tasks')");
    expect(shown.stdout).toContain('output    each task its own: slurm-%A_%a.out (see the tasks below)');
    expect(shown.stdout).not.toMatch(/^stdout {4}/m);
    expect(shown.stdout).not.toMatch(/^accounting {2}/m);
    for (const t of tasks) {
      expect(shown.stdout).toMatch(
        new RegExp(
          `\\n${t.taskId}\\s+${t.jobId}\\s+${t.taskId === 2 ? 'failed\\s+5' : 'completed\\s+0'}\\s+${sim.workDir}/slurm-${arrayId}_${t.taskId}\\.out\\n`,
        ),
      );
    }
    expect(shown.stdout).toContain(`a task's output: schedflow jobs output ${id} --task N (or ${arrayId}_N)`);

    // A named task: its own accounting record, labelled as the task's.
    expect(taskShown.code, taskShown.stderr).toBe(0);
    expect(taskShown.stdout).toContain(`accounting  task 2 (job ${task2?.jobId}): FAILED, exit 5`);

    // 123_4 reads task 4's file, as --task 4 would; the same task twice is fine, two differing refused.
    expect(byRef.code, byRef.stderr).toBe(0);
    expect(byRef.stdout).toBe('task 2 says hi\ntask 2 broke\n');
    expect(byFlag.code, byFlag.stderr).toBe(0);
    expect(byFlag.stdout).toBe('task 1 says hi\n');
    expect(clash.code).toBe(2);
    expect(clash.stderr).toContain(`${arrayId}_1 names task 1, and --task 3 another`);
    expect(clash.stdout).toBe('');
  }, 120_000);
});
