/**
 * npm run bench:slurm — schedflow's submission rate beside the real slurmrestd's own, on the
 * real Slurm 25.11.7 of ../shared/real-slurm (cluster.sh up), in one run:
 *
 * 1. for C = 1, 4 and 16: N held jobs posted straight to slurmrestd by C clients, then the same
 *    through schedflow (`POST /api/v1/jobs` by C clients until every request has its job id,
 *    the profile's `concurrency: C`, its client rate limit lifted), with the daemon's CPU per
 *    job, /healthz's p99 meanwhile, and Slurm's own count of the jobs (exactly one per request);
 * 2. the daemon's CPU per job by phase (acceptance, queue, submit, history writes), from a CPU
 *    profile of a run of its own;
 * 3. behind a proxy with a token bucket of R/s: the share of R the submissions used in a burst,
 *    the 429s, and the polls that went on meanwhile;
 * 4. E held jobs cancelled at once (they end within one poll interval): how long until every
 *    end is in the history, and the upstream requests per poll cycle.
 *
 * Jobs are held (`hold: true`) so that nothing runs; each part cancels its jobs and waits for the
 * controller to purge them (MinJobAge), since MaxJobCount (10,000) counts ended jobs too.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { Pool } from 'undici';
import { startCountingProxy } from '../chaos/counting-proxy.js';
import { DaemonUnderTest } from '../chaos/daemon.js';
import { cleanupAll, cleanupOnExit, sleep, trackDir } from '../chaos/processes.js';
import { RealSlurm } from '../chaos/real-slurm.js';
import { type CpuByPhase, cpuByPhase, PHASES } from './cpu-phases.js';
import { daemonSettings, type HealthProbe, healthWhile, load, startHealthProbe, usage } from './daemon-probe.js';
import { type CpuGroups, type CpuSpent, cpuSnapshot, cpuSpent, pidsNamed } from './machine-cpu.js';

const exec = promisify(execFile);
const JOBS = Number(process.env.BENCH_SLURM_JOBS ?? 10_000);
const CONCURRENCIES = (process.env.BENCH_SLURM_CONCURRENCY ?? '1,4,16').split(',').map(Number);
const PROFILE_JOBS = Number(process.env.BENCH_SLURM_PROFILE_JOBS ?? 3_000);
const BUCKET_RATE = Number(process.env.BENCH_SLURM_BUCKET_RATE ?? 100);
const BUCKET_JOBS = Number(process.env.BENCH_SLURM_BUCKET_JOBS ?? 3_000);
const ENDS = Number(process.env.BENCH_SLURM_ENDS ?? 5_000);
const PARTS = new Set((process.env.BENCH_SLURM_PARTS ?? 'rates,profile,bucket,ends').split(','));
/** BENCH_SLURM_RAW=0 leaves slurmrestd's own rate out (schedflow's side alone, while tuning it). */
const RAW = process.env.BENCH_SLURM_RAW !== '0';
const SCRIPT = '#!/bin/sh\ntrue\n';
const PROFILE_COPY = join(tmpdir(), 'schedflow-bench-slurm.cpuprofile');

cleanupOnExit();
const root = trackDir(mkdtempSync(join(tmpdir(), 'schedflow-bench-slurm-')));
const real = await RealSlurm.up();
const slurmEnv = Object.fromEntries(
  readFileSync(join(process.env.SLURM_RUN ?? '/tmp/real-slurm', 'env'), 'utf8')
    .split('\n')
    .filter((line) => line.includes('='))
    .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
);
const slurmBin = (name: string) => join(slurmEnv.SLURM_PREFIX ?? '/opt/slurm', 'bin', name);
const slurm = async (command: string, args: string[]) =>
  (
    await exec(slurmBin(command), args, {
      env: { ...process.env, SLURM_CONF: slurmEnv.SLURM_CONF },
      maxBuffer: 64 << 20,
    })
  ).stdout;

const log = (line: string) => process.stderr.write(`bench:slurm: ${line}\n`);

/** Names of alice's jobs the controller holds, of every state. */
async function controllerJobNames(): Promise<string[]> {
  return (await slurm('squeue', ['-h', '-u', 'alice', '-t', 'all', '-o', '%j'])).split('\n').filter(Boolean);
}

