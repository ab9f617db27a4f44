/**
 * What the poll and mass-end benchmarks share: the simulator in a child process (benchmark
 * mode: no scripts run, no rate limit of its own), its job records, the profile that reads it,
 * and the upstream figures it counts.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseProfile } from '../../src/sched/profile.js';
import { ADMIN_TOKEN_FILE } from '../../src/sim/admin-token.js';
import type { SimJob } from '../../src/sim/sim-job.js';
import { sleep } from '../chaos/processes.js';
import { freePort } from '../helpers/free-port.js';
import { savedSimJob } from '../helpers/sim.js';

export const BENCH_TOKEN = 'bench-token-0123456789abcdef';
/** The simulator's cache lifetime: the poll cadence the benchmarks follow. */
export const CACHE_TTL_SEC = 2;
const repo = fileURLToPath(new URL('../..', import.meta.url));

/** The admin token of each simulator startBenchSim started, by its URL, for its `/_sim` routes. */
const adminTokens = new Map<string, string>();

/** A simulator job record of the bench account (see savedSimJob), pending unless `fields` say otherwise. */
export function simJob(jobId: number, fields: Partial<SimJob>): SimJob {
  return savedSimJob(jobId, {
    name: 'bench',
    user: 'bench',
    userId: 10_000,
    account: 'bench',
    environment: [],
    submitTime: 0,
    eligibleTime: 0,
    lastUpdate: 0,
    ...fields,
  });
}

/**
 * `schedflow sim` on the job table already written to `<dir>/sim/jobs.json`, with room for
 * `jobs` jobs at once, each running `runtimeSec`; resolves once it answers.
 */
export async function startBenchSim(
  dir: string,
  options: { jobs: number; runtimeSec: number },
): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const tokens = join(dir, 'tokens.json');
  writeFileSync(
    tokens,
    JSON.stringify({
      [BENCH_TOKEN]: { user: 'bench', account: 'bench', scopes: ['sched:read', 'scheddb:read', 'sched:jobs:manage'] },
    }),
    { mode: 0o600 },
  );
  const child = spawn(
    process.execPath,
    [
      '--import',
      import.meta.resolve('tsx'),
      join(repo, 'src/cli.ts'),
      'sim',
      ...['--port', String(port), '--tokens', tokens, '--state-dir', join(dir, 'sim')],
      ...['--cpus', String(options.jobs + 10), '--memory-mb', String((options.jobs + 10) * 1024)],
      ...['--simulated-runtime', String(options.runtimeSec), '--cache-ttl', String(CACHE_TTL_SEC)],
      ...['--rate-capacity', '1000000', '--rate-refill', '1000000', '--min-job-age', '3600'],
      ...['--no-munge', '--log-level', 'warn'],
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; i++) {
    try {
      if ((await fetch(`${url}/ping`)).ok) {
        // Made in its state dir before it listens.
        adminTokens.set(url, readFileSync(join(dir, 'sim', ADMIN_TOKEN_FILE), 'utf8').trim());
        return { url, child };
      }
    } catch {
      // starting
    }
    await sleep(100);
  }
  throw new Error('simulator did not start');
}

/**
 * The profile that reads the bench simulator, as the token's user. Without `rateLimit`, the
 * profile's default budget, as users run it; the baselines pass an unbounded one.
 */
export function benchProfile(url: string, rateLimit?: { capacity: number; refillPerSecond: number }) {
  return parseProfile('bench', {
    url,
    auth: { type: 'bearer', tokenEnv: 'BENCH_TOKEN' },
    account: 'bench',
    version: 'v0.0.44',
    ...(rateLimit ? { rateLimit, concurrency: 16 } : {}),
  });
}

/** An unbounded request budget, for the harness and the baselines. */
export const UNBOUNDED = { capacity: 100_000, refillPerSecond: 100_000 };

/** Requests and bytes the simulator has answered (its own `/_sim` routes aside). */
export async function upstreamTotals(url: string): Promise<{ requests: number; bytes: number }> {
  const headers = { authorization: `Bearer ${adminTokens.get(url) ?? ''}` };
  const stats = (await (await fetch(`${url}/_sim/stats`, { headers })).json()) as {
    requests: Record<string, number>;
    bytes: Record<string, number>;
  };
  const sum = (m: Record<string, number>) =>
    Object.entries(m)
      .filter(([route]) => !route.includes('/_sim/'))
      .reduce((s, [, n]) => s + n, 0);
  return { requests: sum(stats.requests), bytes: sum(stats.bytes) };
}
