import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { history } from '../../../src/db/accounting.js';
import { tasksOf } from '../../../src/db/array-tasks.js';
import { apiClient, errorOf } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, type TestDaemon } from '../../helpers/daemon.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { waitFor } from '../../helpers/http.js';

/**
 * Issue 31, an array job's output: each task writes its own file (`slurm-%A_%a.out` by default,
 * or the spec's pattern with `%A`, `%a`, `%x`, padding), read one task at a time through the API
 * (`?task=N`) and the CLI (`--task N`); the array's tasks' accounting records are the request's,
 * not external jobs, on a cluster whose accounting keeps no comments (real Slurm's default).
 */

const env = daemonTestEnv();

interface Output {
  id: string;
  job_id: number;
  task_id: number | null;
  path: string;
  host: string;
  text: string;
  same_file: boolean;
}

interface Detail {
  job_id: number;
  output: { stdout: string | null; stderr: string | null; links: { stdout: string; stderr: string } };
  array: { failures: { task_id: number; job_id: number; stdout: string | null; links: { output: string } }[] };
}

async function submit(td: TestDaemon, spec: Record<string, unknown>): Promise<string> {
  const api = apiClient(td);
  const res = await api.call('POST', '/api/v1/jobs', { token: await api.token(['submit']), body: { spec } });
  expect(res.status, res.text).toBe(201);
  return (res.json as { id: string }).id;
}

const SCRIPT = [
  '#!/bin/sh',
  'echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID is job $SLURM_JOB_ID"',
  'echo "err of $SLURM_ARRAY_TASK_ID" >&2',
  '[ "$SLURM_ARRAY_TASK_ID" = 1 ] && exit 3',
  'true',
].join('\n');

describe("an array job's output, task by task", () => {
  it("reads each task's slurm-%A_%a.out through the API and the CLI, and says which task to name", async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['read']);
    const get = (path: string) => api.call('GET', path, { token });

    const id = await submit(td, {
      name: 'arr-out',
      current_working_directory: sim.workDir,
      array: '0-2',
      script: SCRIPT,
    });
    const row = await td.waitForState(id, 'failed');
    const arrayId = row.jobId as number;
    const tasks = await tasksOf(td.daemon.history.store, id);
    const jobOf = (taskId: number) => tasks.find((t) => t.taskId === taskId)?.jobId as number;
    // The path the task's records reported, kept with the task.
    expect(tasks.map((t) => t.stdoutPath)).toEqual([0, 1, 2].map((a) => `${sim.workDir}/slurm-${arrayId}_${a}.out`));

    const one = await get(`/api/v1/jobs/${id}/output?task=1`);
    expect(one.status, one.text).toBe(200);
    expect(one.json).toMatchObject({
      id,
      job_id: jobOf(1),
      task_id: 1,
      path: `${sim.workDir}/slurm-${arrayId}_1.out`,
      host: hostname(),
      text: `task 1 of ${arrayId} is job ${jobOf(1)}\nerr of 1\n`,
    } satisfies Partial<Output>);
    const err = await get(`/api/v1/jobs/${id}/output?task=2&stream=stderr`);
    expect(err.json).toMatchObject({ task_id: 2, same_file: true, path: `${sim.workDir}/slurm-${arrayId}_2.out` });

    // Without a task, or with one the array does not have: which to name, not a missing file.
    const none = await get(`/api/v1/jobs/${id}/output`);
    expect(none.status).toBe(400);
    expect(errorOf(none).code).toBe('SCHEDFLOW_ERR_OUTPUT_TASK');
    expect(errorOf(none).message).toContain('is an array job of 3 tasks (0-2)');
    expect(errorOf(none).message).not.toContain('shared file system');
    const outside = await get(`/api/v1/jobs/${id}/output?task=7`);
    expect(outside.status).toBe(400);
    expect(errorOf(outside).message).toContain('has no task 7: its tasks are 0-2');
    expect((await get(`/api/v1/jobs/${id}/output?task=-1`)).status).toBe(400);

    // The detail names no one file for the array, and links each failed task's.
    const detail = (await get(`/api/v1/jobs/${id}`)).json as Detail;
    expect(detail.output).toEqual({
      stdout: null,
      stderr: null,
      links: {
        stdout: `/api/v1/jobs/${id}/output?task={task}`,
        stderr: `/api/v1/jobs/${id}/output?task={task}&stream=stderr`,
      },
    });
    expect(detail.array.failures).toEqual([
      expect.objectContaining({
        task_id: 1,
        stdout: `${sim.workDir}/slurm-${arrayId}_1.out`,
        links: { output: `/api/v1/jobs/${id}/output?task=1` },
      }),
    ]);

    const [cli, cliNone] = await Promise.all([
      runCli(['jobs', 'output', id, '--task', '0', '--data-dir', td.dataDir]),
      runCli(['jobs', 'output', id, '--data-dir', td.dataDir]),
    ]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toBe(`task 0 of ${arrayId} is job ${jobOf(0)}\nerr of 0\n`);
    expect(cliNone.code).toBe(2);
    expect(cliNone.stderr).toContain('name one (task=N, --task N)');

    // A single job has no tasks to name.
    const single = await submit(td, {
      name: 'single',
      current_working_directory: sim.workDir,
      script: '#!/bin/sh\ntrue\n',
    });
    await td.waitForState(single, 'completed');
    const bad = await get(`/api/v1/jobs/${single}/output?task=0`);
    expect(bad.status).toBe(400);
    expect(errorOf(bad).message).toContain('is not an array job');
  });

  it("reads a task's files under the spec's own %x-%A_%a patterns, zero-padded", async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['read']);
    const id = await submit(td, {
      name: 'arr-pat',
      current_working_directory: sim.workDir,
      array: '3,5',
      standard_output: '%x-%A_%a.out',
      standard_error: '%x-%A_%3a.err',
      script: SCRIPT,
    });
    const row = await td.waitForState(id, 'completed');
    const arrayId = row.jobId as number;
    const out = await api.call('GET', `/api/v1/jobs/${id}/output?task=5`, { token });
    expect(out.status, out.text).toBe(200);
    expect(out.json).toMatchObject({ task_id: 5, path: `${sim.workDir}/arr-pat-${arrayId}_5.out` });
    expect((out.json as Output).text).toMatch(/^task 5 of \d+ is job \d+\n$/);
    const err = await api.call('GET', `/api/v1/jobs/${id}/output?task=3&stream=stderr`, { token });
    expect(err.json).toMatchObject({ path: `${sim.workDir}/arr-pat-${arrayId}_003.err`, text: 'err of 3\n' });
    const cli = await runCli(['jobs', 'output', id, '--task', '3', '--stderr', '--data-dir', td.dataDir]);
    expect(cli.stdout).toBe('err of 3\n');
  });
});

