import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { attemptsOf } from '../../src/requests/attempts.js';
import { SchedClient } from '../../src/sched/client.js';
import { killLeftovers } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { slurmrestdProfile } from './cluster.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

/**
 * Retry policies on the real cluster: a job that fails with a listed exit code is retried once,
 * as its own Slurm job linked to the first; one that fails with another code is not; a job that
 * times out is retried with its time limit doubled, as Slurm's own records of both jobs say. The
 * partitions' limits retries keep to, as slurmrestd gives them.
 */

let redis: TestRedis;
let d: RealDaemon;

beforeAll(async () => {
  redis = await startTestRedis();
  d = await startRealDaemon(redis);
});

afterAll(async () => {
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

interface Attempt {
  id: string;
  attempt: number;
  state: string;
  job_id: number | null;
  exit_code: number | null;
  reason: string | null;
}

async function submit(spec: Record<string, unknown>, retry: unknown): Promise<string> {
  const res = await d.api('POST', '/api/v1/jobs', { profile: 'real', spec, retry });
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  return (res.json as { id: string }).id;
}

/** The request's attempts once the last has ended with none to follow. */
async function settled(id: string, timeoutMs = 120_000): Promise<Attempt[]> {
  return waitFor(
    async () => {
      const rows = await d.read((h) => attemptsOf(h, id));
      const last = rows.at(-1);
      if (!last || last.endedAt === null || last.retryDueAt !== null || last.nextAttemptId !== null) return undefined;
      const shown = await d.api('GET', `/api/v1/jobs/${id}`);
      return (shown.json as { attempts: Attempt[] }).attempts;
    },
    { what: `request ${id} to settle`, timeoutMs, intervalMs: 500 },
  );
}

describe.concurrent('retry policies on real Slurm', () => {
  it('a job failing with a listed exit code is retried once, as a second Slurm job linked to the first', async () => {
    const id = await submit(realSpec('sf-retry', 'exit 75'), { on: ['FAILED'], exit_codes: [75], limit: 1 });
    const attempts = await settled(id);
    expect(attempts.map((a) => [a.attempt, a.state, a.exit_code, a.reason])).toEqual([
      [1, 'failed', 75, null],
      [2, 'failed', 75, 'FAILED (exit 75) on attempt 1'],
    ]);
    expect(attempts[0]?.job_id).not.toBe(attempts[1]?.job_id);
    const last = await d.job(attempts[1]?.id as string);
    expect(last).toMatchObject({
      first_attempt_id: id,
      retry: { note: "FAILED on attempt 2: the policy's limit of 1 retry is reached", next_attempt_id: null },
    });
    expect(last.transitions.slice(0, 2).map((t) => `${t.to} (${t.source})`)).toEqual([
      'accepted (retry)',
      'queued (retry)',
    ]);
  });

  it('a TIMEOUT is retried with the time limit doubled within the bound, and the second attempt completes', async () => {
    // The first attempt outlives its one minute; the second finds the mark and ends at once.
    // Slurm's time limit is whole minutes, and slurmctld looks for jobs over it on its periodic
    // pass (about every 30 s; OverTimeLimit 0), so the first ends TIMEOUT 60 to 95 s after it
    // started (KillWait 5 s between SIGTERM and SIGKILL does not delay the state).
    const once = `timeout-once-${Date.now()}`;
    const body = `if [ ! -e ${once} ]; then touch ${once}; sleep 300; fi\necho second`;
    const id = await submit(realSpec('sf-timeout', body, { time_limit: 1 }), {
      on: ['TIMEOUT'],
      limit: 2,
      escalate: { time_limit: { factor: 2, max: 3 } },
    });
    const attempts = await settled(id, 240_000);
    expect(attempts.map((a) => [a.attempt, a.state, a.reason])).toEqual([
      [1, 'timeout', null],
      [2, 'completed', 'TIMEOUT on attempt 1; time_limit 0:01:00 → 0:02:00'],
    ]);
    // The time limits Slurm itself gave the two jobs: accounting's records of them.
    const dir = mkdtempSync(join(tmpdir(), 'schedflow-timeout-'));
    const client = await SchedClient.connect(slurmrestdProfile(dir).profile, {
      logger: createLogger({ level: 'silent' }),
    });
    try {
      const records = await Promise.all(
        attempts.map((a) =>
          waitFor(async () => (await client.getAccountingJob(a.job_id as number)).data ?? undefined, {
            what: `accounting's record of job ${a.job_id}`,
            timeoutMs: 30_000,
            intervalMs: 1000,
          }),
        ),
      );
      expect(records.map((r) => [r.state, r.time_limit])).toEqual([
        ['TIMEOUT', { minutes: 1 }],
        ['COMPLETED', { minutes: 2 }],
      ]);
    } finally {
      await client.close();
    }
  }, 300_000);

  it('a job failing with another exit code is not retried', async () => {
    const id = await submit(realSpec('sf-no-retry', 'exit 3'), { on: ['FAILED'], exit_codes: [75], limit: 1 });
    const attempts = await settled(id);
    expect(attempts.map((a) => [a.attempt, a.state, a.exit_code])).toEqual([[1, 'failed', 3]]);
  });
});

describe("a partition's limits", () => {
  it('are read from the controller: MaxTime=INFINITE and no MaxMemPerNode bound nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'schedflow-partition-'));
    const client = await SchedClient.connect(slurmrestdProfile(dir).profile, {
      logger: createLogger({ level: 'silent' }),
    });
    try {
      for (const partition of ['debug', 'lab-owner']) {
        expect((await client.getPartitionLimits(partition)).data).toEqual({
          maxTimeMin: null,
          maxMemoryPerNodeMb: null,
        });
      }
      await expect(client.getPartitionLimits('no-such-partition')).rejects.toThrow();
    } finally {
      await client.close();
    }
  });
});
