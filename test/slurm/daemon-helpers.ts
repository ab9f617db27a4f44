import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/database.js';
import type { History } from '../../src/db/history.js';
import { openHistory } from '../../src/db/open-history.js';
import { getRequest, transitionsOf } from '../../src/db/requests.js';
import type { JobRequestRow } from '../../src/db/schema.js';
import { Secret } from '../../src/lib/secret.js';
import { createLogger } from '../../src/logger.js';
import { cleanEnv, type DaemonProcess, runCli, spawnDaemon } from '../helpers/cli-process.js';
import { newTestDatabase } from '../helpers/histories.js';
import { bearer, type HttpResult, http, waitFor } from '../helpers/http.js';
import type { TestRedis } from '../helpers/redis.js';
import { TEST_HISTORY } from '../helpers/test-history.js';
import { jobWorkDir, slurmrestdProfile } from './cluster.js';

/** `schedflow start` as a process, on a slurmrestd profile of the real cluster, driven through its local API. */
export interface RealDaemon {
  root: string;
  dataDir: string;
  configDir: string;
  process: DaemonProcess;
  apiUrl: string;
  token: string;
  api(method: string, path: string, body?: unknown): Promise<HttpResult>;
  /** POST /api/v1/jobs (to profile `real` unless named); returns the request id. */
  submit(spec: Record<string, unknown>, profile?: string): Promise<string>;
  job(id: string): Promise<JobView>;
  /** Waits for the request to reach `state`; fails at once when it ends in another final state. */
  waitForState(id: string, state: string, timeoutMs?: number): Promise<JobView>;
  /** Starts the daemon again on the same data dir and Redis (after `process` exited). */
  restart(): Promise<void>;
  stop(): Promise<void>;
  read<T>(f: (h: History) => Promise<T>): Promise<T>;
}

export interface JobView {
  id: string;
  state: string;
  job_id: number | null;
  exit_code: number | null;
  raw_state: string | null;
  reason: string | null;
  started_at: string | null;
  ended_at: string | null;
  submitted_at: string | null;
  adopted: boolean;
  error: { code: string | null; message: string } | null;
  transitions: { from: string | null; to: string; source: string; reason: string | null; detail: string | null }[];
  [key: string]: unknown;
}

const FINAL = new Set([
  'completed',
  'failed',
  'timeout',
  'cancelled',
  'node_fail',
  'out_of_memory',
  'preempted',
  'boot_fail',
  'deadline',
  'submit_failed',
]);

/** Fast settings: a poll a second, reconcile every few seconds, short claims for crash recovery. */
export const FAST_ENV = {
  SCHEDFLOW_POLL_FLOOR_MS: '1000',
  SCHEDFLOW_POLL_CEILING_MS: '2000',
  SCHEDFLOW_RECONCILE_EVERY_MS: '5000',
  SCHEDFLOW_LOCK_DURATION_MS: '3000',
  SCHEDFLOW_SHUTDOWN_GRACE_MS: '3000',
  SCHEDFLOW_PIPELINE_TICK_MS: '500',
  SCHEDFLOW_SUBMIT_LIMIT_RECHECK_MS: '2000',
  SCHEDFLOW_SUMMARIES: 'off',
  // Tests read their jobs every half second, several at once.
  SCHEDFLOW_API_RATE_LIMIT: '100000',
};

