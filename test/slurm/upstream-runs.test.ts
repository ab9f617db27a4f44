import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listRuns } from '../../src/db/runs.js';
import type { PipelineRunRow } from '../../src/db/schema.js';
import { cleanEnv, type DaemonProcess, killLeftovers, spawnDaemon } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { jobWorkDir } from './cluster.js';
import { FAST_ENV, type RealDaemon, startRealDaemon } from './daemon-helpers.js';

/**
 * Issue 36 on the real cluster: a pipeline's `on:` starts a run of it when a run of another ends,
 * with the ended run's outputs in its script; one run per upstream end across a kill -9 and
 * restart of the scheduler, and with a second scheduler process on the same history.
 */

const tag = `up-${Date.now()}`;
const work = jobWorkDir();

// The upstream step waits for a file the test writes, so it can end while no scheduler runs.
const UPSTREAM = `
name: ingest
defaults:
  current_working_directory: ${work}
  time_limit: 5
steps:
  fetch:
    script: |
      #!/bin/bash
      while [ ! -e ${tag}-go-\${run.id} ]; do sleep 0.2; done
      echo batch=${tag}-\${run.id} >> "$SCHEDFLOW_OUTPUTS"
`;

const DOWNSTREAM = `
name: analyse
on:
  succeeded: [ingest]
defaults:
  current_working_directory: ${work}
  time_limit: 5
steps:
  analyse:
    script: |
      #!/bin/bash
      echo \${upstream.outputs.fetch.batch:q} \${upstream.state} >> ${tag}-analysed-\${upstream.run_id}
`;

let redis: TestRedis;
let d: RealDaemon;
const extra: DaemonProcess[] = [];

beforeAll(async () => {
  redis = await startTestRedis();
  d = await startRealDaemon(redis, { pipelines: { 'ingest.yaml': UPSTREAM, 'analyse.yaml': DOWNSTREAM } });
});

afterAll(async () => {
  for (const p of extra) await p.stop('SIGTERM');
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

const runsOf = (pipeline: string): Promise<PipelineRunRow[]> =>
  d.read((store) => listRuns(store, { pipeline, limit: 100 }));

async function trigger(): Promise<string> {
  const res = await d.api('POST', '/api/v1/pipelines/ingest/runs', {});
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  return (res.json as { id: string }).id;
}

async function runState(id: string): Promise<{ state: string; started_at: string | null }> {
  return (await d.api('GET', `/api/v1/runs/${id}`)).json as { state: string; started_at: string | null };
}

/** The downstream runs of `upstream`, once they have all ended. */
async function downstreamEnded(upstream: string): Promise<PipelineRunRow[]> {
  return waitFor(
    async () => {
      const runs = (await runsOf('analyse')).filter((r) => r.upstreamRunId === upstream);
      return runs.length > 0 && runs.every((r) => ['succeeded', 'failed', 'skipped'].includes(r.state))
        ? runs
        : undefined;
    },
    { what: `the run of analyse that run ${upstream} starts`, timeoutMs: 120_000, intervalMs: 500 },
  );
}

describe('runs that start runs on real Slurm', () => {
  it('an upstream end starts one downstream run with its outputs, across a kill -9 of the scheduler', async () => {
    const id = await trigger();
    await waitFor(async () => ((await runState(id)).started_at ? true : undefined), {
      what: 'the upstream step to start',
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    // The scheduler dies; the upstream job ends while none runs; a new one follows the end.
    await d.process.stop('SIGKILL');
    writeFileSync(join(work, `${tag}-go-${id}`), '');
    await d.restart();
    const [analyse] = await downstreamEnded(id);
    expect(analyse).toMatchObject({ state: 'succeeded', trigger: 'upstream', upstreamAttempt: 1 });
    expect(readFileSync(join(work, `${tag}-analysed-${id}`), 'utf8')).toBe(`${tag}-${id} succeeded\n`);
    expect((await runState(id)).state).toBe('succeeded');
  }, 240_000);

  it('with a second scheduler process on the same history, each end starts one run', async () => {
    const env = cleanEnv({ REDIS_URL: redis.url, ...FAST_ENV });
    const second = spawnDaemon({ dataDir: d.dataDir, configDir: d.configDir, env, cwd: d.root });
    extra.push(second);
    await second.ready(60_000);
    const ids = [await trigger(), await trigger(), await trigger()];
    for (const id of ids) writeFileSync(join(work, `${tag}-go-${id}`), '');
    for (const id of ids) {
      const runs = await downstreamEnded(id);
      expect(runs.map((r) => r.state)).toEqual(['succeeded']);
      // The step ran once: one line in its file.
      expect(readFileSync(join(work, `${tag}-analysed-${id}`), 'utf8')).toBe(`${tag}-${id} succeeded\n`);
    }
    // Every end marked followed (by either process): still one run per end.
    await waitFor(
      async () => {
        const ended = (await runsOf('ingest')).filter((r) => ids.includes(r.id));
        return ended.length === ids.length && ended.every((r) => r.downstreamCheckedAt !== null) ? true : undefined;
      },
      { what: 'every upstream end to be marked followed', timeoutMs: 30_000, intervalMs: 500 },
    );
    const all = await runsOf('analyse');
    for (const id of ids) expect(all.filter((r) => r.upstreamRunId === id)).toHaveLength(1);
  }, 300_000);
});
