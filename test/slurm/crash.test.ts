import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killLeftovers } from '../helpers/cli-process.js';
import { type FlakyProxy, startFlakyProxy } from '../helpers/flaky-proxy.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { realSlurm, slurmCommand } from './cluster.js';
import { type RealDaemon, realSpec, requestRow, startRealDaemon } from './daemon-helpers.js';

/**
 * The daemon killed with SIGKILL right after slurmrestd accepted a submission (its answer
 * held back by a proxy, so the history never learnt the job id), and started again only
 * after the job has ended and left the controller (MinJobAge is a minute): it adopts the one
 * job by its marker and resolves it from accounting. Still one Slurm job.
 */

let redis: TestRedis;
let proxy: FlakyProxy;
let d: RealDaemon;

beforeAll(async () => {
  redis = await startTestRedis();
  proxy = await startFlakyProxy(realSlurm().url);
  d = await startRealDaemon(redis, { url: proxy.url });
});

afterAll(async () => {
  proxy?.release();
  await d?.stop();
  await killLeftovers();
  await proxy?.close();
  await redis?.stop();
});

/**
 * Slurm's own view of the jobs of a name: squeue forgets them past MinJobAge, sacct does not.
 * (By name: slurmdbd keeps no job comments, so no marker, without AccountingStoreFlags=job_comment.)
 */
async function slurmJobsNamed(name: string): Promise<string[]> {
  const out = await slurmCommand('sacct', [
    '-n',
    '-X',
    '-P',
    '-u',
    'alice',
    '-S',
    'now-3600',
    '--name',
    name,
    '-o',
    'jobid',
  ]);
  return out.split('\n').filter((line) => line.trim() !== '');
}

describe('kill -9 of the daemon right after a submit, restarted after MinJobAge', () => {
  it('makes one Slurm job, adopts it by its marker and resolves it from accounting', async () => {
    const reached = proxy.holdAnswerOnce((r) => r.method === 'POST' && r.url.endsWith('/job/submit'));
    const name = `sf-crash-${Date.now()}`;
    const id = await d.submit(realSpec(name, 'echo crash; exit 2'));
    await reached;
    expect((await requestRow(d, id)).row?.state).toBe('submitting');
    d.process.child.kill('SIGKILL');
    await d.process.exited;
    proxy.release();

    const [jobId] = await waitFor(
      async () => {
        const ids = await slurmJobsNamed(name);
        return ids.length > 0 ? ids : undefined;
      },
      { what: 'the job in sacct', timeoutMs: 30_000, intervalMs: 1000 },
    );
    // Gone from the controller: only accounting knows the job now (MinJobAge=60).
    await waitFor(
      async () => {
        // scontrol knows an ended job until MinJobAge has passed (squeue lists only active ones).
        const known = await slurmCommand('scontrol', ['show', 'job', String(jobId)]).then(
          () => true,
          () => false,
        );
        return known ? undefined : true;
      },
      { what: `job ${jobId} to leave the controller`, timeoutMs: 150_000, intervalMs: 2000 },
    );

    await d.restart();
    const job = await d.waitForState(id, 'failed', 90_000);
    expect(job.job_id).toBe(Number(jobId));
    expect(job.adopted).toBe(true);
    expect(job.exit_code).toBe(2);
    expect(job.transitions.find((t) => t.to === 'failed')?.source).toBe('accounting');
    expect(await slurmJobsNamed(name)).toHaveLength(1);
  });
});
