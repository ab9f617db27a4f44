import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect } from 'vitest';
import { openDatabase } from '../../../src/db/database.js';
import type { History } from '../../../src/db/history.js';
import { getRequest, transitionsOf } from '../../../src/db/requests.js';
import type { JobRequestRow, JobTransitionRow } from '../../../src/db/schema.js';
import { cleanEnv, type DaemonProcess, killLeftovers, runCli, spawnDaemon } from '../../helpers/cli-process.js';
import { type FlakyProxy, startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { writeProfile } from '../../helpers/profile-file.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';

/**
 * What the files of this folder share: the daemon as separate processes (`schedflow start`),
 * driven by the CLI (`schedflow jobs …`), against a real Redis and an in-process simulator.
 * The tests were one file; they are several so that they run side by side.
 */

export const LOCK_DURATION_MS = 3000;
export const SHUTDOWN_GRACE_MS = 3000;

export interface Setup {
  root: string;
  dataDir: string;
  configDir: string;
  redisUrl: string;
  sim: TestSim;
  /** Starts `schedflow start` on this data dir, config and Redis, and waits for its banner. */
  startDaemon(): Promise<DaemonProcess>;
  /** `schedflow <args>` with REDIS_URL set as for the daemon. */
  cli(args: string[], timeoutMs?: number): ReturnType<typeof runCli>;
  jobFile(name: string, script: string): string;
}

/**
 * The file's hooks: after each test, whatever it left running is stopped (daemons and CLI
 * processes first, then their upstreams) and its folder removed. What a test started is
 * kept on the returned object, which a test may also set (a Redis it started itself) or
 * clear (a Redis it stopped itself).
 */
export function daemonProcessEnv() {
  const env = {
    redis: undefined as TestRedis | undefined,
    sim: undefined as TestSim | undefined,
    proxy: undefined as FlakyProxy | undefined,
    root: undefined as string | undefined,
    /** A fresh temp folder for the test, removed after it. */
    newRoot(): string {
      env.root = mkdtempSync(join(tmpdir(), 'schedflow-dproc-'));
      return env.root;
    },
    /** A fresh Redis (so the daemon's fixed queue prefix is its own), a simulator, and a profile pointing at it. */
    async setUp(options: { viaProxy?: boolean; cpus?: number } = {}): Promise<Setup> {
      const root = env.newRoot();
      const dataDir = join(root, 'data');
      const configDir = join(root, 'config');
      const jobsDir = join(root, 'jobs');
      mkdirSync(jobsDir);
      env.redis = await startTestRedis();
      const s = await startSim(options.cpus === undefined ? {} : { cpus: options.cpus });
      env.sim = s;
      if (options.viaProxy) env.proxy = await startFlakyProxy(s.url);
      writeProfile(configDir, env.proxy?.url ?? s.url);
      const redisUrl = env.redis.url;
      // Short claims and grace, so crash recovery and shutdown are tested in seconds.
      const processEnv = cleanEnv({
        REDIS_URL: redisUrl,
        SCHEDFLOW_LOCK_DURATION_MS: String(LOCK_DURATION_MS),
        SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS),
      });
      return {
        root,
        dataDir,
        configDir,
        redisUrl,
        sim: s,
        async startDaemon() {
          const daemon = spawnDaemon({ dataDir, configDir, env: processEnv, cwd: root });
          await daemon.ready();
          return daemon;
        },
        cli: (args, timeoutMs) => runCli(args, { env: processEnv, cwd: root, timeoutMs }),
        jobFile(name, script) {
          const file = join(jobsDir, `${name}.yaml`);
          writeFileSync(file, JSON.stringify({ name, script, current_working_directory: s.workDir }));
          return file;
        },
      };
    },
  };
  afterEach(async () => {
    await killLeftovers();
    // A daemon killed leaves its private redis-server running, for its restart: not past the test.
    const redisPid = env.root ? privateRedisPid(env.root) : undefined;
    if (redisPid !== undefined) {
      try {
        process.kill(redisPid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    env.proxy?.release();
    await env.proxy?.close();
    await env.sim?.stop();
    await env.redis?.stop();
    if (env.root) rmSync(env.root, { recursive: true, force: true });
    env.proxy = undefined;
    env.sim = undefined;
    env.redis = undefined;
    env.root = undefined;
  });
  return env;
}

/** The pid of the private redis-server of the daemon whose data dir is `<root>/data`, if it wrote one. */
function privateRedisPid(root: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(root, 'data', 'redis', 'redis.pid'), 'utf8'));
    // Only while that pid is still this data dir's redis-server: a pid file outlives its process.
    const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return pid > 0 && command.startsWith('redis-server') && command.includes(root) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Reads the daemon's history the way `schedflow jobs` does: read-only, opened for this one read. */
export async function readHistory<T>(dataDir: string, read: (h: History) => Promise<T>): Promise<T> {
  const history = openDatabase(join(dataDir, 'history.sqlite'), { readonly: true });
  try {
    return await read(history.store);
  } finally {
    history.close();
  }
}

export function requestOf(
  dataDir: string,
  id: string,
): Promise<{ row: JobRequestRow | undefined; transitions: JobTransitionRow[] }> {
  return readHistory(dataDir, async (h) => ({ row: await getRequest(h, id), transitions: await transitionsOf(h, id) }));
}

export const statesOf = (transitions: JobTransitionRow[]) => transitions.map((t) => t.toState);

export async function waitForState(
  dataDir: string,
  id: string,
  state: string,
  timeoutMs = 20_000,
): Promise<JobRequestRow> {
  try {
    return await waitFor(
      async () => {
        const { row } = await requestOf(dataDir, id);
        return row?.state === state ? row : undefined;
      },
      { what: `request ${id} to reach ${state}`, timeoutMs, intervalMs: 200 },
    );
  } catch (error) {
    const { row, transitions } = await requestOf(dataDir, id);
    const seen = transitions.map((t) => `${new Date(t.at).toISOString()} ${t.toState} (${t.source})`).join(', ');
    throw new Error(`${(error as Error).message}; it is ${row?.state ?? 'not recorded'}: ${seen}`);
  }
}

const QUEUED = /^queued request ([0-9a-f-]{36}) \(profile test\)\n$/;

export function queuedId(stdout: string): string {
  const match = QUEUED.exec(stdout);
  expect(match, stdout).not.toBeNull();
  return String(match?.[1]);
}

/**
 * GET as Alice, repeated until the answer was produced after this call began: the
 * proxy (the simulator) caches GET answers, and an answer cached before a
 * submission would hide the job.
 */
async function freshGet(url: string) {
  const after = Math.floor(Date.now() / 1000) * 1000 + 1000;
  return waitFor(
    async () => {
      const res = await http(url, { headers: bearer(ALICE_TOKEN) });
      expect(res.status).toBe(200);
      const produced = Date.parse(res.headers.get('date') ?? '') - Number(res.headers.get('age') ?? 0) * 1000;
      return produced >= after ? res : undefined;
    },
    { what: `a fresh answer from ${url}`, timeoutMs: 10_000, intervalMs: 250 },
  );
}

/** The jobs carrying a request's marker, as the simulator's controller and accounting list them now. */
export async function jobsWithMarker(s: TestSim, requestId: string) {
  const marker = `schedflow:${requestId}`;
  const hasMarker = (comment: string) => comment === marker || comment.startsWith(`${marker} `);
  const since = Math.floor(Date.now() / 1000) - 3600;
  const [controller, accounting] = await Promise.all([
    freshGet(`${s.url}/sched/v0.0.44/jobs`),
    freshGet(`${s.url}/scheddb/v0.0.44/jobs?start_time=${since}`),
  ]);
  const c = (controller.json as { jobs: { job_id: number; comment: string }[] }).jobs;
  const a = (accounting.json as { jobs: { job_id: number; comment: { job: string } }[] }).jobs;
  return {
    controller: c.filter((j) => hasMarker(j.comment)).map((j) => j.job_id),
    accounting: a.filter((j) => hasMarker(j.comment.job)).map((j) => j.job_id),
  };
}

/** Pino's JSON lines on the daemon's stdout. */
export function logLines(stdout: string): { msg?: string; level?: number; [k: string]: unknown }[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg?: string });
}
