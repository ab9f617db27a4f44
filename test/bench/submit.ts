/**
 * npm run bench:submit — what a submission costs the daemon end to end (POST /api/v1/jobs
 * accepted → the Slurm job id in the history), what the local API serves on a history of
 * that many requests, and whether the daemon's memory comes back afterwards.
 *
 * The daemon runs as it does for users (`dist/src/cli.js start`, its private Redis) against
 * the simulator in benchmark mode (no scripts run) in a process of its own. CPU and RSS are
 * the daemon process's own, read from /proc; the harness reads the history file itself, so
 * its checks cost the daemon nothing.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { DaemonUnderTest } from '../chaos/daemon.js';
import { cleanupAll, cleanupOnExit, sleep, trackDir } from '../chaos/processes.js';
import { SimUpstream } from '../chaos/upstream.js';

const JOBS = Number(process.env.BENCH_SUBMIT_JOBS ?? 10_000);
const READS = Number(process.env.BENCH_API_READS ?? 2_000);
const CLIENTS = 32;
const SETTLE_SEC = Number(process.env.BENCH_SETTLE_SEC ?? 180);
const TICKS_PER_SEC = 100; // USER_HZ on Linux

/** The daemon's CPU seconds so far (user + system) and its resident memory, from /proc. */
function usage(pid: number): { cpuSec: number; rssMb: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  return { cpuSec: ticks / TICKS_PER_SEC, rssMb: rssKb / 1024 };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

interface Load {
  count: number;
  seconds: number;
  p50: number;
  p99: number;
  errors: number;
}

/** `count` calls of `call`, `CLIENTS` at a time; latency of each in ms. */
async function load(count: number, call: (i: number) => Promise<boolean>): Promise<Load> {
  const latencies: number[] = [];
  let next = 0;
  let errors = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < count) {
        const i = next++;
        const t = performance.now();
        const ok = await call(i).catch(() => false);
        latencies.push(performance.now() - t);
        if (!ok) errors++;
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  return {
    count,
    seconds: (performance.now() - started) / 1000,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    errors,
  };
}

/** The longest /healthz answer while `work` runs, asked every 50 ms. */
async function healthWhile<T>(apiUrl: string, work: Promise<T>): Promise<{ result: T; worstMs: number }> {
  let worstMs = 0;
  let done = false;
  const watcher = (async () => {
    while (!done) {
      const t = performance.now();
      await fetch(`${apiUrl}/healthz`).catch(() => undefined);
      worstMs = Math.max(worstMs, performance.now() - t);
      await sleep(50);
    }
  })();
  const result = await work;
  done = true;
  await watcher;
  return { result, worstMs };
}

cleanupOnExit();
const root = trackDir(mkdtempSync(join(tmpdir(), 'schedflow-bench-submit-')));
try {
  const sim = await SimUpstream.start(join(root, 'sim-dir'), { capacity: 1_000_000, refillPerSecond: 1_000_000 }, [
    ...['--cpus', String(JOBS + 10), '--memory-mb', String((JOBS + 10) * 1024)],
    ...['--simulated-runtime', '5'],
  ]);
  const daemon = new DaemonUnderTest(join(root, 'daemon'), {
    schedulerUrl: sim.url,
    logLevel: 'info',
    profile: {
      url: sim.url,
      auth: { type: 'bearer', tokenFile: join(root, 'daemon', 'config', 'alice.token') },
      account: 'lab',
      version: 'v0.0.44',
      // The proxy's limit, never schedflow's, should bound submissions: none here.
      rateLimit: { capacity: 1000, refillPerSecond: 1000 },
    },
  });
  await daemon.setup();
  await daemon.start();
  const pid = daemon.proc?.child.pid as number;
  const history = new Database(join(daemon.dataDir, 'history.sqlite'), { readonly: true, fileMustExist: true });
  const unsubmitted = history.prepare('select count(*) as n from job_requests where job_id is null');
  const headers = { authorization: `Bearer ${daemon.apiToken}`, 'content-type': 'application/json' };

  await sleep(3000);
  const idle = usage(pid);
  process.stderr.write(`bench:submit: idle RSS ${idle.rssMb.toFixed(0)} MB; submitting ${JOBS} jobs…\n`);

  // Accept → job id recorded, for every job: the daemon's CPU over the whole span, per job.
  const ids: string[] = [];
  const before = usage(pid);
  const submitStarted = performance.now();
  const { result: posts, worstMs: healthDuringSubmit } = await healthWhile(
    daemon.apiUrl,
    (async () => {
      const posts = await load(JOBS, async (i) => {
        const res = await fetch(`${daemon.apiUrl}/api/v1/jobs`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ spec: { name: `bench-${i}`, script: '#!/bin/sh\ntrue\n' } }),
        });
        const body = (await res.json()) as { id?: string };
        if (body.id) ids.push(body.id);
        return res.status === 201;
      });
      for (;;) {
        const { n } = unsubmitted.get() as { n: number };
        if (n === 0) break;
        await sleep(100);
      }
      return posts;
    })(),
  );
  const submitSec = (performance.now() - submitStarted) / 1000;
  const afterSubmit = usage(pid);
  const cpuMsPerJob = ((afterSubmit.cpuSec - before.cpuSec) * 1000) / JOBS;

  // Reads on a history of JOBS requests: the list's first page, and one request each.
  const { result: reads, worstMs: healthDuringReads } = await healthWhile(
    daemon.apiUrl,
    (async () => {
      const list = await load(READS, async () => (await fetch(`${daemon.apiUrl}/api/v1/jobs`, { headers })).ok);
      const one = await load(READS, async (i) => {
        const res = await fetch(`${daemon.apiUrl}/api/v1/jobs/${ids[(i * 7919) % ids.length]}`, { headers });
        await res.arrayBuffer();
        return res.ok;
      });
      return { list, one };
    })(),
  );
  const afterReads = usage(pid);

  process.stderr.write(`bench:submit: waiting ${SETTLE_SEC} s for memory to settle…\n`);
  await sleep(SETTLE_SEC * 1000);
  const settled = usage(pid);
  history.close();
  await daemon.stop();

  const row = (what: string, l: Load) =>
    `| ${what} | ${l.count} | ${(l.count / l.seconds).toFixed(0)}/s | ${l.p50.toFixed(1)} | ${l.p99.toFixed(1)} | ${l.errors} |`;
  process.stdout.write(
    [
      `| submission, end to end (${JOBS} jobs, ${CLIENTS} clients) | value |`,
      '|---|---|',
      `| daemon CPU per job (accept → job id recorded) | ${cpuMsPerJob.toFixed(2)} ms |`,
      `| jobs per second, end to end | ${(JOBS / submitSec).toFixed(0)} |`,
      `| slowest /healthz while submitting | ${healthDuringSubmit.toFixed(0)} ms |`,
      `| slowest /healthz while reading | ${healthDuringReads.toFixed(0)} ms |`,
      `| RSS idle → after submissions → after reads → ${SETTLE_SEC} s later | ${idle.rssMb.toFixed(0)} → ${afterSubmit.rssMb.toFixed(0)} → ${afterReads.rssMb.toFixed(0)} → ${settled.rssMb.toFixed(0)} MB |`,
      '',
      `| local API on a history of ${JOBS} requests | calls | throughput | p50 ms | p99 ms | errors |`,
      '|---|---|---|---|---|---|',
      row('POST /api/v1/jobs', posts),
      row('GET /api/v1/jobs (first page)', reads.list),
      row('GET /api/v1/jobs/{id}', reads.one),
      '',
    ].join('\n'),
  );
  const targets: [string, boolean][] = [
    ['submission < 2 ms of daemon CPU per job', cpuMsPerJob < 2],
    ['/healthz within 100 ms throughout', Math.max(healthDuringSubmit, healthDuringReads) <= 100],
    [`RSS back within 50 MB of idle ${SETTLE_SEC} s after the load`, settled.rssMb - idle.rssMb <= 50],
  ];
  for (const [what, ok] of targets) process.stdout.write(`${ok ? 'met   ' : 'MISSED'}  ${what}\n`);
} finally {
  cleanupAll();
}