/**
 * Ends every job of alice's at once, as the issue's mass end has them end within one poll
 * interval: slurmrestd's `DELETE …/jobs/` is one request to slurmctld for them all, where
 * `scancel -u` took 6 to 8 s for 5,000 held jobs (2.2 to 3 poll intervals) on this machine, and
 * the bulk request under a second for 2,000.
 */
async function cancelAllOfAlice(): Promise<void> {
  const res = await fetch(`${real.url}/slurm/v0.0.44/jobs/`, {
    method: 'DELETE',
    headers: {
      'content-type': 'application/json',
      'x-slurm-user-name': 'alice',
      'x-slurm-user-token': slurmEnv.ALICE_JWT as string,
    },
    body: JSON.stringify({ user_name: 'alice' }),
  });
  const body = (await res.json()) as { errors?: unknown[] };
  if (res.status !== 200 || (body.errors?.length ?? 0) > 0) {
    throw new Error(
      `DELETE /slurm/v0.0.44/jobs/ answered ${res.status}: ${JSON.stringify(body.errors ?? body).slice(0, 300)}`,
    );
  }
}

/** Cancels alice's jobs and waits until the controller has purged them (MinJobAge, then its purge pass). */
async function clearJobs(): Promise<void> {
  await cancelAllOfAlice().catch(() => slurm('scancel', ['-u', 'alice']).catch(() => undefined));
  const started = Date.now();
  for (;;) {
    const left = (await slurm('squeue', ['-h', '-u', 'alice', '-t', 'all', '-o', '%i']))
      .split('\n')
      .filter(Boolean).length;
    if (left === 0) return;
    if (Date.now() - started > 600_000) throw new Error(`${left} jobs still in the controller after 10 min`);
    await sleep(5000);
  }
}

/**
 * A client pool of `clients` connections, posting JSON: the same light client (undici's
 * request, not fetch, whose own CPU on this 2-core machine held slurmrestd to half its rate)
 * for slurmrestd and for schedflow, so that both are measured alike.
 */
