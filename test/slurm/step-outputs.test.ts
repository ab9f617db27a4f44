import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killLeftovers } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { jobWorkDir } from './cluster.js';
import { type RealDaemon, startRealDaemon } from './daemon-helpers.js';

/**
 * Issue 36 on the real cluster: a step's outputs ($SCHEDFLOW_OUTPUTS in its working directory,
 * which the daemon sees: the local cluster runs jobs on this machine) size the next step's array
 * (0: the step is skipped, no job) and reach another step's script; the run's detail and its webhook carry them.
 */

const tag = `outs-${Date.now()}`;

const pipeline = (webhook: string) => `
name: outs
webhook: ${webhook}
defaults:
  current_working_directory: ${jobWorkDir()}
  time_limit: 5
steps:
  split:
    script: |
      #!/bin/bash
      echo chunks=2 >> "$SCHEDFLOW_OUTPUTS"
      echo none=0 >> "$SCHEDFLOW_OUTPUTS"
      echo word=${tag} >> "$SCHEDFLOW_OUTPUTS"
  nothing:
    needs: [split]
    array: \${steps.split.outputs.none}
    script: |
      #!/bin/bash
      touch ${tag}-nothing-ran
  fan:
    needs: [split]
    array: \${steps.split.outputs.chunks}
    script: |
      #!/bin/bash
      touch ${tag}-chunk-$SLURM_ARRAY_TASK_ID
  use:
    needs: [fan]
    script: |
      #!/bin/bash
      echo \${steps.split.outputs.word:q} > ${tag}-word
`;

let redis: TestRedis;
let d: RealDaemon;
let receiver: WebhookReceiver;

beforeAll(async () => {
  redis = await startTestRedis();
  receiver = await startWebhookReceiver();
  d = await startRealDaemon(redis, {
    pipelines: { 'outs.yaml': pipeline(`${receiver.url}/runs`) },
    env: { SCHEDFLOW_WEBHOOK_ALLOW_HOSTS: '127.0.0.1' },
  });
});

afterAll(async () => {
  await d?.stop();
  await receiver?.stop();
  await killLeftovers();
  await redis?.stop();
});

describe('step outputs on real Slurm', () => {
  it('size an array at run time and reach a later step’s script', async () => {
    const res = await d.api('POST', '/api/v1/pipelines/outs/runs', {});
    expect(res.status).toBe(201);
    const runId = (res.json as { id: string }).id;
    const run = await waitFor(
      async () => {
        const body = (await d.api('GET', `/api/v1/runs/${runId}`)).json as {
          state: string;
          outputs: Record<string, Record<string, string>>;
          steps: {
            step: string;
            state: string;
            job_id: number | null;
            id: string;
          }[];
        };
        return ['succeeded', 'failed', 'cancelled'].includes(body.state) ? body : undefined;
      },
      { what: 'the run to end', timeoutMs: 120_000, intervalMs: 500 },
    );
    expect(run.state).toBe('succeeded');
    expect(run.outputs).toEqual({ split: { chunks: '2', none: '0', word: tag } });
    // Sized 0: skipped, never submitted (no job in Slurm), not an error.
    const nothing = run.steps.find((s) => s.step === 'nothing');
    expect(nothing).toMatchObject({ state: 'completed', job_id: null });
    expect(() => readFileSync(join(jobWorkDir(), `${tag}-nothing-ran`))).toThrow();
    const fan = run.steps.find((s) => s.step === 'fan');
    expect(fan?.state).toBe('completed');
    // One array job of two tasks, sized by split's output.
    expect((await d.job(fan?.id as string)).array).toMatchObject({ expression: '0-1', task_count: 2 });
    for (const i of [0, 1]) expect(() => readFileSync(join(jobWorkDir(), `${tag}-chunk-${i}`))).not.toThrow();
    expect(readFileSync(join(jobWorkDir(), `${tag}-word`), 'utf8')).toBe(`${tag}\n`);
    // The run's webhook carries them.
    const [call] = await receiver.waitForCalls(1, 30_000);
    const body = JSON.parse(call?.body ?? '{}') as { run: { id: string; state: string; outputs: unknown } };
    expect(body.run).toMatchObject({ id: runId, state: 'succeeded', outputs: run.outputs });
  }, 150_000);
});
