/**
 * npm run bench:mass-end — what it costs when many tracked jobs start, then end, in one
 * cycle, on an account with a long accounting history (100,000 past records by default).
 *
 * Each case runs in a process of its own (so peak RSS is that case's), against the simulator
 * in a child process, and follows its jobs with schedflow's poller until every end is in the
 * history with accounting's exit code and times. Beside it, in processes of their own, two
 * baselines: one GET /job/{id} per ended job, and one accounting query for every record of
 * the account since the earliest tracked job (what the poller did past 500 ended jobs).
 *
 * Figures: upstream requests and bytes, CPU of this process, peak RSS, the event loop's
 * longest block, and cycles (and seconds) until every end was recorded.
 */
import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { and, eq, isNotNull, type SQL, sql } from 'drizzle-orm';
import { pino } from 'pino';
import { openDatabase } from '../../src/db/database.js';
import type { History } from '../../src/db/history.js';
import { createRequest, trackedRequests } from '../../src/db/requests.js';
import { SchedflowError } from '../../src/errors.js';
import { HeapCollector } from '../../src/lib/heap-collector.js';
import { applyJob, pollProfile } from '../../src/requests/poller.js';
import { transition } from '../../src/requests/transition.js';
import { SchedClient } from '../../src/sched/client.js';
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

const PAST = Number(process.env.BENCH_PAST_RECORDS ?? 100_000);
const MAX_CYCLES = 300;

type Mode = 'schedflow' | 'per-job' | 'fetch-all';

interface Case {
  ends: number;
  /** How long ago the earliest tracked job was submitted (the accounting window's start). */
  earliestAgoSec: number;
}

const CASES: Case[] = (process.env.BENCH_MASS_CASES ?? '500,501,5000,20000,5000@3600').split(',').map((c) => {
  const [ends, ago] = c.split('@');
  return { ends: Number(ends), earliestAgoSec: ago ? Number(ago) : 10 * 86_400 };
});
const MODES: Mode[] = (process.env.BENCH_MASS_MODES ?? 'schedflow,per-job,fetch-all').split(',') as Mode[];

interface Phase {
  peakRssMb: number;
  requests: number;
  bytes: number;
  cpuMs: number;
  maxBlockMs: number;
  cycles: number;
  seconds: number;
  /** At the moment of peak RSS: what V8's heap and external memory held. */
  peakHeapMb: number;
  peakExternalMb: number;
}

interface CaseResult {
  case: Case;
  mode: Mode;
  start: Phase;
  end: Phase & { recorded: number };
  peakRssMb: number;
  rssAfterMb: number;
}

/** A case whose process failed: a baseline that cannot get its answer at all is a finding, not a crash of the bench. */
interface CaseFailure {
  case: Case;
  mode: Mode;
  failed: string;
}

type CaseOutcome = CaseResult | CaseFailure;

const isFailure = (r: CaseOutcome): r is CaseFailure => 'failed' in r;

/**
 * The account's past: PAST completed jobs that ended between 9 days and 2 hours ago, then the
 * case's jobs, pending, which the simulator starts at once and ends together `runtimeSec` later.
 * Written a thousand records at a time: one string of the whole file would stay in this
 * process's RSS and blur the figures.
 */
function seedSimulator(dir: string, c: Case): number[] {
  const now = Math.floor(Date.now() / 1000);
  const span = 9 * 86_400 - 2 * 3600;
  const first = 1000 + PAST;
  mkdirSync(join(dir, 'sim'), { recursive: true });
  const fd = openSync(join(dir, 'sim', 'jobs.json'), 'w');
  writeSync(fd, `{"version":1,"nextJobId":${first + c.ends},"jobs":[`);
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
    const end = now - 9 * 86_400 + Math.floor((i / PAST) * span);
    add(
      simJob(1000 + i, {
        name: `past-${i % 50}`,
        state: 'COMPLETED',
        submitTime: end - 120,
        eligibleTime: end - 120,
        startTime: end - 60,
        endTime: end,
        exitCode: 0,
        nodes: 'node1',
        lastUpdate: end,
      }),
    );
  }
  const tracked: number[] = [];
  for (let i = 0; i < c.ends; i++) {
    const submitted = i === 0 ? now - c.earliestAgoSec : now - 30;
    tracked.push(first + i);
    add(
      simJob(first + i, {
        comment: `schedflow:bench-${i}`,
        submitTime: submitted,
        eligibleTime: submitted,
        lastUpdate: submitted,
      }),
    );
  }
  flush();
  writeSync(fd, ']}');
  closeSync(fd);
  return tracked;
}

