import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killLeftovers, runCli } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { jobWorkDir } from './cluster.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

/**
 * Cancelling on the real cluster: a pipeline run with a running step and a step pending on it
 * (Slurm's dependency), through the local API, and a job through `schedflow jobs cancel`.
 */

let redis: TestRedis;
let d: RealDaemon;

const PIPELINE = `
name: cancel-me
steps:
  long:
    script: |
      #!/bin/bash
      sleep 120
    current_working_directory: ${jobWorkDir()}
    time_limit: 5
  after:
    needs: [long]
    script: |
      #!/bin/bash
      echo never
    current_working_directory: ${jobWorkDir()}
    time_limit: 5
`;

interface RunBody {
  state: string;
  detail: string | null;
  steps: { step: string; state: string; job_id: number | null; raw_state: string | null }[];
}

beforeAll(async () => {
  redis = await startTestRedis();
  d = await startRealDaemon(redis, { pipelines: { 'cancel-me.yaml': PIPELINE } });
});

afterAll(async () => {
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

describe.concurrent('cancelling on real Slurm', () => {
  it('a run with a running step and a step pending on it ends cancelled, both cancelled by Slurm', async () => {
    const res = await d.api('POST', '/api/v1/pipelines/cancel-me/runs', {});
    expect(res.status).toBe(201);
    const runId = (res.json as { id: string }).id;
    const show = async () => (await d.api('GET', `/api/v1/runs/${runId}`)).json as RunBody;
    await waitFor(
      async () => {
        const steps = Object.fromEntries((await show()).steps.map((s) => [s.step, s.state]));
        return steps.long === 'running' && steps.after === 'pending' ? true : undefined;
      },
      { what: 'long running and after pending', timeoutMs: 60_000, intervalMs: 500 },
    );

    const cancel = await d.api('POST', `/api/v1/runs/${runId}/cancel`, {});
    expect(cancel.status).toBe(202);
    expect((cancel.json as { steps: { step: string; outcome: string }[] }).steps.map((s) => s.outcome)).toEqual([
      'cancel_sent',
      'cancel_sent',
    ]);
    const run = await waitFor(async () => ((await show()).state === 'cancelled' ? show() : undefined), {
      what: 'the run to end cancelled',
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    for (const step of run.steps) {
      expect(step, step.step).toMatchObject({ state: 'cancelled', raw_state: expect.stringMatching(/CANCELLED/) });
    }
    expect(run.detail).toMatch(/^cancelled by API token "slurm-tier"/);
    const again = await d.api('POST', `/api/v1/runs/${runId}/cancel`, {});
    expect(again.status).toBe(200);
  });

  it('a running job cancelled with schedflow jobs cancel', async () => {
    const id = await d.submit(realSpec('sf-cli-cancel', 'sleep 120'));
    await d.waitForState(id, 'running', 60_000);
    const result = await runCli(['jobs', 'cancel', id, '--wait', '--data-dir', d.dataDir], { cwd: d.root });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/cancel of job \d+ sent to the scheduler/);
    const job = await d.waitForState(id, 'cancelled', 30_000);
    expect(job.raw_state).toMatch(/CANCELLED/);
  });

  it('says scopes do not apply to plain slurmrestd', async () => {
    const ready = await d.api('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect((ready.json as { detail?: Record<string, string> }).detail?.['scopes:real']).toBeUndefined();
  });
});
