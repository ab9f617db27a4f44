import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Clock } from '../../src/lib/clock.js';
import { createLogger, type Logger } from '../../src/logger.js';
import { SchedClient } from '../../src/sched/client.js';
import { parseProfile } from '../../src/sched/profile.js';
import { resolveJobUser } from '../../src/sim/job-user.js';
import { parseSimConfig, type SimConfigInput, type TokenEntry } from '../../src/sim/sim-config.js';
import type { SimJob } from '../../src/sim/sim-job.js';
import { SimServer } from '../../src/sim/sim-server.js';
import { bearer } from './http.js';

export const ALICE_TOKEN = 'alice-token-0123456789abcdef';
export const READONLY_TOKEN = 'readonly-token-0123456789abcdef';
export const DBONLY_TOKEN = 'dbonly-token-0123456789abcdef';
export const BOB_TOKEN = 'bob-token-0123456789abcdef';

/**
 * A scheduler client of profile `test` at `url` with alice's token (account lab, v0.0.44), for
 * tests that drive the client or the poller by hand; `profile` adds to or replaces its settings.
 */
export function connectAsAlice(
  url: string,
  logger: Logger,
  profile: Record<string, unknown> = {},
): Promise<SchedClient> {
  const parsed = parseProfile('test', {
    url,
    auth: { type: 'bearer', tokenEnv: 'TEST_TOKEN' },
    account: 'lab',
    version: 'v0.0.44',
    ...profile,
  });
  return SchedClient.connect(parsed, { logger, env: { TEST_TOKEN: ALICE_TOKEN } });
}

export const TEST_TOKENS: ReadonlyMap<string, TokenEntry> = new Map([
  [ALICE_TOKEN, { user: 'alice', account: 'lab', scopes: ['sched:read', 'scheddb:read', 'sched:jobs:manage'] }],
  [READONLY_TOKEN, { user: 'carol', account: 'lab', scopes: ['sched:read'] }],
  [DBONLY_TOKEN, { user: 'dave', account: 'lab', scopes: ['scheddb:read'] }],
  [BOB_TOKEN, { user: 'bob', account: 'other', scopes: ['sched:read', 'scheddb:read', 'sched:jobs:manage'] }],
]);

/**
 * Opens `dir` to the users a simulator started as root runs jobs as (see SubmitterUsers: the
 * job user, or a submitter's own account where the host has one, as alice and bob of a real
 * test cluster are), as a submitter's folder is on a cluster: sticky and writable to all, as
 * /tmp is. The folders on the way to it (`passThrough`, e.g. a 0700 mkdtemp root) are opened to
 * passing through, not to listing. Nothing changes when the tests do not run as root. Returns `dir`.
 */
export function giveToJobUser(dir: string, passThrough: string[] = [], jobUserName?: string): string {
  const jobUser = resolveJobUser(jobUserName);
  if (jobUser) {
    for (const folder of passThrough) chmodSync(folder, 0o711);
    chmodSync(dir, 0o1777);
  }
  return dir;
}

export interface TestSim {
  url: string;
  server: SimServer;
  stateDir: string;
  /** A folder its jobs may write in (their user's, when the simulator runs them as another). */
  workDir: string;
  /** The `Authorization` header of the simulator's `/_sim` routes (its admin token). */
  readonly admin: Record<string, string>;
  stop(): Promise<void>;
  /** Stops and starts again on the same state dir and port (a simulator restart). */
  restart(): Promise<void>;
}

/**
 * A job of alice's in account `lab` for a simulator's saved job table (see startSim's `jobs`):
 * pending, so a simulator in benchmark mode (`simulatedRuntimeSec`) starts it at once.
 */
export function savedSimJob(jobId: number, overrides: Partial<SimJob> = {}): SimJob {
  const now = Math.floor(Date.now() / 1000);
  return {
    jobId,
    name: 'seeded',
    user: 'alice',
    userId: 1003,
    account: 'lab',
    partition: 'debug',
    comment: '',
    script: '#!/bin/sh\ntrue\n',
    environment: ['PATH=/usr/bin:/bin'],
    cwd: '/tmp',
    tasks: 1,
    cpusPerTask: 1,
    memoryPerNodeMb: null,
    timeLimitMin: null,
    dependency: '',
    standardOutput: '',
    standardError: '',
    state: 'PENDING',
    reason: 'None',
    submitTime: now,
    eligibleTime: now,
    startTime: 0,
    endTime: 0,
    exitCode: null,
    termSignal: null,
    cpuUserSec: 0,
    cpuSystemSec: 0,
    peakMemoryBytes: null,
    nodes: '',
    lastUpdate: now,
    ...overrides,
  };
}

/**
 * A simulator on a free loopback port with its own state dir and test settings. `jobs` are
 * written to its saved job table before it starts (thousands of jobs without as many submissions).
 * `clock` is the proxy's (its cache and rate limit): a test moves a ManualClock past a lifetime
 * instead of sleeping through it.
 */
export async function startSim(
  overrides: SimConfigInput = {},
  keepDirs = false,
  jobs: SimJob[] = [],
  clock?: Clock,
): Promise<TestSim> {
  const root = mkdtempSync(join(tmpdir(), 'schedflow-sim-'));
  const stateDir = join(root, 'state');
  const workDir = join(root, 'work');
  mkdirSync(workDir, { recursive: true });
  // The state dir beside it stays root's.
  giveToJobUser(workDir, [root], overrides.jobUser);
  if (jobs.length > 0) {
    mkdirSync(stateDir, { recursive: true });
    const nextJobId = Math.max(...jobs.map((job) => job.jobId)) + 1;
    writeFileSync(join(stateDir, 'jobs.json'), JSON.stringify({ version: 1, nextJobId, jobs }), { mode: 0o600 });
  }
  const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
  const base: SimConfigInput = {
    port: 0,
    stateDir,
    // Jobs without a working directory write here, removed with the rest.
    workDir,
    cpus: 2,
    killWaitSec: 1,
    cacheTtlSec: { jobs: 2, job: 2, jobsState: 2, ping: 2, partitions: 2, nodes: 2, dbJobs: 2, dbJob: 2 },
    rateLimit: { capacity: 1000, refillPerSecond: 1000 },
    partitions: [
      { name: 'debug', default: true },
      { name: 'lab-owner', allowAccounts: ['lab'], maxTimeMin: 60 },
    ],
    users: { alice: { uid: 1003, defaultAccount: 'lab' } },
    ...overrides,
  };
  const config = parseSimConfig(base);
  let server = new SimServer({ config, logger, tokens: TEST_TOKENS, clock });
  const url = await server.start();
  const port = Number(new URL(url).port);
  const sim: TestSim = {
    url,
    server,
    stateDir,
    workDir,
    get admin() {
      return bearer(sim.server.adminToken.reveal());
    },
    async stop() {
      await sim.server.stop();
      if (!keepDirs) rmSync(root, { recursive: true, force: true });
    },
    async restart() {
      await sim.server.stop();
      server = new SimServer({ config: { ...config, port }, logger, tokens: TEST_TOKENS, clock });
      sim.server = server;
      await server.start();
    },
  };
  return sim;
}
