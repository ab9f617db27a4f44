import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killLeftovers, runCli } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { jobWorkDir, slurmCommand } from './cluster.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

/**
 * Request-level job control on the real cluster (issue 34): a request held, updated (time limit
 * and name) and released through the local API and the CLI, tasks of an array held by their own
 * ids, and a pipeline run held whole and released. Every job waits for a begin time an hour
 * away, so nothing runs (the cluster's two CPUs are shared) and each is cancelled at the end.
 */

let redis: TestRedis;
let d: RealDaemon;
const jobIds = new Set<number>();

/** An hour from now as slurmrestd's begin_time: the job stays PENDING (BeginTime) the whole test. */
const later = () => ({ begin_time: { set: true, infinite: false, number: Math.floor(Date.now() / 1000) + 3600 } });

/** A run whose first step waits for its begin time (an hour away), its second (Slurm's dependency) on the first. */
const PIPELINE = () => `
name: sf-jc-flow
steps:
  first:
    script: |
      #!/bin/bash
      true
    current_working_directory: ${jobWorkDir()}
    time_limit: 2
    slurm:
      begin_time: { set: true, infinite: false, number: ${Math.floor(Date.now() / 1000) + 3600} }
  second:
    needs: [first]
    script: |
      #!/bin/bash
      true
    current_working_directory: ${jobWorkDir()}
    time_limit: 2
`;

/** `scontrol show job` of one job or task, as key=value pairs. */
async function scontrolJob(id: string | number): Promise<Record<string, string>> {
  const text = await slurmCommand('scontrol', ['show', 'job', String(id)]);
  return Object.fromEntries(
    text
      .split(/\s+/)
      .map((pair) => pair.split('='))
      .filter((kv) => kv.length >= 2)
      .map(([k, ...v]) => [k as string, v.join('=')]),
  );
}

async function pendingJob(id: string): Promise<number> {
  const view = await d.waitForState(id, 'pending', 60_000);
  expect(view.job_id).not.toBeNull();
  jobIds.add(view.job_id as number);
  return view.job_id as number;
}

beforeAll(async () => {
  redis = await startTestRedis();
  d = await startRealDaemon(redis, { pipelines: { 'sf-jc-flow.yaml': PIPELINE() } });
});

afterAll(async () => {
  for (const id of jobIds) await slurmCommand('scancel', [String(id)]).catch(() => undefined);
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

describe('job control on real Slurm', () => {
  it('holds a request, updates its time limit and name, releases it', async () => {
    const id = await d.submit(realSpec('sf-jc-one', 'true', { ...later(), time_limit: 5 }));
    const jobId = await pendingJob(id);

    const held = await d.api('POST', `/api/v1/jobs/${id}/hold`, {});
    expect(held.status, held.text).toBe(200);
    expect(held.json).toMatchObject({ changed: true, where: 'scheduler', held: { by: 'token:slurm-tier' } });
    expect(await scontrolJob(jobId)).toMatchObject({ Priority: '0', Reason: 'JobHeldUser' });

    const updated = await d.api('PATCH', `/api/v1/jobs/${id}`, { time_limit: 3, name: 'sf-jc-renamed' });
    expect(updated.status, updated.text).toBe(200);
    expect(await scontrolJob(jobId)).toMatchObject({ JobName: 'sf-jc-renamed', TimeLimit: '00:03:00' });

    // Through the CLI, as the operator on the daemon's host.
    const release = await runCli(['jobs', 'release', id, '--data-dir', d.dataDir], { timeoutMs: 60_000 });
    expect(release.code, release.stderr).toBe(0);
    const after = await scontrolJob(jobId);
    expect(after.Reason).not.toBe('JobHeldUser');
    expect(after.Priority).not.toBe('0');
    const view = await d.job(id);
    expect(view.held).toBeNull();
    expect(view.transitions.map((t) => t.reason)).toEqual(expect.arrayContaining(['Held', 'Updated', 'Released']));
  }, 120_000);

  it('holds an array whole; tasks still in its pending record are refused alone, as slurmrestd refuses them', async () => {
    const id = await d.submit(realSpec('sf-jc-array', 'true', { ...later(), array: '0-3' }));
    const jobId = await pendingJob(id);
    // slurmrestd 25.11 answers 422 to POST /job/123_1 ("Submit job update against Array Job's
    // JobID instead of array task id"): refused at the door, in words that say what to do.
    const tasks = await d.api('POST', `/api/v1/jobs/${id}/hold`, { indexes: '1,3' });
    expect(tasks.status, tasks.text).toBe(409);
    expect((tasks.json as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'SCHEDFLOW_ERR_TASKS_NOT_IN_ARRAY',
      message: expect.stringMatching(/act on the array whole/),
    });
    const held = await d.api('POST', `/api/v1/jobs/${id}/hold`, {});
    expect(held.status, held.text).toBe(200);
    expect(await scontrolJob(jobId)).toMatchObject({ Reason: 'JobHeldUser' });
    const released = await d.api('POST', `/api/v1/jobs/${id}/release`, {});
    expect(released.status, released.text).toBe(200);
    expect((await scontrolJob(jobId)).Reason).not.toBe('JobHeldUser');
  }, 120_000);

  it('holds a whole run and releases it', async () => {
    const res = await d.api('POST', '/api/v1/pipelines/sf-jc-flow/runs', {});
    expect(res.status, res.text).toBe(201);
    const runId = (res.json as { id: string }).id;
    const steps = async () =>
      (
        (await d.api('GET', `/api/v1/runs/${runId}`)).json as {
          steps: { id: string; step: string; state: string; job_id: number | null }[];
        }
      ).steps;
    await waitFor(
      async () => {
        const s = await steps();
        return s.length === 2 && s.every((x) => x.state === 'pending') ? true : undefined;
      },
      { what: 'both steps pending', timeoutMs: 60_000, intervalMs: 500 },
    );
    for (const s of await steps()) jobIds.add(s.job_id as number);

    const held = await d.api('POST', `/api/v1/runs/${runId}/hold`, {});
    expect(held.status, held.text).toBe(200);
    expect((held.json as { steps: { outcome: string }[] }).steps.map((s) => s.outcome)).toEqual(['held', 'held']);
    for (const s of await steps())
      expect(await scontrolJob(s.job_id as number), s.step).toMatchObject({ Priority: '0' });

    const release = await runCli(['runs', 'release', runId, '--data-dir', d.dataDir], { timeoutMs: 60_000 });
    expect(release.code, release.stderr).toBe(0);
    for (const s of await steps()) expect((await scontrolJob(s.job_id as number)).Priority, s.step).not.toBe('0');
    expect((await d.api('POST', `/api/v1/runs/${runId}/cancel`, {})).status).toBe(202);
  }, 120_000);
});
