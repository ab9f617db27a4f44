import { describe, expect, it } from 'vitest';
import { tasksOf } from '../../../src/db/array-tasks.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { completionBodies, llmSimConfig } from '../llm/llm-helpers.js';
import { settings, spec, waitForSummary } from './summaries-files.js';

/**
 * Issue 31: the summary of an array job. An array writes no `slurm-<A>.out`: each task its own
 * (`slurm-%A_%a.out`), so the output excerpt is the task that explains the outcome (the first
 * that failed, else the first), and the facts say which task it is and how the tasks ended.
 */

const env = daemonTestEnv();

const SCRIPT = [
  '#!/bin/sh',
  'echo "task $SLURM_ARRAY_TASK_ID working"',
  'if [ "$SLURM_ARRAY_TASK_ID" = 2 ] || [ "$SLURM_ARRAY_TASK_ID" = 3 ]; then',
  '  echo "boom in task $SLURM_ARRAY_TASK_ID: input shard missing" >&2',
  '  exit 3',
  'fi',
  'true',
].join('\n');

/** The facts the model was sent for the request named `name`. */
function promptOf(sim: Parameters<typeof completionBodies>[0], name: string): string {
  const bodies = completionBodies(sim).map(
    (b) => (b.body as { messages: { role: string; content: string }[] }).messages[1]?.content ?? '',
  );
  const body = bodies.find((content) => content.includes(`Job: "${name}"`));
  expect(body, `a prompt for ${name}`).toBeDefined();
  return body as string;
}

describe('the summary of an array job', () => {
  it("quotes the first failed task's own output, says which task and the tasks' outcome; all completed: the first task's", async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim));
    const failing = await td.daemon.submit({
      owner: 'default',
      actor: 'test',
      origin: 'api',
      spec: spec(sim, { name: 'shards', array: '0-3', script: SCRIPT }),
    });
    const fine = await td.daemon.submit({
      owner: 'default',
      actor: 'test',
      origin: 'api',
      spec: spec(sim, { name: 'fine', array: '5-6', script: '#!/bin/sh\necho "done $SLURM_ARRAY_TASK_ID"\n' }),
    });
    const row = await td.waitForState(failing, 'failed', 30_000);
    await td.waitForState(fine, 'completed', 30_000);
    const [summary] = await Promise.all([waitForSummary(td, failing), waitForSummary(td, fine)]);
    expect(summary).toMatchObject({ state: 'ready', kind: 'llm' });
    const task2 = (await tasksOf(td.daemon.history.store, failing)).find((t) => t.taskId === 2);

    const prompt = promptOf(sim, 'shards');
    expect(prompt).toContain('(array of 4 tasks: 2 of 4 tasks failed, 2 completed)');
    expect(prompt).toContain('Array tasks: 2 completed, 2 failed; 2 of 4 tasks did not complete');
    expect(prompt).toContain(
      `Output excerpt from task 2 (Slurm job ${task2?.jobId}, failed, exit code 3), the first task that failed:`,
    );
    // The task's own file (slurm-%A_%a.out, stdout and stderr together), not slurm-<A>.out.
    expect(prompt).toContain(`Output output "${sim.workDir}/slurm-${row.jobId}_2.out"`);
    expect(prompt).toContain('task 2 working\\nboom in task 2: input shard missing');
    expect(prompt).not.toContain(`slurm-${row.jobId}.out`);
    expect(prompt).not.toContain('boom in task 3');
    expect(summary.findings?.triage).toMatchObject({ classification: 'script_error' });

    const finePrompt = promptOf(sim, 'fine');
    expect(finePrompt).toContain('(array of 2 tasks: all 2 tasks completed)');
    expect(finePrompt).toMatch(
      /Output excerpt from task 5 \(Slurm job \d+, completed, exit code 0\), the first task \(none failed\):/,
    );
    expect(finePrompt).toContain('done 5');
  }, 60_000);
});
