import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { SchedClient } from '../../src/sched/client.js';
import { jobSpecSchema } from '../../src/sched/job-spec.js';
import { JobNotFoundError, JobUpdateRefusedError } from '../../src/sched/sched-errors.js';
import { SUPPORTED_VERSIONS } from '../../src/sched/versions.js';
import { waitFor } from '../helpers/http.js';
import { jobWorkDir, realSlurm, script, slurmCommand, slurmrestdProfile } from './cluster.js';

/**
 * Hold, release and update on the real Slurm 25.11.7, every version schedflow speaks, as alice
 * (no AdminLevel): what Slurm takes and what it refuses, in its words. Jobs are 1 CPU and
 * submitted held; every one is cancelled, and the partition the test makes is deleted.
 */

const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'schedflow-slurm-update-'));
const PARTITION = `sf-upd-${process.pid}`;
const jobs: number[] = [];
const clients: SchedClient[] = [];

afterAll(async () => {
  if (jobs.length > 0) await slurmCommand('scancel', jobs.map(String)).catch(() => undefined);
  await slurmCommand('scontrol', ['delete', `PartitionName=${PARTITION}`]).catch(() => undefined);
  await Promise.all(clients.map((c) => c.close()));
});

async function connect(version: (typeof SUPPORTED_VERSIONS)[number]) {
  const client = await SchedClient.connect(slurmrestdProfile(join(dir, version), { version }).profile, { logger });
  clients.push(client);
  return client;
}

/** The controller's record as slurmrestd answers it. */
async function record(jobId: number): Promise<Record<string, unknown>> {
  const { url, aliceJwt } = realSlurm();
  const res = await fetch(`${url}/slurm/v0.0.44/job/${jobId}`, {
    headers: { 'X-SLURM-USER-NAME': 'alice', 'X-SLURM-USER-TOKEN': aliceJwt },
  });
  return ((await res.json()) as { jobs: Record<string, unknown>[] }).jobs[0] as Record<string, unknown>;
}

async function submitHeld(client: SchedClient, marker: string, extra: Record<string, unknown> = {}) {
  const spec = jobSpecSchema.parse({
    name: 'sf-update',
    script: script('sleep 60'),
    current_working_directory: jobWorkDir(),
    time_limit: 5,
    cpus_per_task: 1,
    hold: true,
    ...extra,
  });
  const { job_id } = await client.submit(spec, `${marker}-${process.pid}-${Date.now()}`);
  jobs.push(job_id);
  return job_id;
}

describe.each(SUPPORTED_VERSIONS)('job update on real Slurm, %s', (version) => {
  it('updates a held job (time limit, partition, name), releases it, holds it again; refuses in Slurm words', async () => {
    const client = await connect(version);
    const jobId = await submitHeld(client, `upd-${version}`);
    expect(await record(jobId)).toMatchObject({ hold: true, state_reason: 'JobHeldUser' });

    await client.updateJob(jobId, { timeLimitMin: 3, partition: 'lab-owner', name: `sf-renamed-${version}` });
    expect(await record(jobId)).toMatchObject({
      time_limit: { set: true, number: 3 },
      partition: 'lab-owner',
      name: `sf-renamed-${version}`,
    });
    // A pending job's limit may go up as well as down, for a user, within MaxTime.
    await client.updateJob(jobId, { timeLimitMin: 4, partition: 'debug' });
    expect(await record(jobId)).toMatchObject({ time_limit: { number: 4 }, partition: 'debug' });

    await expect(client.updateJob(jobId, { partition: 'sf-no-such' })).rejects.toMatchObject({
      slurmCode: 2000,
      slurmWords: 'Invalid partition name specified',
    });
    await expect(client.updateJob(jobId, { qos: 'sf-no-such' })).rejects.toMatchObject({
      slurmCode: 2066,
      slurmWords: 'Invalid qos specification',
    });
    await expect(client.updateJob(jobId, { nice: -5 })).rejects.toMatchObject({ slurmCode: 2002 });

    await client.updateJob(jobId, { hold: false });
    await waitFor(async () => ((await record(jobId)).state_reason !== 'JobHeldUser' ? true : undefined));
    expect(await record(jobId)).toMatchObject({ hold: false });
    // Released, it starts (or waits its turn); once running, its partition is Slurm's refusal.
    await waitFor(async () => ((await record(jobId)).job_state as string[])[0] === 'RUNNING' || undefined, {
      timeoutMs: 60_000,
    });
    const moved = await client.updateJob(jobId, { partition: 'lab-owner' }).catch((e: unknown) => e);
    expect(moved).toBeInstanceOf(JobUpdateRefusedError);
    expect(moved).toMatchObject({ slurmCode: 2073, slurmWords: 'Job is no longer pending execution' });
    const raised = await client.updateJob(jobId, { timeLimitMin: 10 }).catch((e: unknown) => e);
    expect(raised).toMatchObject({ slurmCode: 2002, slurmWords: 'Access/permission denied' });
    await client.updateJob(jobId, { hold: true });
    expect(await record(jobId)).toMatchObject({ hold: true, state_reason: 'JobHeldUser' });
    await client.cancel(jobId);
  }, 120_000);
});

describe('limits on real Slurm', () => {
  it('a user may not set a limit above the partition MaxTime (2002), nor move a job to a partition whose MaxTime its limit exceeds (2051); an unknown job is not found', async () => {
    await slurmCommand('scontrol', [
      'create',
      `PartitionName=${PARTITION}`,
      'Nodes=localhost',
      'State=DOWN',
      'MaxTime=10',
    ]);
    const client = await connect('v0.0.44');
    await expect(client.updateJob(99_999_999, { name: 'x' })).rejects.toBeInstanceOf(JobNotFoundError);
    const jobId = await submitHeld(client, 'limits', { time_limit: 30 });
    await expect(client.updateJob(jobId, { partition: PARTITION })).rejects.toMatchObject({
      slurmCode: 2051,
      slurmWords: 'Requested time limit is invalid (missing or exceeds some limit)',
    });
    await client.updateJob(jobId, { partition: PARTITION, timeLimitMin: 10 });
    await expect(client.updateJob(jobId, { timeLimitMin: 20 })).rejects.toMatchObject({
      slurmCode: 2002,
      slurmWords: 'Access/permission denied',
    });
    await client.cancel(jobId);
  }, 60_000);
});
