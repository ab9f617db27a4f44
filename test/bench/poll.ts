/**
 * npm run bench:poll — what following N tracked jobs costs, schedflow's poller
 * against a per-job polling baseline (one GET /job/{id} per job per cycle),
 * both in this process, against the simulator running in a child process.
 *
 * Figures per cycle: upstream requests, CPU ms of this process, RSS, and the
 * delay from a state change in the scheduler to its record in the history.
 *
 * Then one array job of BENCH_ARRAY_TASKS tasks (1,000; 0 skips it), run in waves by its `%`
 * throttle, followed from submission to its end: every cycle's upstream requests (at most two,
 * whatever the number of tasks), CPU ms, and every task recorded completed with its job id.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { tasksOf } from '../../src/db/array-tasks.js';
import { openDatabase } from '../../src/db/database.js';
import type { History } from '../../src/db/history.js';
import { createRequest, getRequest, trackedRequests } from '../../src/db/requests.js';
import { recordRequest } from '../../src/requests/accept.js';
import { applyJob, pollProfile } from '../../src/requests/poller.js';
import { transition } from '../../src/requests/transition.js';
import { SchedClient } from '../../src/sched/client.js';
import { jobSpecSchema } from '../../src/sched/job-spec.js';
import { sleep } from '../chaos/processes.js';
import {
  BENCH_TOKEN,
  benchProfile,
  CACHE_TTL_SEC,
  simJob,
  startBenchSim,
  UNBOUNDED,
  upstreamTotals,
} from './bench-sim.js';

const SIZES = (process.env.BENCH_SIZES ?? '10,1000,10000').split(',').map(Number);
const ARRAY_TASKS = Number(process.env.BENCH_ARRAY_TASKS ?? 1000);
/** The array's throttle: its tasks run in waves of this many, so cycles see starts and ends. */
const ARRAY_THROTTLE = 250;
/**
 * Writes N pending jobs into the simulator's saved job table before it starts
 * (it runs them at once, in benchmark mode), so this process's memory is not
 * inflated by thousands of submissions the poller never makes.
 */
function seedSimulator(dir: string, n: number): number[] {
  const now = Math.floor(Date.now() / 1000);
  const jobs = Array.from({ length: n }, (_, i) =>
    simJob(1000 + i, { comment: `schedflow:bench-${i}`, submitTime: now, eligibleTime: now, lastUpdate: now }),
  );
  mkdirSync(join(dir, 'sim'), { recursive: true });
  writeFileSync(join(dir, 'sim', 'jobs.json'), JSON.stringify({ version: 1, nextJobId: 1000 + n, jobs }));
  return jobs.map((j) => j.jobId);
}

async function seedHistory(store: History, jobIds: number[]): Promise<void> {
  const now = Date.now();
  for (const [i, jobId] of jobIds.entries()) {
    const id = `bench-${i}`;
    await createRequest(store, {
      id,
      profile: 'bench',
      name: 'bench',
      spec: {},
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at: now,
      source: 'api',
    });
    await transition(store, id, {
      to: 'submitted',
      source: 'submit',
      at: now,
      patch: { jobId, submittedAt: now - 10_000 },
    });
  }
}

interface Figures {
  requestsPerCycle: number;
  cpuMsPerCycle: number;
  rssMb: number;
  delayMs: number;
}

/** Cycles measured at each size, after a cold one. */
const MEASURED_CYCLES = 5;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Runs cycles at the cache lifetime, measuring requests and CPU (the median cycle); then the delay of one cancellation. */
async function measure(
  url: string,
  store: History,
  cycle: () => Promise<void>,
  requestId: string,
  jobId: number,
): Promise<Figures> {
  await cycle(); // cold: everything moves to running
  // The median of several cycles: the mean of two moved by ±15 % from run to run (a GC, the
  // simulator's work landing in one cycle or the next).
  const requests: number[] = [];
  const cpuMs: number[] = [];
  for (let i = 0; i < MEASURED_CYCLES; i++) {
    await sleep(CACHE_TTL_SEC * 1000);
    const before = (await upstreamTotals(url)).requests;
    const cpu = process.cpuUsage();
    await cycle();
    const used = process.cpuUsage(cpu);
    cpuMs.push((used.user + used.system) / 1000);
    requests.push((await upstreamTotals(url)).requests - before);
  }
  // Collect what the measured cycles left behind, so RSS is what polling holds on to.
  (globalThis as { gc?: () => void }).gc?.();
  const rssMb = process.memoryUsage().rss / 1024 / 1024;
  const changedAt = Date.now();
  await fetch(`${url}/sched/v0.0.44/job/${jobId}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${BENCH_TOKEN}` },
  });
  // Poll at the interval the cache lifetime sets, until the history has the change.
  for (;;) {
    await cycle();
    if ((await getRequest(store, requestId))?.state === 'cancelled') break;
    await sleep(CACHE_TTL_SEC * 1000);
  }
  return { requestsPerCycle: median(requests), cpuMsPerCycle: median(cpuMs), rssMb, delayMs: Date.now() - changedAt };
}

