import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect } from 'vitest';
import { openDatabase } from '../../../src/db/database.js';
import type { History } from '../../../src/db/history.js';
import { createRequest } from '../../../src/db/requests.js';
import { createLogger } from '../../../src/logger.js';
import { type PollReport, type PollSettings, pollProfile } from '../../../src/requests/poller.js';
import { transition } from '../../../src/requests/transition.js';
import type { SchedClient } from '../../../src/sched/client.js';
import type { SimJob } from '../../../src/sim/sim-job.js';
import { type FlakyProxy, type RecordedRequest, startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { connectAsAlice, savedSimJob, startSim, type TestSim } from '../../helpers/sim.js';

/**
 * What poll-mass-end.test.ts and poll-mass-start.test.ts share (one file before; the mass start
 * bounds how long the event loop is held, so it runs alone: vitest.config.ts). Issue 14, the mass-end cliff: past 500 tracked or ending jobs the poller asked `jobs/state`
 * for every job of the controller, and accounting for every record of the account. Whatever
 * the number, every request now names its jobs, in chunks that fit a URL, and ends beyond one
 * chunk are asked over several cycles within the request budget, none left behind.
 */

const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Setup {
  store: History;
  /** The request id of each seeded job, by job id. */
  requestOf: Map<number, string>;
}

export function seeded(count: number, firstJobId: number, overrides: Partial<SimJob> = {}): SimJob[] {
  return Array.from({ length: count }, (_, i) =>
    savedSimJob(firstJobId + i, { comment: `schedflow:req-${firstJobId + i}`, ...overrides }),
  );
}

export interface Cycle {
  report: PollReport;
  requests: RecordedRequest[];
}

/**
 * The file's hooks and what its tests start: a simulator, a recording proxy in front of it
 * and a client, closed after each test.
 */
export function massPollEnv() {
  const env = {
    sim: undefined as TestSim | undefined,
    proxy: undefined as FlakyProxy | undefined,
    client: undefined as SchedClient | undefined,
    cleanup: undefined as (() => void) | undefined,
    setUp,
    pollUntil,
  };
  afterEach(async () => {
    await env.client?.close();
    await env.proxy?.close();
    await env.sim?.stop();
    env.cleanup?.();
    env.client = env.proxy = env.sim = env.cleanup = undefined;
  });

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
    env.sim = await startSim({ cpus: jobs.length + 10, simulatedRuntimeSec: 3, ...simSettings }, false, jobs);
    env.proxy = await startFlakyProxy(env.sim.url);
    env.client = await connectAsAlice(env.proxy.url, logger, { rateLimit: { capacity: 2, refillPerSecond: 100 } });
    const dir = mkdtempSync(join(tmpdir(), 'schedflow-poll-'));
    const history = openDatabase(join(dir, 'history.sqlite'));
    env.cleanup = () => {
      history.close();
      rmSync(dir, { recursive: true, force: true });
    };
    const requestOf = new Map<number, string>();
    const now = Date.now();
    for (const job of jobs) {
      const id = job.comment.replace('schedflow:', '');
      const at = now - createdAgoMs(job.jobId);
      await createRequest(history.store, {
        id,
        profile: 'test',
        name: job.name,
        spec: {},
        owner: 'default',
        actor: 'test',
        origin: 'api',
        at,
        source: 'api',
      });
      await transition(history.store, id, {
        to: 'submitted',
        source: 'submit',
        at,
        patch: { jobId: job.jobId, submittedAt: at },
      });
      requestOf.set(job.jobId, id);
    }
    return { store: history.store, requestOf } satisfies Setup;
  }

  /** Poll cycles at the cache lifetime (2 s) until `done`, at most `max` of them. */
  async function pollUntil(
    store: History,
    done: () => Promise<boolean>,
    max: number,
    settings: Partial<PollSettings> = {},
  ): Promise<Cycle[]> {
    const cycles: Cycle[] = [];
    for (let i = 0; i < max && !(await done()); i++) {
      // Real time: the simulated jobs end in real time, and the poller paces its accounting
      // questions by the proxy's cache lifetime against its own clock.
      if (i > 0) await sleep(2100);
      const before = env.proxy?.requests.length ?? 0;
      const report = await pollProfile(
        { store, client: env.client as SchedClient, logger, settings: { lostGraceMs: 600_000, ...settings } },
        'test',
      );
      cycles.push({ report, requests: env.proxy?.requests.slice(before) ?? [] });
    }
    return cycles;
  }

  return env;
}

export const pathOf = (req: RecordedRequest) => new URL(req.url, 'http://x').pathname;
export const params = (req: RecordedRequest, name: string) => new URL(req.url, 'http://x').searchParams.getAll(name);

/** Every request a cycle made names its jobs, within a URL that fits 8 KB; none lists every job. */
export function expectEveryRequestNamesItsJobs(cycles: Cycle[]): void {
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

export const accountingRequests = (cycle: Cycle) => cycle.requests.filter((r) => pathOf(r) === '/scheddb/v0.0.44/jobs');