export async function startRealDaemon(
  redis: TestRedis,
  options: {
    url?: string;
    jwt?: string;
    env?: Record<string, string>;
    pipelines?: Record<string, string>;
    profileExtra?: object;
    /** More profiles on the same cluster, by name, each pinned to a data parser version (or latest). */
    versions?: Record<string, string>;
    /** More profiles on the same cluster, by name: members that replace `real`'s. */
    profiles?: Record<string, (real: Record<string, unknown>) => object>;
  } = {},
): Promise<RealDaemon> {
  const root = mkdtempSync(join(tmpdir(), 'schedflow-real-'));
  const dataDir = join(root, 'data');
  const configDir = join(root, 'config');
  const { input } = slurmrestdProfile(join(root, 'secrets'), {
    url: options.url,
    jwt: options.jwt,
    extra: options.profileExtra,
  });
  mkdirSync(join(configDir, 'profiles'), { recursive: true });
  writeFileSync(join(configDir, 'profiles', 'real.yaml'), JSON.stringify(input));
  for (const [name, version] of Object.entries(options.versions ?? {})) {
    writeFileSync(join(configDir, 'profiles', `${name}.yaml`), JSON.stringify({ ...input, version }));
  }
  for (const [name, extra] of Object.entries(options.profiles ?? {})) {
    writeFileSync(join(configDir, 'profiles', `${name}.yaml`), JSON.stringify({ ...input, ...extra(input) }));
  }
  mkdirSync(join(configDir, 'pipelines'), { recursive: true });
  for (const [name, text] of Object.entries(options.pipelines ?? {})) {
    writeFileSync(join(configDir, 'pipelines', name), text);
  }
  // Under SCHEDFLOW_TEST_HISTORY=postgres, the history is a new database on the run's server.
  const databaseUrl = TEST_HISTORY === 'postgres' ? await newTestDatabase('slurm') : undefined;
  const env = cleanEnv({
    REDIS_URL: redis.url,
    ...(databaseUrl && { DATABASE_URL: databaseUrl, SCHEDFLOW_WEBHOOK_SECRET: 'slurm-tier-webhook-secret' }),
    ...FAST_ENV,
    ...options.env,
  });
  const made = await runCli(['tokens', 'create', '--name', 'slurm-tier', '--scopes', 'admin', '--data-dir', dataDir], {
    env,
    cwd: root,
  });
  if (made.code !== 0) throw new Error(`tokens create failed: ${made.stderr}`);
  const token = made.stdout.trim();

  const start = async () => {
    const child = spawnDaemon({ dataDir, configDir, env, cwd: root, logLevel: process.env.LOG_LEVEL ?? 'info' });
    await child.ready(60_000);
    const match = /local API: (http:\/\/[^/\s]+)/.exec(child.stdout);
    if (!match?.[1]) throw new Error(`no local API address in the banner:\n${child.stdout}`);
    return { child, apiUrl: match[1] };
  };
  const first = await start();
  const handle: RealDaemon = {
    root,
    dataDir,
    configDir,
    process: first.child,
    apiUrl: first.apiUrl,
    token,
    api: (method, path, body) => http(`${handle.apiUrl}${path}`, { method, body, headers: bearer(token) }),
    async submit(spec, profile = 'real') {
      const res = await handle.api('POST', '/api/v1/jobs', { profile, spec });
      if (res.status !== 201 && res.status !== 202) {
        throw new Error(`POST /api/v1/jobs answered ${res.status}: ${JSON.stringify(res.json)}`);
      }
      return (res.json as { id: string }).id;
    },
    async job(id) {
      const res = await handle.api('GET', `/api/v1/jobs/${id}`);
      if (res.status !== 200) throw new Error(`GET /api/v1/jobs/${id} answered ${res.status}`);
      return res.json as JobView;
    },
    async waitForState(id, state, timeoutMs = 120_000) {
      let last: JobView | undefined;
      try {
        return await waitFor(
          async () => {
            last = await handle.job(id);
            if (last.state === state) return last;
            if (FINAL.has(last.state)) {
              throw new Error(`request ${id} ended ${last.state}, not ${state}: ${JSON.stringify(last)}`);
            }
            return undefined;
          },
          { what: `request ${id} to reach ${state}`, timeoutMs, intervalMs: 500 },
        );
      } catch (error) {
        const seen = last?.transitions.map((t) => `${t.to} (${t.source}${t.reason ? `, ${t.reason}` : ''})`);
        throw new Error(`${(error as Error).message}; it is ${last?.state}: ${seen?.join(' → ')}`);
      }
    },
    async restart() {
      const next = await start();
      handle.process = next.child;
      handle.apiUrl = next.apiUrl;
    },
    async stop() {
      await handle.process.stop('SIGTERM');
      // The daemon's JSON log, kept for a look after a failure.
      writeFileSync(join(root, 'daemon.log'), `${handle.process.stdout}\n${handle.process.stderr}`);
    },
    async read(f) {
      const history = databaseUrl
        ? await openHistory({ dataDir, databaseUrl: new Secret(databaseUrl) }, createLogger({ level: 'silent' }))
        : openDatabase(join(dataDir, 'history.sqlite'), { readonly: true });
      try {
        return await f(history.store);
      } finally {
        await history.close();
      }
    },
  };
  return handle;
}

export function requestRow(d: RealDaemon, id: string): Promise<{ row: JobRequestRow | undefined; states: string[] }> {
  return d.read(async (h) => ({
    row: await getRequest(h, id),
    states: (await transitionsOf(h, id)).map((t) => t.toState),
  }));
}

/** A job spec for the real cluster: runs in the run's job folder, which the test users can write. */
export function realSpec(name: string, body: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { name, script: `#!/bin/bash\n${body}\n`, current_working_directory: jobWorkDir(), time_limit: 5, ...extra };
}
