/**
 * npm run bench:mass-end — what a mass end costs (issue 14): N jobs ending in the same second,
 * in an account with a long history, followed by the poller at a profile's request budget
 * against the simulator in a child process (benchmark mode: no scripts run).
 *
 * Figures: upstream requests by endpoint, poll cycles, the time from the end to the last end
 * recorded, the event loop's longest block during the cycles, this process's peak RSS, and
 * whether every end was recorded with accounting's exit code and times.
 *
 * Settings (environment): BENCH_ENDS (20000), BENCH_PAST_RECORDS (100000),
 * BENCH_CAPACITY and BENCH_REFILL (10 and 5: the profile defaults).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import { pino } from 'pino';
import { openDatabase } from '../../src/db/database.js';
import { createRequest, transition } from '../../src/db/requests.js';
import { SchedflowError } from '../../src/errors.js';
import { SchedClient } from '../../src/sched/client.js';
import { parseProfile } from '../../src/sched/profile.js';
import { pollProfile } from '../../src/tracking/poller.js';

const ENDS = Number(process.env.BENCH_ENDS ?? 20_000);
const PAST = Number(process.env.BENCH_PAST_RECORDS ?? 100_000);
const CAPACITY = Number(process.env.BENCH_CAPACITY ?? 10);
const REFILL = Number(process.env.BENCH_REFILL ?? 5);
/** The poll worker's floor interval: a cycle starts this long after the last one ended. */
const POLL_FLOOR_MS = 2000;
const TOKEN = 'bench-token-0123456789abcdef';
const repo = fileURLToPath(new URL('../..', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A simulator job record (see src/sim/sim-job.ts) of the bench account. */
function simJob(jobId: number, fields: Record<string, unknown>) {
  return {
    jobId,
    name: 'bench',
    user: 'bench',
    userId: 10_000,
    account: 'bench',
    partition: 'debug',
    comment: '',
    script: '',
    environment: [],
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
    submitTime: 0,
    eligibleTime: 0,
    startTime: 0,
    endTime: 0,
    exitCode: null,
    termSignal: null,
    cpuUserSec: 0,
    cpuSystemSec: 0,
    peakMemoryBytes: null,
    nodes: '',
    lastUpdate: 0,
    ...fields,
  };
}

/**
 * The account's past (PAST records that ended over the last day), then ENDS pending jobs of
 * schedflow's, written a thousand at a time: one 60 MB string would stay in this process's RSS.
 */
function seedSimulator(dir: string): number[] {
  const now = Math.floor(Date.now() / 1000);
  mkdirSync(join(dir, 'sim'), { recursive: true });
  const fd = openSync(join(dir, 'sim', 'jobs.json'), 'w');
  writeSync(fd, `{"version":1,"nextJobId":${1000 + PAST + ENDS},"jobs":[`);
  const ours: number[] = [];
  let batch: string[] = [];
  let written = false;
  const flush = () => {
    if (batch.length === 0) return;
    writeSync(fd, `${written ? ',' : ''}${batch.join(',')}`);
    written = true;
    batch = [];
  };
  const add = (job: object) => {
    batch.push(JSON.stringify(job));
    if (batch.length === 1000) flush();
  };
  for (let i = 0; i < PAST; i++) {
    const at = now - 86_400 + Math.floor((i * 80_000) / Math.max(1, PAST));
    add(
      simJob(1000 + i, {
        state: 'COMPLETED',
        submitTime: at,
        eligibleTime: at,
        startTime: at + 1,
        endTime: at + 60,
        exitCode: 0,
        nodes: 'sim-node1',
        lastUpdate: at + 60,
      }),
    );
  }
  for (let i = 0; i < ENDS; i++) {
    const jobId = 1000 + PAST + i;
    ours.push(jobId);
    add(simJob(jobId, { comment: `schedflow:end-${i}`, submitTime: now, eligibleTime: now, lastUpdate: now }));
  }
  flush();
  writeSync(fd, ']}');
  closeSync(fd);
  return ours;
}

async function startSimProcess(dir: string, runtimeSec: number): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort();
  const tokens = join(dir, 'tokens.json');
  writeFileSync(
    tokens,
    JSON.stringify({
      [TOKEN]: { user: 'bench', account: 'bench', scopes: ['sched:read', 'scheddb:read', 'sched:jobs:manage'] },
    }),
    { mode: 0o600 },
  );
  const args = ['--import', import.meta.resolve('tsx'), join(repo, 'src/cli.ts'), 'sim', '--port', String(port)];
  args.push('--tokens', tokens, '--state-dir', join(dir, 'sim'), '--cpus', String(ENDS + 10));
  args.push('--memory-mb', String((ENDS + 10) * 1024), '--simulated-runtime', String(runtimeSec));
  args.push('--cache-ttl', '2', '--rate-capacity', '1000000', '--rate-refill', '1000000', '--min-job-age', '3600');
  args.push('--no-munge', '--log-level', 'warn');
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 1200; i++) {
    try {
      if ((await fetch(`${url}/ping`)).ok) return { url, child };
    } catch {
      // starting
    }
    await sleep(100);
  }
  throw new Error('simulator did not start');
}

