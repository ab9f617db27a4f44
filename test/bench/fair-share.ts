/**
 * npm run bench:fair-share — fair share between owners on the submit side (docs/fair-share.md):
 * owner A holds a backlog of BENCH_FAIR_BACKLOG (10,000) queued requests behind a proxy whose
 * bucket lets 5 requests a second through; owner B then asks for one job. Measured: how long
 * B waits from its POST to its Slurm job id, against what first come, first served would make
 * it wait (A's requests still queued ahead of it / the rate: computed, not waited for).
 *
 * The daemon runs in this process (src/main.ts's startDaemon, its own Redis and SQLite history)
 * against the simulator, whose bucket plays the site proxy's; the profile's own budget is set
 * to the same pace, as a site configures it to its proxy.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, count, eq, isNotNull } from 'drizzle-orm';
import { loadDaemonConfig } from '../../src/config/daemon-config.js';
import { createToken } from '../../src/db/tokens.js';
import { createLogger } from '../../src/logger.js';
import { startDaemon } from '../../src/main.js';
import { startTestRedis } from '../helpers/redis.js';
import { ALICE_TOKEN, startSim } from '../helpers/sim.js';

const BACKLOG = Number(process.env.BENCH_FAIR_BACKLOG ?? 10_000);
/** The proxy's bucket: requests a second (every request: submissions and the poller's reads). */
const RATE = Number(process.env.BENCH_FAIR_RATE ?? 5);
/** Submissions the worker takes at once (the daemon's `submitConcurrency`; 16 by default). */
const SUBMIT_CONCURRENCY = process.env.BENCH_FAIR_SUBMIT_CONCURRENCY
  ? Number(process.env.BENCH_FAIR_SUBMIT_CONCURRENCY)
  : undefined;
const CLIENTS = 32;

const root = mkdtempSync(join(tmpdir(), 'schedflow-bench-fair-'));
const redis = await startTestRedis();
const sim = await startSim({ cpus: 4, rateLimit: { capacity: RATE, refillPerSecond: RATE } });
const configDir = join(root, 'config');
mkdirSync(join(configDir, 'profiles'), { recursive: true });
writeFileSync(join(configDir, 'alice.token'), ALICE_TOKEN, { mode: 0o600 });
writeFileSync(
  join(configDir, 'profiles', 'lab.yaml'),
  JSON.stringify({
    url: sim.url,
    auth: { type: 'bearer', tokenFile: join(configDir, 'alice.token') },
    account: 'lab',
    version: 'v0.0.44',
    rateLimit: { capacity: RATE, refillPerSecond: RATE },
  }),
);
const config = loadDaemonConfig(
  {},
  {
    dataDir: join(root, 'data'),
    configDir,
    redisUrl: redis.url,
    queuePrefix: 'bench-fair',
    listen: '127.0.0.1:0',
    apiRateLimitPerMin: 1_000_000,
    submitConcurrency: SUBMIT_CONCURRENCY,
  },
);
const daemon = await startDaemon(config, createLogger({ level: process.env.BENCH_DAEMON_LOG_LEVEL ?? 'warn' }));
try {
  const store = daemon.history.store;
  const tokenA = (await createToken(store, { name: 'lab-a', scopes: ['submit', 'read'] })).token;
  const tokenB = (await createToken(store, { name: 'lab-b', scopes: ['submit', 'read'] })).token;
  const post = async (token: string, name: string): Promise<string> => {
    const res = await fetch(`${daemon.apiUrl}/api/v1/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ spec: { name, script: '#!/bin/sh\ntrue\n' } }),
    });
    const body = (await res.json()) as { id?: string };
    if (res.status !== 201 || !body.id) throw new Error(`POST answered ${res.status}: ${JSON.stringify(body)}`);
    return body.id;
  };
  const submittedOf = async (owner: string) =>
    (
      await store.all(
        store.db
          .select({ n: count() })
          .from(store.t.jobRequests)
          .where(and(eq(store.t.jobRequests.owner, owner), isNotNull(store.t.jobRequests.jobId))),
      )
    )[0]?.n ?? 0;

  process.stderr.write(`bench:fair-share: owner lab-a enqueues ${BACKLOG} requests (proxy bucket ${RATE}/s)…\n`);
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < BACKLOG) {
        const i = next++;
        await post(tokenA, `a-${i}`);
      }
    }),
  );
  const acceptSec = (performance.now() - started) / 1000;
  const aSubmittedBefore = await submittedOf('lab-a');
  const aheadOfB = BACKLOG - aSubmittedBefore;

  const asked = performance.now();
  const bId = await post(tokenB, 'b-0');
  let bJob: number | null = null;
  while (bJob === null) {
    const row = await store.all(
      store.db
        .select({ jobId: store.t.jobRequests.jobId })
        .from(store.t.jobRequests)
        .where(eq(store.t.jobRequests.id, bId)),
    );
    bJob = row[0]?.jobId ?? null;
    if (bJob === null) await new Promise((r) => setTimeout(r, 20));
    if (performance.now() - asked > 600_000) throw new Error("B's request was not submitted within 10 minutes");
  }
  const waitSec = (performance.now() - asked) / 1000;
  const aSubmittedMeanwhile = (await submittedOf('lab-a')) - aSubmittedBefore;
  const fifoSec = aheadOfB / RATE;
  const lines = [
    `submitConcurrency ${config.submitConcurrency}; owner lab-a: ${BACKLOG} requests accepted in ${acceptSec.toFixed(1)} s; ${aheadOfB} still queued when lab-b asked`,
    `owner lab-b: one request, submitted after ${waitSec.toFixed(2)} s (lab-a got ${aSubmittedMeanwhile} submitted meanwhile)`,
    `first come, first served would make it wait ${aheadOfB} / ${RATE}/s = ${fifoSec.toFixed(0)} s (for a backlog of ${BACKLOG}: ${(BACKLOG / RATE).toFixed(0)} s)`,
    `fair share: ${waitSec.toFixed(2)} s, ${(fifoSec / waitSec).toFixed(0)}x shorter (${((100 * waitSec) / fifoSec).toFixed(2)} % of the FIFO wait)`,
  ];
  process.stdout.write(`\nbench:fair-share\n${lines.map((l) => `  ${l}`).join('\n')}\n`);
} finally {
  await daemon.stop();
  await sim.stop();
  await redis.stop();
  rmSync(root, { recursive: true, force: true });
}
