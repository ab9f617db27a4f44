import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { SchedClient } from '../../src/sched/client.js';
import { jobSpecSchema } from '../../src/sched/job-spec.js';
import { killLeftovers } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { jobWorkDir, slurmrestdProfile } from './cluster.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

/**
 * `schedflow start` on a slurmrestd profile of the real cluster, driven through its local API:
 * every final state a job can reach, a refusal, a pipeline's dependencies, and the import of
 * jobs submitted outside schedflow. The jobs run concurrently: the slowest (a time limit of a
 * minute) bounds the file's time.
 */

let redis: TestRedis;
let d: RealDaemon;

const PIPELINE = `
name: deps
steps:
  first:
    script: |
      #!/bin/bash
      echo first
    current_working_directory: ${jobWorkDir()}
    time_limit: 5
  breaks:
    needs: [first]
    script: |
      #!/bin/bash
      sleep 3
      exit 4
    current_working_directory: ${jobWorkDir()}
    time_limit: 5
  cleanup:
    needs: [{ step: breaks, type: afterany }]
    script: |
      #!/bin/bash
      echo cleanup
    current_working_directory: ${jobWorkDir()}
    time_limit: 5
  never:
    needs: [breaks]
    script: |
      #!/bin/bash
      echo never
    current_working_directory: ${jobWorkDir()}
    time_limit: 5
`;

beforeAll(async () => {
  redis = await startTestRedis();
  d = await startRealDaemon(redis, {
    pipelines: { 'deps.yaml': PIPELINE },
    versions: { v42: 'v0.0.42', v43: 'v0.0.43', latest: 'latest' },
  });
});

afterAll(async () => {
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

describe.concurrent('jobs through the daemon on real Slurm', () => {
  it('a job that completes: exit code, times, elapsed and nodes', async () => {
    const id = await d.submit(realSpec('sf-ok', 'echo hello; sleep 2'));
    const job = await d.waitForState(id, 'completed');
    expect(job.exit_code).toBe(0);
    expect(job.job_id).toBeGreaterThan(0);
    expect(Date.parse(job.ended_at ?? '') - Date.parse(job.started_at ?? '')).toBeGreaterThanOrEqual(2000);
    expect(job.transitions.map((t) => t.to)).toEqual(
      expect.arrayContaining(['queued', 'submitting', 'submitted', 'completed']),
    );
    const record = await waitFor(
      async () => {
        const res = await d.api('GET', '/api/v1/history?external=false');
        const items = (res.json as { items: { job_id: number; accounting: Record<string, unknown> }[] }).items;
        const item = items.find((i) => i.job_id === job.job_id);
        return item?.accounting.state === 'COMPLETED' ? item : undefined;
      },
      // The daemon's first accounting import goes through the day's records of the cluster first:
      // on PostgreSQL, with 1,700 of them, 30 s was once too short (alone it took 12 s).
      { what: 'the accounting record in the history', timeoutMs: 90_000, intervalMs: 500 },
    );
    expect(record.accounting).toMatchObject({ exit_code: 0, nodes: 'localhost' });
    expect(record.accounting.elapsed_sec).toBeGreaterThanOrEqual(2);
  });

  it('a job through profiles pinned to each data parser, and latest', async () => {
    const ids = await Promise.all(
      ['v42', 'v43', 'latest'].map((profile) => d.submit(realSpec(`sf-${profile}`, 'exit 3'), profile)),
    );
    for (const id of ids) expect((await d.waitForState(id, 'failed')).exit_code).toBe(3);
  });

  it('a job that fails: its exit code', async () => {
    const id = await d.submit(realSpec('sf-fail', 'echo failing >&2; exit 7'));
    const job = await d.waitForState(id, 'failed');
    expect(job.exit_code).toBe(7);
    expect(job.raw_state).toContain('FAILED');
  });

  it('a job that hits its time limit: TIMEOUT', async () => {
    const id = await d.submit(realSpec('sf-timeout', 'sleep 600', { time_limit: 1 }));
    const job = await d.waitForState(id, 'timeout', 200_000);
    expect(job.raw_state).toContain('TIMEOUT');
    expect(job.ended_at).not.toBeNull();
  });

  it('a job cancelled while it runs', async () => {
    const id = await d.submit(realSpec('sf-cancel', 'sleep 600'));
    await d.waitForState(id, 'running');
    const res = await d.api('DELETE', `/api/v1/jobs/${id}`);
    expect(res.status).toBe(202);
    const job = await d.waitForState(id, 'cancelled', 60_000);
    expect(job.raw_state).toContain('CANCELLED');
  });

  it('a job Slurm refuses: submit_failed at once with Slurm’s message, never retried', async () => {
    const id = await d.submit(realSpec('sf-refused', 'true', { partition: 'no-such-partition' }));
    const job = await d.waitForState(id, 'submit_failed', 30_000);
    expect(job.error?.message).toMatch(/partition/i);
    expect(job.transitions.filter((t) => t.to === 'submitting')).toHaveLength(1);
  });

  it('a pipeline with afterok and afterany steps ends as Slurm says', async () => {
    const res = await d.api('POST', '/api/v1/pipelines/deps/runs', {});
    expect(res.status).toBe(201);
    const runId = (res.json as { id: string }).id;
    const run = await waitFor(
      async () => {
        const r = await d.api('GET', `/api/v1/runs/${runId}`);
        const body = r.json as {
          state: string;
          steps: { step: string; state: string; exit_code: number | null; job_id: number | null }[];
        };
        return ['succeeded', 'failed', 'cancelled'].includes(body.state) ? body : undefined;
      },
      { what: 'the run to end', timeoutMs: 120_000, intervalMs: 500 },
    );
    expect(run.state).toBe('failed');
    const byStep = Object.fromEntries(run.steps.map((s) => [s.step, s]));
    expect(byStep.first).toMatchObject({ state: 'completed', exit_code: 0 });
    expect(byStep.breaks).toMatchObject({ state: 'failed', exit_code: 4 });
    expect(byStep.cleanup).toMatchObject({ state: 'completed', exit_code: 0 });
    // Submitted behind "breaks" before it failed: Slurm held it pending for good, schedflow cancelled it.
    expect(byStep.never?.state).toBe('cancelled');
    expect(byStep.never?.job_id).not.toBeNull();
  });

  it('a job submitted outside schedflow is imported by reconcile', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'schedflow-outside-'));
    const client = await SchedClient.connect(slurmrestdProfile(dir).profile, {
      logger: createLogger({ level: 'silent' }),
    });
    let jobId: number;
    try {
      // Through the client, but without a schedflow marker of a request this daemon knows.
      const spec = jobSpecSchema.parse(realSpec('sf-outside', 'echo outside'));
      jobId = (await client.submit(spec, `outside-${Date.now()}`)).job_id;
    } finally {
      await client.close();
    }
    const item = await waitFor(
      async () => {
        const res = await d.api('GET', '/api/v1/history?external=true');
        const items = (res.json as { items: { job_id: number; external: boolean; accounting: { state: string } }[] })
          .items;
        const found = items.find((i) => i.job_id === jobId);
        return found?.accounting.state === 'COMPLETED' ? found : undefined;
      },
      { what: `job ${jobId} in the history as external`, timeoutMs: 90_000, intervalMs: 1000 },
    );
    expect(item.external).toBe(true);
  });
});
