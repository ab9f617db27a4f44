import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killLeftovers } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { jobWorkDir, slurmCommand } from './cluster.js';
import { type RealDaemon, startRealDaemon } from './daemon-helpers.js';

/**
 * Resuming a run on the real cluster (issue 36): a 5-step chain whose fourth step fails until a
 * marker file exists is resumed through the local API; the kept steps' jobs are not run again,
 * steps 4 and 5 get one new job each in Slurm, and the run ends succeeded in its second attempt.
 */

let redis: TestRedis;
let d: RealDaemon;

// A name of this run's: the tier's accounting outlives it, and its jobs are counted by name.
const NAME = `resume-${process.pid}-${Date.now().toString(36)}`;
const MARKER = join(jobWorkDir(), `${NAME}.ok`);

const PIPELINE = [
  `name: ${NAME}`,
  'defaults:',
  `  current_working_directory: ${jobWorkDir()}`,
  '  time_limit: 2',
  'steps:',
  ...['s1', 's2', 's3', 's4', 's5'].flatMap((step, i) => [
    `  ${step}:`,
    '    script: |',
    '      #!/bin/bash',
    step === 's4' ? `      test -f ${MARKER} || exit 3` : '      true',
    ...(i > 0 ? [`    needs: [s${i}]`] : []),
  ]),
].join('\n');

interface RunBody {
  state: string;
  attempt: number;
  detail: string | null;
  steps: { step: string; state: string; job_id: number | null; run_attempt: number }[];
}

beforeAll(async () => {
  redis = await startTestRedis();
  d = await startRealDaemon(redis, { pipelines: { [`${NAME}.yaml`]: PIPELINE } });
});

afterAll(async () => {
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

const runOf = async (id: string) => (await d.api('GET', `/api/v1/runs/${id}`)).json as RunBody;

const waitForRun = (id: string, state: string, attempt: number) =>
  waitFor(
    async () => {
      const run = await runOf(id);
      return run.state === state && run.attempt === attempt ? run : undefined;
    },
    { what: `run ${id} ${state} (attempt ${attempt})`, timeoutMs: 90_000, intervalMs: 500 },
  );

/** The cluster's jobs of a step, by name, as accounting lists them (allocations only). */
async function slurmJobsOf(step: string): Promise<number[]> {
  const out = await slurmCommand('sacct', [
    '-n',
    '-X',
    '-P',
    '-a',
    '-S',
    'now-1hour',
    '--name',
    `${NAME}.${step}`,
    '-o',
    'JobID',
  ]);
  return out
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map(Number);
}

describe('resuming on real Slurm', () => {
  it('a 5-step run failing at step 4, resumed: only steps 4 and 5 get new jobs, one each, and it ends succeeded', async () => {
    const made = await d.api('POST', `/api/v1/pipelines/${NAME}/runs`, {});
    expect(made.status, JSON.stringify(made.json)).toBe(201);
    const id = (made.json as { id: string }).id;
    const failed = await waitForRun(id, 'failed', 1);
    expect(failed.detail).toMatch(/s4: FAILED \(exit 3\)/);
    const kept = failed.steps.filter((s) => s.state === 'completed');
    expect(kept.map((s) => s.step)).toEqual(['s1', 's2', 's3']);

    writeFileSync(MARKER, '');
    const resumed = await d.api('POST', `/api/v1/runs/${id}/resume`, {});
    expect(resumed.status, JSON.stringify(resumed.json)).toBe(201);
    expect(resumed.json).toMatchObject({ attempt: 2, kept: ['s1', 's2', 's3'] });
    const run = await waitForRun(id, 'succeeded', 2);

    const second = run.steps.filter((s) => s.run_attempt === 2);
    expect(second.map((s) => [s.step, s.state])).toEqual([
      ['s4', 'completed'],
      ['s5', 'completed'],
    ]);
    // In Slurm: the kept steps' jobs are their only ones; the resumed steps' new jobs are there once.
    await waitFor(
      async () => {
        for (const s of kept) if ((await slurmJobsOf(s.step)).join() !== String(s.job_id)) return undefined;
        for (const s of second) {
          const jobs = await slurmJobsOf(s.step);
          if (jobs.filter((j) => j === s.job_id).length !== 1) return undefined;
        }
        return true;
      },
      { what: 'accounting to list the jobs of each step', timeoutMs: 30_000, intervalMs: 1000 },
    );
  }, 180_000);
});