async function benchSize(n: number): Promise<{ n: number; schedflow: Figures; perJob: Figures }> {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-bench-'));
  const jobIds = seedSimulator(dir, n);
  const { url, child } = await startBenchSim(dir, { jobs: n, runtimeSec: 3600 });
  try {
    const logger = pino({ level: 'silent' });
    const profile = benchProfile(url, UNBOUNDED);
    const client = await SchedClient.connect(profile, { logger, env: { BENCH_TOKEN } });

    const ours = openDatabase(join(dir, 'ours.sqlite'));
    await seedHistory(ours.store, jobIds);
    const settings = { lostGraceMs: 300_000 };
    const schedflow = await measure(
      url,
      ours.store,
      async () => {
        await pollProfile({ store: ours.store, client, logger, settings }, 'bench');
      },
      'bench-0',
      jobIds[0] as number,
    );

    const theirs = openDatabase(join(dir, 'baseline.sqlite'));
    await seedHistory(theirs.store, jobIds);
    const perJob = await measure(
      url,
      theirs.store,
      async () => {
        const rows = await trackedRequests(theirs.store, 'bench');
        // As some agents do: one GET /job/{id} per tracked job, 16 at a time.
        for (let i = 0; i < rows.length; i += 16) {
          await Promise.all(
            rows.slice(i, i + 16).map(async (row) => {
              const read = await client.getJob(row.jobId as number, { forPolling: true });
              await applyJob(theirs.store, row, read.data, 'poll', read.freshness);
            }),
          );
        }
      },
      'bench-1',
      jobIds[1] as number,
    );
    await client.close();
    ours.close();
    theirs.close();
    return { n, schedflow, perJob };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

interface ArrayFigures {
  tasks: number;
  cycles: number;
  maxRequestsPerCycle: number;
  meanRequestsPerCycle: number;
  meanCpuMsPerCycle: number;
  maxCpuMsPerCycle: number;
  rssMb: number;
  /** From submission to the request's end in the history. */
  followedMs: number;
  tasksCompleted: number;
}

/**
 * One array of `n` tasks submitted to the simulator (each task runs 3 s, `ARRAY_THROTTLE` at a
 * time), polled at the cache lifetime until its request ends.
 */
async function benchArray(n: number): Promise<ArrayFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-bench-array-'));
  mkdirSync(join(dir, 'sim'), { recursive: true });
  const { url, child } = await startBenchSim(dir, { jobs: ARRAY_THROTTLE, runtimeSec: 3 });
  try {
    const logger = pino({ level: 'silent' });
    const client = await SchedClient.connect(benchProfile(url, UNBOUNDED), { logger, env: { BENCH_TOKEN } });
    const history = openDatabase(join(dir, 'array.sqlite'));
    const spec = jobSpecSchema.parse({
      name: 'bench-array',
      script: '#!/bin/sh\ntrue\n',
      array: `0-${n - 1}%${ARRAY_THROTTLE}`,
    });
    const at = Date.now();
    await recordRequest(history.store, {
      id: 'array',
      profile: 'bench',
      name: spec.name,
      spec,
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at,
      source: 'api',
    });
    const submitted = await client.submit(spec, 'array');
    await transition(history.store, 'array', {
      to: 'submitted',
      source: 'submit',
      at,
      patch: { jobId: submitted.job_id, submittedAt: at },
    });
    const settings = { lostGraceMs: 300_000 };
    const requests: number[] = [];
    const cpuMs: number[] = [];
    let rssMb = 0;
    while (!['completed', 'failed'].includes((await getRequest(history.store, 'array'))?.state ?? '')) {
      if (Date.now() - at > 600_000) throw new Error('the array did not end in 10 minutes');
      const cpu = process.cpuUsage();
      const report = await pollProfile({ store: history.store, client, logger, settings }, 'bench');
      const used = process.cpuUsage(cpu);
      requests.push(report.requests);
      cpuMs.push((used.user + used.system) / 1000);
      rssMb = Math.max(rssMb, process.memoryUsage().rss / 1024 / 1024);
      await sleep(CACHE_TTL_SEC * 1000);
    }
    const followedMs = Date.now() - at;
    const tasks = await tasksOf(history.store, 'array');
    await client.close();
    history.close();
    const sum = (xs: number[]) => xs.reduce((s, x) => s + x, 0);
    return {
      tasks: n,
      cycles: requests.length,
      maxRequestsPerCycle: Math.max(...requests),
      meanRequestsPerCycle: sum(requests) / requests.length,
      meanCpuMsPerCycle: sum(cpuMs) / cpuMs.length,
      maxCpuMsPerCycle: Math.max(...cpuMs),
      rssMb,
      followedMs,
      tasksCompleted: tasks.filter((task) => task.state === 'completed' && task.jobId !== null).length,
    };
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

function ratio(a: number, b: number): string {
  if (a === 0) return b === 0 ? '1.0x' : '∞';
  return `${(b / a).toFixed(1)}x`;
}

type Result = Awaited<ReturnType<typeof benchSize>>;

/** Each size runs in its own process, so RSS reflects that size alone. */
function runChild(n: number, mode = '--size'): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      // --expose-gc: the RSS read after the cycles follows a full collection (measure() asks for one).
      ['--expose-gc', '--import', import.meta.resolve('tsx'), fileURLToPath(import.meta.url), mode, String(n)],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.once('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out) as Result) : reject(new Error(`bench for ${n} jobs exited ${code}`)),
    );
  });
}

