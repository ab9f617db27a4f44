import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { history } from '../../src/db/accounting.js';
import { killLeftovers, runCli } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { jobWorkDir } from './cluster.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

/**
 * Outputs on the real cluster: the paths slurmrestd reports (`stdout_expanded`, and v0.0.42's
 * expanded `standard_output`) recorded in the history, and the files read through the API. The
 * cluster runs on this machine, so its jobs' files are on the daemon's host.
 */

let redis: TestRedis;
let d: RealDaemon;

interface Detail {
  job_id: number;
  output: { stdout: string | null; stderr: string | null };
}

beforeAll(async () => {
  redis = await startTestRedis();
  d = await startRealDaemon(redis, { versions: { v42: 'v0.0.42' } });
});

afterAll(async () => {
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

describe.concurrent('job outputs on real Slurm', () => {
  for (const profile of ['real', 'v42']) {
    it(`records %x-%j.out as the scheduler expands it, and reads it through the API (${profile})`, async () => {
      const id = await d.submit(
        realSpec(`sf-out-${profile}`, 'echo "hello from $SLURM_JOB_ID"; echo oops >&2', {
          standard_output: '%x-%j.out',
          standard_error: '%x-%j.err',
        }),
        profile,
      );
      const job = await d.waitForState(id, 'completed');
      const jobId = job.job_id as number;
      const stdout = `${jobWorkDir()}/sf-out-${profile}-${jobId}.out`;
      const stderr = `${jobWorkDir()}/sf-out-${profile}-${jobId}.err`;
      const detail = (await d.api('GET', `/api/v1/jobs/${id}`)).json as Detail;
      expect(detail.output).toMatchObject({ stdout, stderr });

      // slurmstepd writes the file as the job's user (alice), readable to others: the daemon
      // (here root, elsewhere any user on a shared file system) reads it.
      const alice = Number(execFileSync('id', ['-u', 'alice'], { encoding: 'utf8' }).trim());
      expect(statSync(stdout).uid).toBe(alice);

      const out = await d.api('GET', `/api/v1/jobs/${id}/output?tail=5`);
      expect(out.status, out.text).toBe(200);
      expect(out.json).toMatchObject({ path: stdout, host: hostname(), text: `hello from ${jobId}\n` });
      const err = await d.api('GET', `/api/v1/jobs/${id}/output?stream=stderr`);
      expect(err.json).toMatchObject({ path: stderr, same_file: false, text: 'oops\n' });
    });
  }

  // Issue 31: an array's tasks each write their own file, as slurmstepd expands %A_%a for them.
  for (const [profile, pattern] of [
    ['real', null],
    ['v42', null],
    ['real', '%x-%A_%a.out'],
  ] as const) {
    it(`reads each array task's own output (${pattern ?? 'slurm-%A_%a.out'}, ${profile}) through the API and the CLI`, async () => {
      const name = `sf-arr-out-${profile}${pattern ? '-x' : ''}`;
      const body = 'echo "task $SLURM_ARRAY_TASK_ID job $SLURM_JOB_ID"; [ "$SLURM_ARRAY_TASK_ID" = 1 ] && exit 4; true';
      const id = await d.submit(
        realSpec(name, body, { array: '0-2', ...(pattern && { standard_output: pattern }) }),
        profile,
      );
      const job = await d.waitForState(id, 'failed', 60_000);
      const arrayId = job.job_id as number;
      const file = (task: number) =>
        `${jobWorkDir()}/${pattern ? `${name}-${arrayId}_${task}.out` : `slurm-${arrayId}_${task}.out`}`;
      const failures = (job.array as { failures: { task_id: number; job_id: number; stdout: string | null }[] })
        .failures;
      expect(failures).toEqual([expect.objectContaining({ task_id: 1, stdout: file(1) })]);
      for (const task of [0, 1, 2]) {
        const out = await d.api('GET', `/api/v1/jobs/${id}/output?task=${task}`);
        expect(out.status, out.text).toBe(200);
        const answer = out.json as { job_id: number; task_id: number; path: string; text: string };
        expect(answer).toMatchObject({ task_id: task, path: file(task), text: `task ${task} job ${answer.job_id}\n` });
      }
      const none = await d.api('GET', `/api/v1/jobs/${id}/output`);
      expect(none.status).toBe(400);
      expect((none.json as { error: { code: string } }).error.code).toBe('SCHEDFLOW_ERR_OUTPUT_TASK');
      const cli = await runCli(['jobs', 'output', id, '--task', '1', '--data-dir', d.dataDir], { cwd: d.root });
      expect(cli.code, cli.stderr).toBe(0);
      expect(cli.stdout).toBe(`task 1 job ${failures[0]?.job_id}\n`);
      // slurmdbd keeps no comment here: the tasks' records are linked by the array's job id.
      const records = await waitFor(
        async () => {
          const rows = (await d.read((h) => history(h, { limit: 1000 }))).filter((r) => r.requestId === id);
          return rows.length === 3 ? rows : undefined;
        },
        { what: `the accounting records of array job ${arrayId}'s tasks, linked`, timeoutMs: 30_000 },
      );
      expect(records.map((r) => [r.taskId, r.external, r.taskState]).sort()).toEqual([
        [0, false, 'completed'],
        [1, false, 'failed'],
        [2, false, 'completed'],
      ]);
    });
  }

  it("records Slurm's default slurm-%j.out, with stderr in it", async () => {
    const id = await d.submit(realSpec('sf-out-default', 'echo out; echo err >&2'));
    const job = await d.waitForState(id, 'completed');
    const path = `${jobWorkDir()}/slurm-${job.job_id}.out`;
    const detail = (await d.api('GET', `/api/v1/jobs/${id}`)).json as Detail;
    expect(detail.output).toMatchObject({ stdout: path, stderr: path });
    const err = await d.api('GET', `/api/v1/jobs/${id}/output?stream=stderr`);
    expect(err.json).toMatchObject({ path, same_file: true, text: 'out\nerr\n' });
  });
});
