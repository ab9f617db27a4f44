import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killLeftovers } from '../helpers/cli-process.js';
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
