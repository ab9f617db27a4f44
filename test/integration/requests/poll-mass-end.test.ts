import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/db/database.js';
import { createRequest, getRequest, transitionsOf } from '../../../src/db/requests.js';
import { createLogger } from '../../../src/logger.js';
import { type PollReport, pollProfile } from '../../../src/requests/poller.js';
import { transition } from '../../../src/requests/transition.js';
import { SchedClient } from '../../../src/sched/client.js';
import { parseProfile } from '../../../src/sched/profile.js';
import type { SimJob } from '../../../src/sim/sim-job.js';
import { type FlakyProxy, type RecordedRequest, startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { ALICE_TOKEN, savedSimJob, startSim, type TestSim } from '../../helpers/sim.js';

/**
 * Issue 14, the mass-end cliff: past 500 tracked or ending jobs the poller asked `jobs/state`
 * for every job of the controller, and accounting for every record of the account. Whatever
 * the number, every request now names its jobs, in chunks that fit a URL, and ends beyond one
 * chunk are asked over several cycles within the request budget, none left behind.
 */

const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let sim: TestSim | undefined;
let proxy: FlakyProxy | undefined;
let client: SchedClient | undefined;
let cleanup: (() => void) | undefined;

afterEach(async () => {
  await client?.close();
  await proxy?.close();
  await sim?.stop();
  cleanup?.();
  client = proxy = sim = cleanup = undefined;
});

interface Setup {
  db: ReturnType<typeof openDatabase>['db'];
  /** The request id of each seeded job, by job id. */
  requestOf: Map<number, string>;
}

/**
 * A simulator with `jobs` in its job table, a recording proxy in front of it, a client whose
 * budget allows one accounting chunk a cycle (capacity 2), and one submitted request per job,
 * its marker in the job's comment, created `createdAgoMs` before now (older first).
 */
async function setUp(
  jobs: SimJob[],
  simSettings: Parameters<typeof startSim>[0],
  createdAgoMs: (jobId: number) => number,
) {
  sim = await startSim({ cpus: jobs.length + 10, simulatedRuntimeSec: 3, ...simSettings }, false, jobs);
  proxy = await startFlakyProxy(sim.url);
  const profile = parseProfile('test', {
    url: proxy.url,
    auth: { type: 'bearer', tokenEnv: 'TEST_TOKEN' },
    account: 'lab',
    version: 'v0.0.44',
    rateLimit: { capacity: 2, refillPerSecond: 100 },
  });
  client = await SchedClient.connect(profile, { logger, env: { TEST_TOKEN: ALICE_TOKEN } });
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-poll-'));
  const history = openDatabase(join(dir, 'history.sqlite'));
  cleanup = () => {
    history.close();
    rmSync(dir, { recursive: true, force: true });
  };
  const requestOf = new Map<number, string>();
  const now = Date.now();
  for (const job of jobs) {
    const id = job.comment.replace('schedflow:', '');
    const at = now - createdAgoMs(job.jobId);
    createRequest(history.db, { id, profile: 'test', name: job.name, spec: {}, origin: 'api', at, source: 'api' });
    transition(history.db, id, { to: 'submitted', source: 'submit', at, patch: { jobId: job.jobId, submittedAt: at } });
    requestOf.set(job.jobId, id);
  }
  return { db: history.db, requestOf } satisfies Setup;
}

function seeded(count: number, firstJobId: number, overrides: Partial<SimJob> = {}): SimJob[] {
  return Array.from({ length: count }, (_, i) =>
    savedSimJob(firstJobId + i, { comment: `schedflow:req-${firstJobId + i}`, ...overrides }),
  );
}

interface Cycle {
  report: PollReport;
  requests: RecordedRequest[];
}

/** Poll cycles at the cache lifetime (2 s) until `done`, at most `max` of them. */
async function pollUntil(db: Setup['db'], done: () => boolean, max: number): Promise<Cycle[]> {
  const cycles: Cycle[] = [];
  for (let i = 0; i < max && !done(); i++) {
    if (i > 0) await sleep(2100);
    const before = proxy?.requests.length ?? 0;
    const report = await pollProfile(
      { db, client: client as SchedClient, logger, settings: { lostGraceMs: 600_000 } },
      'test',
    );
    cycles.push({ report, requests: proxy?.requests.slice(before) ?? [] });
  }
  return cycles;
}

const pathOf = (req: RecordedRequest) => new URL(req.url, 'http://x').pathname;
const params = (req: RecordedRequest, name: string) => new URL(req.url, 'http://x').searchParams.getAll(name);

/** Every request a cycle made names its jobs, within a URL that fits 8 KB; none lists every job. */
function expectEveryRequestNamesItsJobs(cycles: Cycle[]): void {
  const requests = cycles.flatMap((c) => c.requests);
  for (const req of requests) {
    expect(req.method).toBe('GET');
    expect(req.url.length).toBeLessThan(8192);
    const path = pathOf(req);
    if (path === '/sched/v0.0.44/jobs/state') {
      expect(params(req, 'job_id').length, req.url.slice(0, 100)).toBeGreaterThan(0);
      expect(params(req, 'job_id').length).toBeLessThanOrEqual(500);
    } else if (path === '/scheddb/v0.0.44/jobs') {
      expect(params(req, 'step').length, req.url.slice(0, 100)).toBeGreaterThan(0);
      expect(params(req, 'step').length).toBeLessThanOrEqual(500);
    } else {
      // The controller's full listing (every job of the cluster) is not needed here.
      expect.unreachable(`unexpected request ${req.method} ${req.url.slice(0, 100)}`);
    }
  }
}

const accountingRequests = (cycle: Cycle) => cycle.requests.filter((r) => pathOf(r) === '/scheddb/v0.0.44/jobs');

describe('a mass end', () => {
  it('1,200 jobs ending together are all recorded completed, with accounting’s exit code and times, over several cycles', async () => {
    const jobs = seeded(1200, 1000);
    const { db, requestOf } = await setUp(jobs, { minJobAgeSec: 3600 }, () => 10_000);
    const allEnded = () => [...requestOf.values()].every((id) => getRequest(db, id)?.state === 'completed');
    const cycles = await pollUntil(db, allEnded, 14);

    expect(allEnded()).toBe(true);
    for (const id of requestOf.values()) {
      const row = getRequest(db, id);
      expect(row).toMatchObject({ state: 'completed', exitCode: 0 });
      expect(row?.endedAt).toEqual(expect.any(Number));
      expect(row?.startedAt).toEqual(expect.any(Number));
      expect(transitionsOf(db, id).at(-1)?.source).toBe('accounting');
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
    const { db, requestOf } = await setUp([...stuck, ...ending], { minJobAgeSec: 60 }, (jobId) =>
      stuckIds.has(jobId) ? 900_000 : 10_000,
    );
    (proxy as FlakyProxy).rewrite = (req, body) => {
      if (pathOf(req) !== '/scheddb/v0.0.44/jobs') return body;
      const answer = JSON.parse(body) as { jobs: { job_id: number }[] };
      return JSON.stringify({ ...answer, jobs: answer.jobs.filter((job) => !stuckIds.has(job.job_id)) });
    };
    const endingDone = () =>
      ending.every((job) => getRequest(db, requestOf.get(job.jobId) as string)?.state === 'completed');
    const cycles = await pollUntil(db, endingDone, 12);

    expect(endingDone()).toBe(true);
    for (const job of stuck) {
      const row = getRequest(db, requestOf.get(job.jobId) as string);
      expect(row?.state).toBe('submitted');
      expect(row?.missingSince).toEqual(expect.any(Number));
    }
    expectEveryRequestNamesItsJobs(cycles);
    expect(Math.max(...cycles.map((c) => accountingRequests(c).length))).toBe(1);
  }, 60_000);
});

describe('a mass start', () => {
  it('2,000 jobs starting together are written in batches: the event loop is never held for long', async () => {
    const jobs = seeded(2000, 1000, { state: 'PENDING' });
    const { db, requestOf } = await setUp(jobs, { minJobAgeSec: 3600, simulatedRuntimeSec: 600 }, () => 10_000);
    // The longest the event loop went without running a 5 ms timer.
    let longestGapMs = 0;
    let last = performance.now();
    const ticker = setInterval(() => {
      const now = performance.now();
      longestGapMs = Math.max(longestGapMs, now - last);
      last = now;
    }, 5);
    const cycles = await pollUntil(db, () => getRequest(db, requestOf.get(1000) as string)?.state === 'running', 3);
    // A turn of the loop after the cycle, so a block at its very end is measured too.
    await sleep(50);
    clearInterval(ticker);

    for (const id of requestOf.values()) expect(getRequest(db, id)?.state).toBe('running');
    expectEveryRequestNamesItsJobs(cycles);
    // One transaction for the 2,000 rows held it for 0.7 to 1 s; a batch of 100 takes ~40 ms
    // (the simulator, in this process too, adds its own turns).
    expect(longestGapMs).toBeLessThan(400);
  }, 60_000);
});