function seedHistory(store: History, jobIds: number[], c: Case): Promise<void> {
  const now = Date.now();
  return store.transaction(async (tx) => {
    for (const [i, jobId] of jobIds.entries()) {
      const id = `bench-${i}`;
      const at = i === 0 ? now - c.earliestAgoSec * 1000 : now - 30_000;
      await createRequest(tx, {
        id,
        profile: 'bench',
        name: 'bench',
        spec: {},
        owner: 'default',
        actor: 'test',
        origin: 'api',
        at,
        source: 'api',
      });
      await transition(tx, id, { to: 'submitted', source: 'submit', at, patch: { jobId, submittedAt: at } });
    }
  });
}

/** Runs `cycle` every cache lifetime until `done`, measuring what the cycles cost. */
async function phase(url: string, cycle: () => Promise<void>, done: () => Promise<boolean>): Promise<Phase> {
  const before = await upstreamTotals(url);
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  let peak = process.memoryUsage();
  const sampler = setInterval(() => {
    const now = process.memoryUsage();
    if (now.rss > peak.rss) peak = now;
  }, 20);
  const cpu = process.cpuUsage();
  const started = Date.now();
  let cycles = 0;
  while (cycles < MAX_CYCLES) {
    const cycleStarted = Date.now();
    await cycle();
    cycles++;
    if (await done()) break;
    await sleep(Math.max(0, CACHE_TTL_SEC * 1000 - (Date.now() - cycleStarted)));
  }
  const used = process.cpuUsage(cpu);
  delay.disable();
  clearInterval(sampler);
  const after = await upstreamTotals(url);
  return {
    requests: after.requests - before.requests,
    bytes: after.bytes - before.bytes,
    cpuMs: (used.user + used.system) / 1000,
    maxBlockMs: delay.max / 1e6,
    cycles,
    seconds: (Date.now() - started) / 1000,
    peakRssMb: peak.rss / 1048576,
    peakHeapMb: peak.heapUsed / 1048576,
    peakExternalMb: peak.external / 1048576,
  };
}

async function runCase(c: Case, mode: Mode): Promise<CaseResult> {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-bench-mass-'));
  const jobIds = seedSimulator(dir, c);
  // Long enough for the start to be recorded before anything ends, whatever the mode.
  const runtimeSec = 30 + Math.ceil(c.ends / 500);
  const { url, child } = await startBenchSim(dir, { jobs: c.ends, runtimeSec });
  const simStarted = Date.now();
  let heap: HeapCollector | undefined;
  try {
    const logger = pino({ level: 'silent' });
    // schedflow at the profile's default budget, as users run it; the baselines unbounded, or one
    // request per job would take hours.
    const profile = benchProfile(url, mode === 'schedflow' ? undefined : UNBOUNDED);
    const client = await SchedClient.connect(profile, { logger, env: { BENCH_TOKEN } });
    const history = openDatabase(join(dir, 'history.sqlite'));
    const { store } = history;
    await seedHistory(store, jobIds, c);
    const settings = { lostGraceMs: 3_600_000 };
    const jobRequests = store.t.jobRequests;
    // Counted in SQL: the harness's own checks should not weigh in the cycles' CPU.
    const count = async (where: SQL) =>
      (
        await store.one(
          store.db
            .select({ n: sql<number>`count(*)`.mapWith(Number) })
            .from(jobRequests)
            .where(where),
        )
      )?.n ?? 0;
    const allRunning = async () => (await count(eq(jobRequests.state, 'running'))) === c.ends;
    const recorded = () =>
      count(
        and(
          eq(jobRequests.state, 'completed'),
          isNotNull(jobRequests.exitCode),
          isNotNull(jobRequests.endedAt),
          isNotNull(jobRequests.startedAt),
        ) as SQL,
      );

    // As the poll worker does: a poll the upstream did not answer is tried again at the next tick.
    // The daemon's heap collector beside its poller, as the daemon runs them.
    heap = new HeapCollector(logger);
    const poll = () =>
      pollProfile({ store, client, logger, settings, heap }, 'bench').then(
        () => undefined,
        (error: unknown) => {
          if (!(error instanceof SchedflowError)) throw error;
          process.stderr.write(`poll failed: ${error.message}\n`);
        },
      );
    const perJob = async () => {
      const tracked = await trackedRequests(store, 'bench');
      for (let i = 0; i < tracked.length; i += 16) {
        await Promise.all(
          tracked.slice(i, i + 16).map(async (row) => {
            const read = await client.getJob(row.jobId as number, { forPolling: true });
            await applyJob(store, row, read.data, 'poll', read.freshness);
          }),
        );
      }
    };
    const fetchAll = async () => {
      const tracked = await trackedRequests(store, 'bench');
      if (tracked.length === 0) return;
      const earliest = Math.min(...tracked.map((r) => Math.floor(r.createdAt / 1000)));
      const read = await client.listAccountingJobs(
        { accounts: ['bench'], startTime: earliest - 60 },
        { forPolling: true },
      );
      const byId = new Map(read.data.map((job) => [job.job_id, job]));
      await store.transaction(async (tx) => {
        for (const row of tracked) {
          const job = byId.get(row.jobId as number);
          if (job) await applyJob(tx, row, job, 'accounting', read.freshness);
        }
      });
    };
    const cycle = mode === 'schedflow' ? poll : mode === 'per-job' ? perJob : fetchAll;

    const start = await phase(url, cycle, allRunning);
    const endsAt = simStarted + runtimeSec * 1000;
    await sleep(Math.max(0, endsAt - Date.now()) + 500);
    const end = await phase(url, cycle, async () => (await recorded()) === c.ends);
    const endRecorded = await recorded();
    await client.close();
    history.close();
    (globalThis as { gc?: () => void }).gc?.();
    return {
      case: c,
      mode,
      start,
      end: { ...end, recorded: endRecorded },
      peakRssMb: Math.max(start.peakRssMb, end.peakRssMb),
      rssAfterMb: process.memoryUsage().rss / 1024 / 1024,
    };
  } finally {
    heap?.stop();
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

function runChild(c: Case, mode: Mode): Promise<CaseOutcome> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        '--expose-gc',
        '--import',
        import.meta.resolve('tsx'),
        fileURLToPath(import.meta.url),
        '--case',
        `${c.ends}@${c.earliestAgoSec}`,
        '--mode',
        mode,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      err = (err + chunk.toString()).slice(-4000);
    });
    // 'close', not 'exit': the answer may still be in the pipe when the process has exited.
    child.once('close', (code) => {
      if (code === 0) {
        resolve(JSON.parse(out) as CaseResult);
        return;
      }
      // The first line of the error the case's process died of (its stack follows it).
      const why = /^\w*Error: .*$/m.exec(err)?.[0] ?? `exited ${code}`;
      resolve({ case: c, mode, failed: why });
    });
  });
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

