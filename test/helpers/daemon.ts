import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { type DaemonConfigInput, loadDaemonConfig } from '../../src/config/daemon-config.js';
import { type OpenedHistory, openHistory } from '../../src/db/open-history.js';
import { getRequest, transitionsOf } from '../../src/db/requests.js';
import type { JobRequestRow } from '../../src/db/schema.js';
import { type Clock, systemClock } from '../../src/lib/clock.js';
import { Secret } from '../../src/lib/secret.js';
import { createLogger } from '../../src/logger.js';
import { type Daemon, startDaemon } from '../../src/main.js';
import type { SimConfigInput } from '../../src/sim/sim-config.js';
import { newTestDatabase } from './histories.js';
import { waitFor } from './http.js';
import { prepareApiCheck } from './openapi-check.js';
import { writeProfile } from './profile-file.js';
import { startTestRedis, type TestRedis } from './redis.js';
import { ALICE_TOKEN, startSim, type TestSim } from './sim.js';
import { TEST_HISTORY } from './test-history.js';

export interface TestDaemon {
  daemon: Daemon;
  dataDir: string;
  configDir: string;
  /** Waits until the request is in `state` (or any terminal state when state is 'terminal'). */
  waitForState(requestId: string, state: string, timeoutMs?: number): Promise<JobRequestRow>;
  states(requestId: string): Promise<string[]>;
  /** Stops the daemon, runs `between` (history and queues closed), and starts it again on the same state. */
  restart(between?: () => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The key a test daemon signs webhooks with: the one it was given (its PostgreSQL history wants
 * one for every host), else the file it made in its data dir.
 */
export function webhookSecretOf(td: TestDaemon): string {
  return td.daemon.config.webhookSecret?.reveal() ?? readFileSync(join(td.dataDir, 'webhook-secret'), 'utf8').trim();
}

/** The stopped daemon's history, opened as the daemon opens it (SQLite file or PostgreSQL), for a test to write in between. */
export function openHistoryOf(td: TestDaemon): Promise<OpenedHistory> {
  return openHistory(td.daemon.config, createLogger({ level: 'silent' }));
}

/** A daemon in this process against a scheduler URL, with its own data dir, Redis prefix and fast settings. */
export async function startTestDaemon(
  schedulerUrl: string,
  redisUrl: string,
  overrides: DaemonConfigInput = {},
  profileExtra: Record<string, unknown> = {},
  /** Pipeline files to put in config/pipelines (file name → text). */
  pipelineFiles: Record<string, string> = {},
  /** More profiles beside `test` (name → profile; `token` is written to a file its auth names). */
  moreProfiles: Record<string, Record<string, unknown> & { token?: string }> = {},
  /** The daemon's clock (src/lib/clock.ts): a ManualClock the test moves instead of waiting. */
  clock: Clock = systemClock,
): Promise<TestDaemon> {
  const root = mkdtempSync(join(tmpdir(), 'schedflow-daemon-'));
  const dataDir = join(root, 'data');
  const configDir = join(root, 'config');
  writeProfile(configDir, schedulerUrl, profileExtra);
  for (const [name, { token, ...profile }] of Object.entries(moreProfiles)) {
    const tokenFile = join(configDir, `${name}.token`);
    writeFileSync(tokenFile, token ?? ALICE_TOKEN, { mode: 0o600 });
    const body = { url: schedulerUrl, auth: { type: 'bearer', tokenFile }, version: 'v0.0.44', ...profile };
    writeFileSync(join(configDir, 'profiles', `${name}.yaml`), JSON.stringify(body));
  }
  mkdirSync(join(configDir, 'pipelines'), { recursive: true });
  for (const [name, text] of Object.entries(pipelineFiles)) writeFileSync(join(configDir, 'pipelines', name), text);
  const onPostgres = TEST_HISTORY === 'postgres' && overrides.databaseUrl === undefined;
  const config = loadDaemonConfig(
    {},
    {
      ...(onPostgres && {
        databaseUrl: new Secret(await newTestDatabase('daemon')),
        webhookSecret: new Secret('test-webhook-secret'),
      }),
      dataDir,
      configDir,
      redisUrl,
      queuePrefix: `test-${Math.random().toString(36).slice(2, 10)}`,
      // The local API on a free port: tests (and other people's test runs) never clash on 8080.
      listen: '127.0.0.1:0',
      pollFloorMs: 500,
      reconcileEveryMs: 2000,
      lostGraceMs: 4000,
      shutdownGraceMs: 2000,
      lockDurationMs: 3000,
      // Test receivers listen on loopback, which webhooks are refused by default (issue 30);
      // the tests of that refusal give their own list.
      webhookAllowHosts: ['127.0.0.1'],
      ...overrides,
    },
  );
  const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
  const handle: TestDaemon = {
    daemon: await startDaemon(config, logger, undefined, clock),
    dataDir,
    configDir,
    waitForState: (requestId, state, timeoutMs = 20_000) =>
      waitFor(
        async () => {
          const row = await getRequest(handle.daemon.history.store, requestId);
          return row?.state === state ? row : undefined;
        },
        { what: `request ${requestId} to reach ${state}`, timeoutMs, intervalMs: 100 },
      ),
    states: async (requestId) => (await transitionsOf(handle.daemon.history.store, requestId)).map((t) => t.toState),
    restart: async (between) => {
      await handle.daemon.stop();
      await between?.();
      handle.daemon = await startDaemon(config, logger, undefined, clock);
    },
    stop: async () => {
      await handle.daemon.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
  if (handle.daemon.apiUrl) await prepareApiCheck(new URL(handle.daemon.apiUrl).origin);
  return handle;
}

/**
 * Hooks for a test file of daemons on simulators: one Redis for the file, and
 * every simulator and daemon a test starts stopped after it (daemons first).
 */
export function daemonTestEnv() {
  let redis: TestRedis | undefined;
  const cleanups: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    redis = await startTestRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  const env = {
    get redis(): TestRedis {
      if (!redis) throw new Error('Redis is started in beforeAll');
      return redis;
    },
    async sim(overrides: SimConfigInput = {}): Promise<TestSim> {
      const sim = await startSim(overrides);
      cleanups.push(() => sim.stop());
      return sim;
    },
    async daemon(
      schedulerUrl: string,
      overrides: DaemonConfigInput = {},
      pipelineFiles: Record<string, string> = {},
    ): Promise<TestDaemon> {
      const td = await startTestDaemon(schedulerUrl, env.redis.url, overrides, {}, pipelineFiles);
      cleanups.push(() => td.stop());
      return td;
    },
    /** Runs at the end of the test, before the daemons and simulators started so far stop. */
    defer(cleanup: () => Promise<void>): void {
      cleanups.push(cleanup);
    },
  };
  return env;
}
