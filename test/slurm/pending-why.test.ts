import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killLeftovers } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

/**
 * Why a job waits, on the real cluster (issue 34): its one node (2 CPUs) filled by a short job,
 * a second job waits; the daemon's API shows Slurm's `Resources`, in plain words, and the
 * scheduler's expected start (the filler's start + its time limit, slurmctld's forecast); once the
 * filler is cancelled the second runs and nothing says it waits any more.
 */

let redis: TestRedis;
let d: RealDaemon;

beforeAll(async () => {
  redis = await startTestRedis();
  // Pending records read every 2 s, not 30: the test need not wait.
  d = await startRealDaemon(redis, { env: { SCHEDFLOW_PENDING_DETAILS_EVERY_MS: '2000' } });
});

afterAll(async () => {
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

interface Pending {
  reason: string | null;
  meaning: string | null;
  action: string | null;
  expected_start: string | null;
}

describe('a job waiting on real Slurm', () => {
  it('shows Resources and the expected start while it waits, and nothing once it runs', async () => {
    const ids: string[] = [];
    try {
      const filler = await d.submit(realSpec('pending-why-fill', 'sleep 110', { cpus_per_task: 2, time_limit: 2 }));
      ids.push(filler);
      // Other tests may hold a CPU for a while: the filler starts once both are free.
      await d.waitForState(filler, 'running', 90_000);
      // Its start comes with its full record, a cycle after the light listing showed it running.
      const fill = await waitFor(
        async () => {
          const job = await d.job(filler);
          return job.started_at ? job : undefined;
        },
        { what: "the filler's start", timeoutMs: 30_000 },
      );
      const waiter = await d.submit(realSpec('pending-why-wait', 'sleep 1', { time_limit: 1 }));
      ids.push(waiter);
      const pending = await waitFor(
        async () => {
          const job = (await d.api('GET', `/api/v1/jobs/${waiter}`)).json as { state: string; pending: Pending | null };
          return job.state === 'pending' && job.pending?.reason === 'Resources' && job.pending.expected_start
            ? job.pending
            : undefined;
        },
        { what: 'Resources and an expected start', timeoutMs: 60_000 },
      );
      expect(pending.meaning).toContain('free CPUs');
      expect(pending.action).toMatch(/\w/);
      // slurmctld's forecast: when the filler's 2-minute limit runs out (it holds both CPUs).
      const fillerStart = Date.parse(fill.started_at ?? '');
      const expected = Date.parse(pending.expected_start ?? '');
      expect(expected).toBeGreaterThanOrEqual(fillerStart + 120_000 - 2000);
      expect(expected).toBeLessThanOrEqual(fillerStart + 120_000 + 60_000);

      // The filler cancelled, the waiter runs: nothing says it waits any more.
      expect((await d.api('DELETE', `/api/v1/jobs/${filler}`)).status).toBeLessThan(300);
      const done = await d.waitForState(waiter, 'completed', 60_000);
      expect(done.pending).toBeNull();
    } finally {
      for (const id of ids) await d.api('DELETE', `/api/v1/jobs/${id}`).catch(() => {});
    }
  }, 240_000);
});
