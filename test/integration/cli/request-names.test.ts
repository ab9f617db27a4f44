import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { tasksOf } from '../../../src/db/array-tasks.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv } from '../../helpers/daemon.js';

/**
 * The commands that take a job request (`jobs show`, `cancel`, `output`, …) as a person names
 * one: the start of its id, or the Slurm job id (`123`, `123_4` for an array task); anything
 * matching more than one is refused with the candidates, and nothing matching says where else
 * to look.
 */

const env = daemonTestEnv();

describe('naming a job request on the command line', () => {
  it('a unique start of the id, a Slurm job id, an array task; ambiguous and unknown names refused with a hint', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const cli = (...args: string[]) => runCli([...args, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    const spec = (name: string, extra: Record<string, unknown> = {}) => ({
      name,
      script: '#!/bin/sh\necho out of $SLURM_JOB_NAME\n',
      current_working_directory: sim.workDir,
      ...extra,
    });
    // Two ids sharing their first eight characters, and one that shares none of them.
    const twinA = await td.daemon.submit({
      requestId: `5eed0000-0000-4000-8000-${'0'.repeat(11)}a`,
      spec: spec('twin-a'),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const twinB = await td.daemon.submit({
      requestId: `5eed0000-1111-4000-8000-${'0'.repeat(11)}b`,
      spec: spec('twin-b'),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const array = await td.daemon.submit({
      spec: spec('tasks', { array: '0-2' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const a = await td.waitForState(twinA, 'completed');
    await td.waitForState(twinB, 'completed');
    const arrayRow = await td.waitForState(array, 'completed', 30_000);

    // The start of an id: the one request.
    const byPrefix = await cli('jobs', 'show', '5eed0000-1');
    expect(byPrefix.code, byPrefix.stderr).toBe(0);
    expect(byPrefix.stdout).toMatch(new RegExp(`^request   ${twinB}\\n`));
    const output = await cli('jobs', 'output', twinA.slice(0, 20));
    expect(output.code, output.stderr).toBe(0);
    expect(output.stdout).toBe('out of twin-a\n');

    // Ambiguous: refused, listing both.
    const both = await cli('jobs', 'show', '5eed');
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('5eed names more than one job request; give more of the id:');
    expect(both.stderr).toContain(`  ${twinA}  twin-a  completed  job ${a.jobId}`);
    expect(both.stderr).toContain(`  ${twinB}  twin-b  completed`);
    expect(both.stdout).toBe('');

    // The Slurm job id.
    const byJobId = await cli('jobs', 'show', String(a.jobId));
    expect(byJobId.code, byJobId.stderr).toBe(0);
    expect(byJobId.stdout).toMatch(new RegExp(`^request   ${twinA}\\n`));

    // An array task: its request, with the task.
    const tasks = await tasksOf(td.daemon.history.store, array);
    const task1 = tasks.find((t) => t.taskId === 1);
    const byTask = await cli('jobs', 'show', `${arrayRow.jobId}_1`);
    expect(byTask.code, byTask.stderr).toBe(0);
    expect(byTask.stdout).toMatch(new RegExp(`^request   ${array}\\n`));
    expect(byTask.stdout).toContain(`task      1: completed, job ${task1?.jobId}, exit 0`);
    // A task's own job id names its array's request too.
    const byTaskJob = await cli('jobs', 'show', String(task1?.jobId));
    expect(byTaskJob.stdout).toMatch(new RegExp(`^request   ${array}\\n`));
    // A command acting on the whole request does not take one task for it.
    const cancelTask = await cli('jobs', 'cancel', `${arrayRow.jobId}_1`);
    expect(cancelTask.code).toBe(2);
    expect(cancelTask.stderr).toContain(
      `${arrayRow.jobId}_1 is task 1 of the array job of request ${array}; this command acts on the whole request`,
    );
    // jobs cancel takes a start of the id too (the request has ended: said so, by its full id).
    const cancelEnded = await cli('jobs', 'cancel', twinA.slice(0, 12));
    expect(cancelEnded.code).toBe(3);
    expect(cancelEnded.stderr).toContain(`job request ${twinA} has already ended: completed`);

    // Nothing matches: where else to look.
    const noJob = await cli('jobs', 'show', '987654');
    expect(noJob.code).toBe(2);
    expect(noJob.stderr).toContain('no job request has the id 987654, one starting with it, or Slurm job 987654');
    expect(noJob.stderr).toContain('schedflow sched job 987654');
    const marker = randomUUID();
    const noRequest = await cli('jobs', 'show', marker);
    expect(noRequest.code).toBe(2);
    expect(noRequest.stderr).toContain(
      `no job request ${marker} in the history: an id printed by schedflow sched submit is that command's marker`,
    );
    const noTask = await cli('jobs', 'show', '987654_3');
    expect(noTask.code).toBe(2);
    expect(noTask.stderr).toContain('no array job request has Slurm job 987654');
    const other = await cli('jobs', 'show', 'not-an-id!');
    expect(other.code).toBe(2);
    expect(other.stderr).toContain('name a request by its id, the start of it, or its Slurm job id');
  }, 120_000);
});