function poster(url: string, clients: number, headers: Record<string, string>) {
  const pool = new Pool(url, { connections: clients, pipelining: 1 });
  return {
    async post(path: string, body: unknown): Promise<{ status: number; body: unknown }> {
      const res = await pool.request({
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
      return { status: res.statusCode, body: await res.body.json() };
    },
    close: () => pool.close(),
  };
}

/** slurmrestd itself: `count` held jobs by `clients` concurrent clients. */
async function rawRate(clients: number, count: number, tag: string): Promise<{ rate: number; errors: number }> {
  const client = poster(real.url, clients, {
    'x-slurm-user-name': 'alice',
    'x-slurm-user-token': slurmEnv.ALICE_JWT as string,
  });
  let firstError = '';
  const result = await load(count, clients, async (i) => {
    const res = await client.post('/slurm/v0.0.44/job/submit', {
      job: {
        name: `${tag}-${i}`,
        script: SCRIPT,
        account: 'lab',
        current_working_directory: '/tmp',
        environment: ['PATH=/usr/bin:/bin'],
        hold: true,
      },
    });
    const body = res.body as { job_id?: number; errors?: unknown[] };
    if (res.status !== 200 && !firstError) firstError = JSON.stringify(body.errors ?? body).slice(0, 300);
    return res.status === 200 && typeof body.job_id === 'number';
  });
  await client.close();
  if (firstError) log(`slurmrestd refused some (${result.errors}): ${firstError}`);
  return { rate: (count - result.errors) / result.seconds, errors: result.errors };
}

interface DaemonRun {
  daemon: DaemonUnderTest;
  pid: number;
  history: Database.Database;
  headers: Record<string, string>;
}

/** A daemon on a fresh data dir with one profile on `url` (slurmrestd, or a proxy in front of it). */
async function startDaemon(
  name: string,
  url: string,
  profile: { concurrency: number; rateLimit: { capacity: number; refillPerSecond: number } },
  nodeArgs: string[] = [],
): Promise<DaemonRun> {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const daemon = new DaemonUnderTest(dir, {
    schedulerUrl: url,
    userTimings: true,
    // BENCH_SLURM_NODE_ARGS='--max-semi-space-size=64' (say) runs every daemon with them.
    nodeArgs: [...(process.env.BENCH_SLURM_NODE_ARGS?.split(' ').filter(Boolean) ?? []), ...nodeArgs],
    profile: { ...real.profile(dir, url), ...profile },
    // BENCH_SCHEDFLOW_SUBMIT_CONCURRENCY=64 (say) runs every daemon with SCHEDFLOW_SUBMIT_CONCURRENCY=64.
    settings: { SCHEDFLOW_API_RATE_LIMIT: '1000000', ...daemonSettings() },
  });
  await daemon.setup();
  await daemon.start(60_000);
  const history = new Database(join(daemon.dataDir, 'history.sqlite'), { readonly: true, fileMustExist: true });
  return {
    daemon,
    pid: daemon.proc?.child.pid as number,
    history,
    headers: { authorization: `Bearer ${daemon.apiToken}`, 'content-type': 'application/json' },
  };
}

async function stopDaemon(run: DaemonRun): Promise<void> {
  run.history.close();
  await run.daemon.stop(60_000);
}

/** Requests posted through the local API by `clients` clients, until each has its Slurm job id. */
async function submitThrough(run: DaemonRun, clients: number, count: number, tag: string): Promise<number> {
  const client = poster(run.daemon.apiUrl, clients, { authorization: run.headers.authorization as string });
  const post = async (i: number) => {
    const res = await client.post('/api/v1/jobs', {
      spec: { name: `${tag}-${i}`, script: SCRIPT, current_working_directory: '/tmp', hold: true },
    });
    return res.status === 201;
  };
  const started = performance.now();
  const { errors } = await load(count, clients, post);
  await client.close();
  if (errors > 0) throw new Error(`${errors} of ${count} submissions were not accepted`);
  const submitted = run.history.prepare(
    'select count(*) as n from job_requests where job_id is not null and name like ?',
  );
  const failed = run.history.prepare("select count(*) as n from job_requests where state = 'failed'");
  for (;;) {
    if ((submitted.get(`${tag}-%`) as { n: number }).n >= count) break;
    const { n } = failed.get() as { n: number };
    if (n > 0) throw new Error(`${n} requests failed; see ${run.daemon.logFile}`);
    // Not faster: each look counts the history's rows, on the cores the daemon is measured on.
    await sleep(200);
  }
  return (performance.now() - started) / 1000;
}

/** Slurm's own count of the jobs named `tag-*`: exactly one per request, or what is off. */
async function exactlyOne(tag: string, count: number): Promise<{ ok: boolean; what: string }> {
  const names = (await controllerJobNames()).filter((n) => n.startsWith(`${tag}-`));
  const distinct = new Set(names).size;
  const ok = names.length === count && distinct === count;
  return { ok, what: `${names.length} jobs in Slurm for ${count} requests (${distinct} distinct)` };
}

interface RateRow {
  clients: number;
  raw: number;
  schedflow: number;
  /** The machine's CPU per job by process, straight to slurmrestd and through schedflow. */
  rawCpu: CpuSpent | null;
  schedflowCpu: CpuSpent;
  cpuMsPerJob: number;
  healthP99: number;
  healthMax: number;
  one: { ok: boolean; what: string };
}

/** The cluster's processes, and this one (the clients), whose CPU a run is read by (machine-cpu.ts). */
function clusterGroups(): CpuGroups {
  return {
    'slurmctld+slurmrestd': pidsNamed('slurmctld', 'slurmrestd'),
    'slurmdbd+mariadb': pidsNamed('slurmdbd', 'mariadbd', 'mysqld'),
    clients: [process.pid],
  };
}

async function rates(probeFor: (url: string) => Promise<HealthProbe>): Promise<RateRow[]> {
  const rows: RateRow[] = [];
  for (const clients of CONCURRENCIES) {
    let raw = { rate: Number.NaN, errors: 0 };
    let rawCpu: CpuSpent | null = null;
    if (RAW) {
      log(`C=${clients}: ${JOBS} jobs straight to slurmrestd…`);
      const groups = clusterGroups();
      const before = cpuSnapshot(groups);
      raw = await rawRate(clients, JOBS, `raw${clients}`);
      rawCpu = cpuSpent(before, cpuSnapshot(groups), JOBS, availableParallelism());
      await clearJobs();
    }
    log(`C=${clients}: ${JOBS} jobs through schedflow…`);
    const run = await startDaemon(`rates-${clients}`, real.url, {
      concurrency: clients,
      rateLimit: { capacity: 100_000, refillPerSecond: 100_000 },
    });
    const probe = await probeFor(run.daemon.apiUrl);
    await sleep(3000);
    const groups = { ...clusterGroups(), daemon: [run.pid], 'its Redis': [run.daemon.privateRedisPid() ?? -1] };
    const machineBefore = cpuSnapshot(groups);
    const before = usage(run.pid);
    const {
      result: seconds,
      p99Ms,
      worstMs,
    } = await healthWhile(probe, submitThrough(run, clients, JOBS, `sf${clients}`));
    const cpuSec = usage(run.pid).cpuSec - before.cpuSec;
    const schedflowCpu = cpuSpent(machineBefore, cpuSnapshot(groups), JOBS, availableParallelism());
    probe.stop();
    const one = await exactlyOne(`sf${clients}`, JOBS);
    await stopDaemon(run);
    await clearJobs();
    rows.push({
      clients,
      raw: raw.rate,
      schedflow: JOBS / seconds,
      rawCpu,
      schedflowCpu,
      cpuMsPerJob: (cpuSec * 1000) / JOBS,
      healthP99: p99Ms,
      healthMax: worstMs,
      one,
    });
    log(`C=${clients}: slurmrestd ${raw.rate.toFixed(0)}/s, schedflow ${(JOBS / seconds).toFixed(0)}/s`);
  }
  return rows;
}

/** The daemon's CPU by phase, from a CPU profile of PROFILE_JOBS submissions at C = 16. */
async function profileRun(): Promise<{ byPhase: CpuByPhase; cpuMsPerJob: number }> {
  const dir = join(root, 'cpu-profile');
  mkdirSync(dir, { recursive: true });
  log(`CPU profile: ${PROFILE_JOBS} jobs through schedflow at C=16…`);
  const run = await startDaemon(
    'profile',
    real.url,
    { concurrency: 16, rateLimit: { capacity: 100_000, refillPerSecond: 100_000 } },
    ['--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-interval', '500'],
  );
  await sleep(3000);
  const startedAt = Date.now();
  const before = usage(run.pid);
  await submitThrough(run, 16, PROFILE_JOBS, 'prof');
  const cpuSec = usage(run.pid).cpuSec - before.cpuSec;
  const endedAt = Date.now();
  await stopDaemon(run);
  const exitedAt = Date.now();
  await clearJobs();
  // CPU.<date>.<time>.<pid>.<thread>.<n>.cpuprofile: the main thread's is thread 0 (the
  // history's checkpointer, a worker thread, writes one of its own).
  const file = readdirSync(dir).find((f) => /\.0\.\d+\.cpuprofile$/.test(f));
  if (!file) throw new Error(`no CPU profile in ${dir}`);
  // Kept beyond the run's temporary directory, for Chrome DevTools' or speedscope's reading.
  copyFileSync(join(dir, file), PROFILE_COPY);
  const byPhase = cpuByPhase(JSON.parse(readFileSync(join(dir, file), 'utf8')), startedAt, endedAt, exitedAt);
  return { byPhase, cpuMsPerJob: (cpuSec * 1000) / PROFILE_JOBS };
}

/** Requests to the scheduler by kind and time, as a counting proxy saw them come. */
class Timeline {
  readonly events: { endpoint: string; at: number }[] = [];
  readonly record = (endpoint: string, at: number) => {
    this.events.push({ endpoint, at });
  };
  /** Requests of `endpoint` between two times. */
  count(endpoint: string, from: number, to: number): number {
    return this.events.filter((e) => e.endpoint === endpoint && e.at >= from && e.at <= to).length;
  }
  /**
   * The starts of the daemon's poll cycles: its `jobs/state` requests (one per chunk of ids),
   * a cycle being those less than half a second apart.
   */
  cycleStarts(from = 0, to = Number.POSITIVE_INFINITY): number[] {
    const starts: number[] = [];
    let last = Number.NEGATIVE_INFINITY;
    for (const e of this.events) {
      if (e.endpoint !== 'jobs/state' || e.at < from || e.at > to) continue;
      if (e.at - last > 500) starts.push(e.at);
      last = e.at;
    }
    return starts;
  }
}

interface BucketResult {
  used: number;
  submitsPerSec: number;
  status429: number;
  pollCycles: number;
  seconds: number;
}

/**
 * A burst behind a site proxy's token bucket of BUCKET_RATE/s. The profile's budget is set as
 * docs/profiles.md says, below the proxy's limit: 95 % of its rate, half its capacity, so that
 * requests in flight (taken from the daemon's bucket before they reach the proxy's) never find
 * the proxy's empty.
 */
async function bucketRun(): Promise<BucketResult> {
  const timeline = new Timeline();
  const proxy = await startCountingProxy(real.url, 0, {
    bucket: { capacity: BUCKET_RATE, refillPerSecond: BUCKET_RATE },
    onRequest: timeline.record,
  });
  log(`token bucket ${BUCKET_RATE}/s: ${BUCKET_JOBS} jobs in a burst…`);
  const run = await startDaemon('bucket', proxy.url, {
    concurrency: 16,
    rateLimit: { capacity: Math.max(1, Math.floor(BUCKET_RATE / 2)), refillPerSecond: 0.95 * BUCKET_RATE },
  });
  // Some jobs tracked before the burst, so that polling has work meanwhile.
  await submitThrough(run, 4, 20, 'early');
  await sleep(5000);
  const before = proxy.counts();
  const started = performance.now();
  const seconds = await submitThrough(run, 16, BUCKET_JOBS, 'bucket');
  const ended = performance.now();
  const after = proxy.counts();
  await stopDaemon(run);
  await proxy.close();
  await clearJobs();
  // The burst's steady part: past its first second (the buckets' capacity may go at once) to
  // the last submission.
  const submits = timeline.events.filter((e) => e.endpoint === 'submit' && e.at >= started && e.at <= ended);
  const from = started + 1000;
  const last = submits.at(-1)?.at ?? from;
  const steady = submits.filter((e) => e.at >= from).length;
  const submitsPerSec = last > from ? (steady * 1000) / (last - from) : 0;
  return {
    used: submitsPerSec / BUCKET_RATE,
    submitsPerSec,
    status429: (after.byStatus['429'] ?? 0) - (before.byStatus['429'] ?? 0),
    pollCycles: timeline.cycleStarts(started, ended).length,
    seconds,
  };
}

interface EndsResult {
  /** The daemon's CPU per poll cycle while the ENDS jobs wait held, before the cancel. */
  idleCpuPerCycleMs: number;
  /** How long the cancel took to end them all. */
  cancelSec: number;
  /** From the cancel's answer (every job ended) to every end in the history. */
  seconds: number;
  intervalSec: number;
  recorded: number;
  /**
   * From the cancel's answer to when slurmdbd had written the last end (its job table's
   * `mod_time`, whole seconds, so up to a second early); null where it cannot be read.
   */
  slurmdbdSec: number | null;
  /** The poll cycles after the cancel: when each started (seconds after the cancel's answer), what it asked. */
  cycles: { startSec: number; requests: number; byEndpoint: Record<string, number> }[];
}

/**
 * ENDS held jobs, tracked, then cancelled at once outside schedflow (one `DELETE …/jobs/`): every one ends
 * within one poll interval. Until every end is recorded: how long, in poll intervals, and what
 * each poll cycle asked of the scheduler.
 */
async function endsRun(): Promise<EndsResult> {
  const timeline = new Timeline();
  const proxy = await startCountingProxy(real.url, 0, { onRequest: timeline.record });
  log(`${ENDS} jobs ending at once…`);
  const run = await startDaemon('ends', proxy.url, {
    concurrency: 16,
    rateLimit: { capacity: 100_000, refillPerSecond: 100_000 },
  });
  await submitThrough(run, 16, ENDS, 'ends');
  // The poll interval as it goes before the ends: between the starts of cycles.
  const watchFrom = performance.now();
  const cpuBefore = usage(run.pid).cpuSec;
  await sleep(15_000);
  const watchCpuSec = usage(run.pid).cpuSec - cpuBefore;
  const starts = timeline.cycleStarts(watchFrom);
  const gaps = starts.slice(1).map((at, i) => at - (starts[i] as number));
  const intervalSec = gaps.length ? gaps.reduce((a, b) => a + b, 0) / gaps.length / 1000 : Number.NaN;
  // Recorded: the state and the end time. These jobs never ran, so none has an exit code (Slurm's
  // `0:0` for a job that never ran is not one: src/sched/codecs/common.ts keeps it empty).
  const recorded = run.history.prepare(
    "select count(*) as n from job_requests where name like 'ends-%' and state = 'cancelled' and ended_at is not null",
  );
  const cancelledAt = performance.now();
  await cancelAllOfAlice();
  // Every job has ended once the answer comes.
  const endedAt = performance.now();
  for (;;) {
    if ((recorded.get() as { n: number }).n >= ENDS) break;
    if (performance.now() - cancelledAt > 600_000) break;
    await sleep(20);
  }
  const doneAt = performance.now();
  const endedAtWall = Date.now() - (doneAt - endedAt);
  const done = (recorded.get() as { n: number }).n;
  const ids = run.history
    .prepare("select min(job_id) as lo, max(job_id) as hi from job_requests where name like 'ends-%'")
    .get() as { lo: number | null; hi: number | null };
  const written = ids.lo !== null && ids.hi !== null ? await real.endsWrittenAt(ids.lo, ids.hi) : null;
  await stopDaemon(run);
  await proxy.close();
  await clearJobs();
  // Each cycle from its start to the next's (the last to when every end was in).
  const after = timeline.cycleStarts(cancelledAt, doneAt);
  const cycles = after.map((start, i) => {
    const end = after[i + 1] ?? doneAt;
    const inCycle = timeline.events.filter((e) => e.at >= start && e.at < end);
    const byEndpoint: Record<string, number> = {};
    for (const e of inCycle) byEndpoint[e.endpoint] = (byEndpoint[e.endpoint] ?? 0) + 1;
    return { startSec: (start - endedAt) / 1000, requests: inCycle.length, byEndpoint };
  });
  return {
    idleCpuPerCycleMs: starts.length ? (watchCpuSec * 1000) / starts.length : Number.NaN,
    cancelSec: (endedAt - cancelledAt) / 1000,
    seconds: (doneAt - endedAt) / 1000,
    intervalSec,
    recorded: done,
    slurmdbdSec: written && done >= ENDS && written.ended >= ENDS ? written.atSec - endedAtWall / 1000 : null,
    cycles,
  };
}

/**
 * What every process on the machine spent per job, straight to slurmrestd and through
 * schedflow: with the cluster on the same cores, schedflow's rate is at most the cores over the
 * sum of a job's CPU in every process, so for 0.8 × slurmrestd's rate the daemon, its Redis and
 * the clients together may add only a quarter of what a job costs the machine without them.
 */
function machineCpuTable(rows: RateRow[]): string[] {
  const groups = ['slurmctld+slurmrestd', 'slurmdbd+mariadb', 'daemon', 'its Redis', 'clients', 'other'];
  const line = (label: string, rate: number, cpu: CpuSpent) => {
    const total = groups.reduce((sum, g) => sum + (cpu.msPerJob[g] ?? 0), 0);
    const cells = groups.map((g) => (cpu.msPerJob[g] === undefined ? '' : cpu.msPerJob[g].toFixed(2)));
    return `| ${label} | ${rate.toFixed(0)} | ${(cpu.machineBusy * 100).toFixed(0)} % | ${cells.join(' | ')} | ${total.toFixed(2)} |`;
  };
  return [
    `| the machine's CPU ms per job (${availableParallelism()} cores) | jobs/s | machine busy | ${groups.join(' | ')} | total |`,
    `|---|---|---|${groups.map(() => '---|').join('')}---|`,
    ...rows.flatMap((r) => [
      ...(r.rawCpu ? [line(`C = ${r.clients}, slurmrestd straight`, r.raw, r.rawCpu)] : []),
      line(`C = ${r.clients}, through schedflow`, r.schedflow, r.schedflowCpu),
    ]),
    '',
  ];
}

try {
  log(`the cluster at ${real.url}; the daemons in ${root}; clearing alice's jobs…`);
  await clearJobs();
  const lines: string[] = [];
  const targets: [string, boolean][] = [];
  if (PARTS.has('rates')) {
    const rows = await rates(startHealthProbe);
    lines.push(
      `| held jobs, C concurrent clients (N = ${JOBS}) | slurmrestd jobs/s | schedflow jobs/s | ratio | daemon CPU ms/job | /healthz p99 ms (max) | one Slurm job per request |`,
      '|---|---|---|---|---|---|---|',
      ...rows.map(
        (r) =>
          `| C = ${r.clients} | ${r.raw.toFixed(0)} | ${r.schedflow.toFixed(0)} | ${(r.schedflow / r.raw).toFixed(2)} | ${r.cpuMsPerJob.toFixed(2)} | ${r.healthP99.toFixed(0)} (${r.healthMax.toFixed(0)}) | ${r.one.what} |`,
      ),
      '',
      ...machineCpuTable(rows),
    );
    for (const r of rows) {
      if (RAW && r.clients >= 4)
        targets.push([`C = ${r.clients}: schedflow ≥ 0.8 × slurmrestd`, r.schedflow >= 0.8 * r.raw]);
      targets.push([`C = ${r.clients}: daemon CPU ≤ 1 ms per job`, r.cpuMsPerJob <= 1]);
      targets.push([`C = ${r.clients}: exactly one Slurm job per request`, r.one.ok]);
      targets.push([`C = ${r.clients}: /healthz p99 ≤ 100 ms`, r.healthP99 <= 100]);
    }
  }
  if (PARTS.has('profile')) {
    const { byPhase, cpuMsPerJob } = await profileRun();
    lines.push(
      `| daemon CPU by phase (a profiled run: ${PROFILE_JOBS} jobs, C = 16, ${cpuMsPerJob.toFixed(2)} ms/job under the profiler; the profile: ${PROFILE_COPY}) | share | ms per job |`,
      '|---|---|---|',
      ...PHASES.map(
        (p) =>
          `| ${p.label} | ${(byPhase.share[p.name] * 100).toFixed(0)} % | ${(byPhase.share[p.name] * cpuMsPerJob).toFixed(2)} |`,
      ),
      '',
      'where each phase spends (its heaviest functions, self time):',
      ...byPhase.top.map((t) => `  ${t.phase.padEnd(10)} ${(t.share * 100).toFixed(1).padStart(5)} %  ${t.frame}`),
      '',
    );
  }
  if (PARTS.has('bucket')) {
    const b = await bucketRun();
    lines.push(
      `| behind a token bucket of ${BUCKET_RATE}/s (${BUCKET_JOBS} jobs in a burst) | value |`,
      '|---|---|',
      `| submissions per second in the burst | ${b.submitsPerSec.toFixed(1)} (${(b.used * 100).toFixed(0)} % of R) |`,
      `| answers 429 | ${b.status429} |`,
      `| poll cycles meanwhile | ${b.pollCycles} |`,
      `| the burst, accepted to every job id | ${b.seconds.toFixed(1)} s |`,
      '',
    );
    targets.push([`token bucket: submissions ≥ 90 % of R`, b.used >= 0.9]);
    targets.push(['token bucket: 0 answers 429', b.status429 === 0]);
    targets.push(['token bucket: polling went on', b.pollCycles > 0]);
  }
  if (PARTS.has('ends')) {
    const e = await endsRun();
    lines.push(
      `${ENDS} held jobs cancelled at once (one DELETE /slurm/v0.0.44/jobs/ for alice's, ${e.cancelSec.toFixed(1)} s): ${e.recorded} ends recorded ${e.seconds.toFixed(1)} s after the last ended, ${(e.seconds / e.intervalSec).toFixed(1)} poll intervals (${e.intervalSec.toFixed(1)} s)`,
      `while the ${ENDS} jobs waited held: ${e.idleCpuPerCycleMs.toFixed(0)} ms of daemon CPU per poll cycle`,
      e.slurmdbdSec === null
        ? 'when slurmdbd had written the last end: unknown (its database could not be read)'
        : `slurmdbd had written the last end ${Math.max(0, e.slurmdbdSec).toFixed(0)} to ${(e.slurmdbdSec + 1).toFixed(0)} s after the last ended (its job table's mod_time): accounting, which has an end's times, can have none sooner`,
      '| poll cycle after the cancel | started (s after the last end) | upstream requests | by kind |',
      '|---|---|---|---|',
      ...e.cycles.map(
        (c, i) =>
          `| ${i + 1} | ${c.startSec.toFixed(1)} | ${c.requests} | ${Object.entries(c.byEndpoint)
            .filter(([, n]) => n > 0)
            .map(([k, n]) => `${k} ${n}`)
            .join(', ')} |`,
      ),
      '',
    );
    targets.push([
      `${ENDS} ends recorded within two poll intervals`,
      e.recorded === ENDS && e.seconds <= 2 * e.intervalSec,
    ]);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  for (const [what, ok] of targets) process.stdout.write(`${ok ? 'met   ' : 'MISSED'}  ${what}\n`);
} finally {
  // BENCH_SLURM_KEEP=1 keeps the daemons' data dirs and logs (their path is in the first line).
  cleanupAll(process.env.BENCH_SLURM_KEEP === '1');
}