async function requestsByRoute(url: string): Promise<Record<string, number>> {
  const stats = (await (await fetch(`${url}/_sim/stats`)).json()) as { requests: Record<string, number> };
  return Object.fromEntries(Object.entries(stats.requests).filter(([route]) => !route.includes('/_sim/')));
}

const dir = mkdtempSync(join(tmpdir(), 'schedflow-bench-mass-end-'));
// Long enough for the history to be seeded before the jobs end (about 1 ms a request).
const runtimeSec = 15 + Math.ceil(ENDS / 1000);
const ours = seedSimulator(dir);
const { url, child } = await startSimProcess(dir, runtimeSec);
const endsAtMs = Date.now() + runtimeSec * 1000;
try {
  const logger = pino({ level: 'silent' });
  const profile = parseProfile('bench', {
    url,
    auth: { type: 'bearer', tokenEnv: 'BENCH_TOKEN' },
    account: 'bench',
    version: 'v0.0.44',
    rateLimit: { capacity: CAPACITY, refillPerSecond: REFILL },
  });
  const client = await SchedClient.connect(profile, { logger, env: { BENCH_TOKEN: TOKEN } });
  const history = openDatabase(join(dir, 'history.sqlite'));
  const { db } = history;
  const createdAt = Date.now() - 10_000;
  db.transaction(() => {
    ours.forEach((jobId, i) => {
      const id = `end-${i}`;
      createRequest(db, { id, profile: 'bench', name: 'bench', spec: {}, origin: 'api', at: createdAt, source: 'api' });
      transition(db, id, {
        to: 'submitted',
        source: 'submit',
        at: createdAt,
        patch: { jobId, submittedAt: createdAt },
      });
    });
  });
  const count = (where: ReturnType<typeof sql>) =>
    db.get<{ n: number }>(sql`select count(*) as n from job_requests where ${where}`)?.n ?? 0;
  const settings = { lostGraceMs: 600_000 };
  let failedPolls = 0;
  // As the poll worker does: a poll the upstream did not answer is tried again at the next tick.
  const poll = () =>
    pollProfile({ db, client, logger, settings }, 'bench').catch((error: unknown) => {
      if (!(error instanceof SchedflowError)) throw error;
      failedPolls++;
      process.stderr.write(`poll failed: ${error.message}\n`);
      return { requests: 0, changed: 0 };
    });
  // Follow the jobs up to their end (a mass start on the way), then measure the end.
  while (Date.now() < endsAtMs) {
    await poll();
    await sleep(POLL_FLOOR_MS);
  }
  const before = await requestsByRoute(url);
  let longestBlockMs = 0;
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    longestBlockMs = Math.max(longestBlockMs, now - last);
    last = now;
  }, 5);
  const rssBeforeMb = process.memoryUsage().rss / 1048576;
  let peakRss = process.memoryUsage().rss;
  const rss = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 50);
  const cpu = process.cpuUsage();
  let cycles = 0;
  let lastRecordedMs = Date.now();
  while (count(sql`state = 'completed'`) < ENDS && cycles < 500) {
    const report = await poll();
    cycles++;
    lastRecordedMs = Date.now();
    process.stderr.write(
      `cycle ${cycles}: ${report.requests} requests, ${report.changed} changed, ${count(sql`state = 'completed'`)} of ${ENDS} recorded\n`,
    );
    await sleep(POLL_FLOOR_MS);
  }
  await sleep(50);
  clearInterval(ticker);
  clearInterval(rss);
  const used = process.cpuUsage(cpu);
  const after = await requestsByRoute(url);
  const asked = Object.fromEntries(
    Object.entries(after)
      .map(([route, n]) => [route, n - (before[route] ?? 0)] as const)
      .filter(([, n]) => n > 0),
  );
  const complete = count(
    sql`state = 'completed' and exit_code = 0 and ended_at is not null and started_at is not null`,
  );
  const rows: [string, string][] = [
    ['jobs ending together', ENDS.toLocaleString('en')],
    ['past records of the account', PAST.toLocaleString('en')],
    ['request budget (capacity, per second)', `${CAPACITY}, ${REFILL}`],
    ['poll cycles until every end was recorded', String(cycles)],
    [
      'upstream requests',
      Object.entries(asked)
        .map(([route, n]) => `${route} ${n}`)
        .join('; '),
    ],
    ['end → last end recorded', `${((lastRecordedMs - endsAtMs) / 1000).toFixed(1)} s`],
    ['CPU of this process', `${((used.user + used.system) / 1e6).toFixed(1)} s`],
    ['longest event-loop block', `${longestBlockMs.toFixed(0)} ms`],
    ['RSS before the end, peak after', `${rssBeforeMb.toFixed(0)} MB, ${(peakRss / 1048576).toFixed(0)} MB`],
    ['recorded completed with exit code and times', `${complete} of ${ENDS}`],
    ['polls the simulator did not answer in time', String(failedPolls)],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  process.stdout.write(`${rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n')}\n\n`);
  const targets: [string, boolean][] = [
    ['every end recorded with its exit code and times', complete === ENDS],
    ['longest event-loop block ≤ 200 ms', longestBlockMs <= 200],
    ['peak RSS ≤ 300 MB', peakRss <= 300 * 1048576],
  ];
  for (const [what, ok] of targets) process.stdout.write(`${ok ? 'met   ' : 'MISSED'}  ${what}\n`);
  await client.close();
  history.close();
} finally {
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
}