describe("an array's accounting records", () => {
  it("are the request's tasks, not external jobs, when accounting keeps no comment (Slurm's default)", async () => {
    const sim = await env.sim();
    // slurmdbd keeps a job's comment (which holds the request's marker) only with
    // AccountingStoreFlags=job_comment: its records here come without it, as by default.
    const proxy = await startFlakyProxy(sim.url);
    env.defer(() => proxy.close());
    proxy.rewrite = (req, body) =>
      req.url.startsWith('/scheddb/') ? body.replace(/"job":\s*"schedflow:[^"]*"/g, '"job": ""') : body;
    const td = await env.daemon(proxy.url);
    const id = await submit(td, {
      name: 'arr-acct',
      current_working_directory: sim.workDir,
      array: '0-2',
      script: SCRIPT,
    });
    const row = await td.waitForState(id, 'failed');
    const jobIds = (await tasksOf(td.daemon.history.store, id)).map((t) => t.jobId);
    expect(new Set(jobIds).size).toBe(3);
    const rows = await waitFor(
      async () => {
        const all = (await history(td.daemon.history.store)).filter((r) => jobIds.includes(r.jobId));
        return all.length === 3 ? all : undefined;
      },
      { what: "the array's three accounting records", timeoutMs: 20_000 },
    );
    // Each task's record is the request's (its own job id, or the array's), with the task's state.
    expect(rows.map((r) => [r.taskId, r.requestId, r.external, r.taskState]).sort()).toEqual([
      [0, id, false, 'completed'],
      [1, id, false, 'failed'],
      [2, id, false, 'completed'],
    ]);
    expect(rows.find((r) => r.jobId === row.jobId)?.taskId).toBe(2);
    expect(proxy.requests.some((r) => r.url.startsWith('/scheddb/'))).toBe(true);

    const api = apiClient(td);
    const page = await api.call('GET', '/api/v1/history?limit=50', { token: await api.token(['read']) });
    expect(page.status, page.text).toBe(200);
    const items = (
      page.json as {
        items: { job_id: number; external: boolean; local: { request_id: string; task_id: number | null } | null }[];
      }
    ).items.filter((item) => jobIds.includes(item.job_id));
    expect(items.map((item) => [item.external, item.local?.request_id, item.local?.task_id]).sort()).toEqual([
      [false, id, 0],
      [false, id, 1],
      [false, id, 2],
    ]);

    const cli = await runCli(['jobs', 'history', '--data-dir', td.dataDir]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).not.toContain('(external)');
    expect(cli.stdout).toContain('task 1: failed (array failed)');
  });
});