function table(results: CaseOutcome[]): string {
  const header = [
    'case',
    'mode',
    'end: requests',
    'bytes',
    'CPU s',
    'longest block ms',
    'cycles (s) to all ends',
    'ends recorded',
    'peak RSS MB',
    'start: CPU s',
    'start: longest block ms',
  ];
  const caseName = (r: CaseOutcome) =>
    `${r.case.ends} end${r.case.earliestAgoSec < 86_400 ? `, earliest ${r.case.earliestAgoSec / 3600} h ago` : ''}`;
  const rows = results.map((r) =>
    isFailure(r)
      ? [caseName(r), r.mode, `failed: ${r.failed}`]
      : [
          caseName(r),
          r.mode,
          String(r.end.requests),
          mb(r.end.bytes),
          (r.end.cpuMs / 1000).toFixed(2),
          r.end.maxBlockMs.toFixed(0),
          `${r.end.cycles} (${r.end.seconds.toFixed(0)})`,
          `${r.end.recorded}/${r.case.ends}`,
          r.peakRssMb.toFixed(0),
          (r.start.cpuMs / 1000).toFixed(2),
          r.start.maxBlockMs.toFixed(0),
        ],
  );
  // A failure's one cell spans the row: it does not set the width of a column.
  const widths = header.map((h, i) =>
    Math.max(h.length, ...rows.map((row) => (row.length === header.length ? (row[i] ?? '').length : 0))),
  );
  const line = (cells: string[]) => `| ${cells.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

const caseArg = process.argv.indexOf('--case');
if (caseArg > 0) {
  const [ends, ago] = (process.argv[caseArg + 1] ?? '').split('@');
  const mode = process.argv[process.argv.indexOf('--mode') + 1] as Mode;
  process.stdout.write(JSON.stringify(await runCase({ ends: Number(ends), earliestAgoSec: Number(ago) }, mode)));
} else {
  process.stderr.write(`bench:mass-end: an account with ${PAST.toLocaleString('en')} past accounting records\n`);
  const results: CaseOutcome[] = [];
  for (const c of CASES) {
    for (const mode of MODES) {
      process.stderr.write(`bench:mass-end: ${c.ends} ends (earliest ${c.earliestAgoSec} s ago), ${mode}…\n`);
      results.push(await runChild(c, mode));
    }
  }
  process.stdout.write(`${table(results)}\n\n`);
  const ours = results.filter((r) => r.mode === 'schedflow');
  const done = ours.filter((r): r is CaseResult => !isFailure(r));
  const targets: [string, boolean][] = [
    ['schedflow ran every case to its end', done.length === ours.length],
    ['every end recorded with exit code and times', done.every((r) => r.end.recorded === r.case.ends)],
    ['peak RSS ≤ 300 MB in every case', done.every((r) => r.peakRssMb <= 300)],
    [
      'longest event-loop block ≤ 200 ms (start and end) in every case',
      done.every((r) => r.end.maxBlockMs <= 200 && r.start.maxBlockMs <= 200),
    ],
  ];
  for (const [what, ok] of targets) process.stdout.write(`${ok ? 'met   ' : 'MISSED'}  ${what}\n`);
}
