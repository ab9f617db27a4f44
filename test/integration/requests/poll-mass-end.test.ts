import { describe, expect, it } from 'vitest';
import { getRequest, transitionsOf } from '../../../src/db/requests.js';
import type { FlakyProxy } from '../../helpers/flaky-proxy.js';
import { accountingRequests, expectEveryRequestNamesItsJobs, massPollEnv, pathOf, seeded } from './poll-mass-env.js';

/**
 * Issue 14, the mass-end cliff: ends beyond one chunk are asked over several cycles within the
 * request budget, none left behind, every request naming its jobs (poll-mass-env.ts).
 */

const env = massPollEnv();

describe('a mass end', () => {
  it('1,200 jobs ending together are all recorded completed, with accounting’s exit code and times, over several cycles', async () => {
    const jobs = seeded(1200, 1000);
    const { store, requestOf } = await env.setUp(jobs, { minJobAgeSec: 3600 }, () => 10_000);
    const allEnded = async () => {
      for (const id of requestOf.values()) if ((await getRequest(store, id))?.state !== 'completed') return false;
      return true;
    };
    const cycles = await env.pollUntil(store, allEnded, 14);

    expect(await allEnded()).toBe(true);
    for (const id of requestOf.values()) {
      const row = await getRequest(store, id);
      expect(row).toMatchObject({ state: 'completed', exitCode: 0 });
      expect(row?.endedAt).toEqual(expect.any(Number));
      expect(row?.startedAt).toEqual(expect.any(Number));
      expect((await transitionsOf(store, id)).at(-1)?.source).toBe('accounting');
    }
    expectEveryRequestNamesItsJobs(cycles);
    // 1,200 ids of 4 digits: three state requests a cycle while all are tracked.
    expect(cycles[0]?.requests.filter((r) => pathOf(r) === '/sched/v0.0.44/jobs/state')).toHaveLength(3);
    // The budget (capacity 2) allows one accounting chunk a cycle: the ends take three cycles.
    expect(Math.max(...cycles.map((c) => accountingRequests(c).length))).toBe(1);
    expect(cycles.flatMap(accountingRequests).length).toBeGreaterThanOrEqual(3);
    expect(cycles.map((c) => c.report.accounting)).not.toContain('unavailable');
  }, 60_000);

  it('jobs accounting never describes do not hold back the others: chunks take turns', async () => {
    const nowSec = Math.floor(Date.now() / 1000);
    // 600 jobs that left the controller long ago and of which accounting has no record (the
    // proxy drops them), their requests the oldest: asked first, they would be asked forever.
    const stuck = seeded(600, 1000, {
      state: 'COMPLETED',
      submitTime: nowSec - 800,
      eligibleTime: nowSec - 800,
      startTime: nowSec - 700,
      endTime: nowSec - 600,
      exitCode: 0,
      nodes: 'sim-node1',
    });
    const ending = seeded(500, 2000);
    const stuckIds = new Set(stuck.map((job) => job.jobId));
    const { store, requestOf } = await env.setUp([...stuck, ...ending], { minJobAgeSec: 60 }, (jobId) =>
      stuckIds.has(jobId) ? 900_000 : 10_000,
    );
    (env.proxy as FlakyProxy).rewrite = (req, body) => {
      if (pathOf(req) !== '/scheddb/v0.0.44/jobs') return body;
      const answer = JSON.parse(body) as { jobs: { job_id: number }[] };
      return JSON.stringify({ ...answer, jobs: answer.jobs.filter((job) => !stuckIds.has(job.job_id)) });
    };
    const endingDone = async () => {
      for (const job of ending) {
        if ((await getRequest(store, requestOf.get(job.jobId) as string))?.state !== 'completed') return false;
      }
      return true;
    };
    const cycles = await env.pollUntil(store, endingDone, 12);

    expect(await endingDone()).toBe(true);
    for (const job of stuck) {
      const row = await getRequest(store, requestOf.get(job.jobId) as string);
      expect(row?.state).toBe('submitted');
      expect(row?.missingSince).toEqual(expect.any(Number));
    }
    expectEveryRequestNamesItsJobs(cycles);
    expect(Math.max(...cycles.map((c) => accountingRequests(c).length))).toBe(1);
  }, 60_000);
});