const sizeArg = process.argv.indexOf('--size');
const arrayArg = process.argv.indexOf('--array');
if (sizeArg > 0) {
  process.stdout.write(JSON.stringify(await benchSize(Number(process.argv[sizeArg + 1]))));
} else if (arrayArg > 0) {
  process.stdout.write(JSON.stringify(await benchArray(Number(process.argv[arrayArg + 1]))));
} else {
  const results: Result[] = [];
  for (const n of SIZES) {
    process.stderr.write(`bench:poll: ${n} tracked jobs…\n`);
    results.push(await runChild(n));
  }
  const rows = results.map(({ n, schedflow: s, perJob: p }) => [
    String(n),
    `${s.requestsPerCycle.toFixed(1)} | ${p.requestsPerCycle.toFixed(0)} | ${ratio(s.requestsPerCycle, p.requestsPerCycle)}`,
    `${s.cpuMsPerCycle.toFixed(1)} | ${p.cpuMsPerCycle.toFixed(1)} | ${ratio(s.cpuMsPerCycle, p.cpuMsPerCycle)}`,
    `${s.rssMb.toFixed(0)} | ${p.rssMb.toFixed(0)}`,
    `${s.delayMs} | ${p.delayMs} | ${ratio(s.delayMs, p.delayMs)}`,
  ]);
  const header = [
    'tracked jobs',
    'requests/cycle (schedflow | per-job | ratio)',
    'CPU ms/cycle (schedflow | per-job | ratio)',
    'RSS MB (after schedflow | after per-job)',
    'change→history ms (schedflow | per-job | ratio)',
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  process.stdout.write(`${line(header)}\n${rows.map(line).join('\n')}\n\n`);
  const largest = results.at(-1);
  if (largest) {
    const targets: [string, boolean][] = [
      // jobs/state names the jobs, one request per chunk of ids that fits a URL (500 ids of 4 digits,
      // 461 of 5): never every job of the controller.
      [
        'requests per cycle: one per 500 tracked jobs (≤ ⌈n / 461⌉ + 1)',
        results.every((r) => r.schedflow.requestsPerCycle <= Math.ceil(r.n / 461) + 1),
      ],
      [`CPU per cycle < 250 ms at ${largest.n} jobs`, largest.schedflow.cpuMsPerCycle < 250],
      [`RSS < 200 MB at ${largest.n} jobs`, largest.schedflow.rssMb < 200],
      [
        `change→history ≤ cache lifetime + one interval (${2 * CACHE_TTL_SEC} s)`,
        results.every((r) => r.schedflow.delayMs <= 2 * CACHE_TTL_SEC * 1000 + 500),
      ],
    ];
    for (const [what, ok] of targets) process.stdout.write(`${ok ? 'met   ' : 'MISSED'}  ${what}\n`);
  }
  if (ARRAY_TASKS > 0) {
    process.stderr.write(`bench:poll: an array of ${ARRAY_TASKS} tasks…\n`);
    const a = (await runChild(ARRAY_TASKS, '--array')) as unknown as ArrayFigures;
    process.stdout.write(
      [
        '',
        `array of ${a.tasks} tasks (%${ARRAY_THROTTLE}, 3 s each): followed to its end in ${(a.followedMs / 1000).toFixed(1)} s, ${a.cycles} cycles`,
        `  requests/cycle: max ${a.maxRequestsPerCycle}, mean ${a.meanRequestsPerCycle.toFixed(2)}; CPU ms/cycle: mean ${a.meanCpuMsPerCycle.toFixed(1)}, max ${a.maxCpuMsPerCycle.toFixed(1)}; RSS ${a.rssMb.toFixed(0)} MB`,
        `${a.maxRequestsPerCycle <= 2 ? 'met   ' : 'MISSED'}  array: at most two upstream requests every cycle`,
        `${a.tasksCompleted === a.tasks ? 'met   ' : 'MISSED'}  array: every task recorded completed, with its job id (${a.tasksCompleted} of ${a.tasks})`,
        '',
      ].join('\n'),
    );
  }
}
