import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '../../src/logger.js';
import { parseSimConfig, type SimConfigInput, type TokenEntry } from '../../src/sim/sim-config.js';
import { SimServer } from '../../src/sim/sim-server.js';

export const ALICE_TOKEN = 'alice-token-0123456789abcdef';
export const READONLY_TOKEN = 'readonly-token-0123456789abcdef';
export const DBONLY_TOKEN = 'dbonly-token-0123456789abcdef';
export const BOB_TOKEN = 'bob-token-0123456789abcdef';

export const TEST_TOKENS: ReadonlyMap<string, TokenEntry> = new Map([
  [ALICE_TOKEN, { user: 'alice', account: 'lab', scopes: ['sched:read', 'scheddb:read', 'sched:jobs:manage'] }],
  [READONLY_TOKEN, { user: 'carol', account: 'lab', scopes: ['sched:read'] }],
  [DBONLY_TOKEN, { user: 'dave', account: 'lab', scopes: ['scheddb:read'] }],
  [BOB_TOKEN, { user: 'bob', account: 'other', scopes: ['sched:read', 'scheddb:read', 'sched:jobs:manage'] }],
]);

export interface TestSim {
  url: string;
  server: SimServer;
  stateDir: string;
  workDir: string;
  stop(): Promise<void>;
  /** Stops and starts again on the same state dir and port (a simulator restart). */
  restart(): Promise<void>;
}

/** A simulator on a free loopback port with its own state dir and test settings. */
export async function startSim(overrides: SimConfigInput = {}, keepDirs = false): Promise<TestSim> {
  const root = mkdtempSync(join(tmpdir(), 'schedflow-sim-'));
  const stateDir = join(root, 'state');
  const workDir = join(root, 'work');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(workDir, { recursive: true });
  const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
  const base: SimConfigInput = {
    port: 0,
    stateDir,
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
  let server = new SimServer({ config, logger, tokens: TEST_TOKENS });
  const url = await server.start();
  const port = Number(new URL(url).port);
  const sim: TestSim = {
    url,
    server,
    stateDir,
    workDir,
    async stop() {
      await sim.server.stop();
      if (!keepDirs) rmSync(root, { recursive: true, force: true });
    },
    async restart() {
      await sim.server.stop();
      server = new SimServer({ config: { ...config, port }, logger, tokens: TEST_TOKENS });
      sim.server = server;
      await server.start();
    },
  };
  return sim;
}
