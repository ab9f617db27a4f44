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
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { DaemonUnderTest } from '../chaos/daemon.js';
import { cleanupAll, cleanupOnExit, sleep, trackDir } from '../chaos/processes.js';
import { SimUpstream } from '../chaos/upstream.js';
import { daemonSettings, healthWhile, type Load, load, scrape, startHealthProbe, usage } from './daemon-probe.js';

const JOBS = Number(process.env.BENCH_SUBMIT_JOBS ?? 10_000);
const READS = Number(process.env.BENCH_API_READS ?? 2_000);
const BURST = Number(process.env.BENCH_BURST_JOBS ?? 1_000);
const CLIENTS = 32;
const SETTLE_SEC = Number(process.env.BENCH_SETTLE_SEC ?? 180);
/**
 * How long each job runs in the simulator: longer than the submissions take, so that their
 * CPU is what a submission costs (accept → job id recorded) and the ends, recorded after, are
 * measured on their own.
 */
const RUNTIME_SEC = Number(process.env.BENCH_JOB_RUNTIME_SEC ?? 60);

interface Phase {
  what: string;
  seconds: number;
  cpuSec: number;
  healthMs: number;
  blockMs: number;
  rssMb: number;
  heapMb: number;
}

cleanupOnExit();
const root = trackDir(mkdtempSync(join(tmpdir(), 'schedflow-bench-submit-')));
try {
  mkdirSync(join(root, 'sim-dir'));
  const sim = await SimUpstream.start(join(root, 'sim-dir'), { capacity: 1_000_000, refillPerSecond: 1_000_000 }, [
    ...['--cpus', String(JOBS + 10), '--memory-mb', String((JOBS + 10) * 1024)],
    ...['--simulated-runtime', String(RUNTIME_SEC)],
  ]);
  const daemon = new DaemonUnderTest(join(root, 'daemon'), {
    schedulerUrl: sim.url,
    logLevel: process.env.BENCH_DAEMON_LOG_LEVEL === 'debug' ? 'debug' : 'info',
    // BENCH_DAEMON_NODE_ARGS='--cpu-prof --heapsnapshot-signal=SIGUSR2' profiles the daemon.
    nodeArgs: process.env.BENCH_DAEMON_NODE_ARGS?.split(' ').filter(Boolean),
    // Poll floor, reconcile every minute and lock as a deployment has them, not a chaos trial's.
    userTimings: true,
    // BENCH_SCHEDFLOW_SUBMIT_CONCURRENCY=16 (say) runs the daemon with SCHEDFLOW_SUBMIT_CONCURRENCY=16.
    settings: daemonSettings(),
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
  const submitted = history.prepare('select count(*) as n from job_requests where job_id is not null');
  const ended = history.prepare(
    "select count(*) as n from job_requests where state = 'completed' and exit_code is not null and ended_at is not null",
  );
  const headers = { authorization: `Bearer ${daemon.apiToken}`, 'content-type': 'application/json' };

  await sleep(3000);
  const idle = usage(pid);
  const idleScrape = await scrape(daemon.apiUrl);
  const idleHeap = idleScrape.heapMb;
  process.stderr.write(`bench:submit: idle RSS ${idle.rssMb.toFixed(0)} MB; submitting ${JOBS} jobs…\n`);
  const post = async (name: string) => {
    const res = await fetch(`${daemon.apiUrl}/api/v1/jobs`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ spec: { name, script: '#!/bin/sh\ntrue\n' } }),
    });
    const body = (await res.json()) as { id?: string };
    if (body.id) ids.push(body.id);
    return res.status === 201;
  };
  const probe = await startHealthProbe(daemon.apiUrl);
  const phases: Phase[] = [];
  /** Runs `work` as a phase: the daemon's CPU, /healthz, longest block, RSS and heap after it. */
  const phase = async <T>(what: string, work: () => Promise<T>): Promise<T> => {
    await scrape(daemon.apiUrl);
    const before = usage(pid);
    const started = performance.now();
    const { result, worstMs } = await healthWhile(probe, work());
    const after = usage(pid);
    const { blockMs, heapMb } = await scrape(daemon.apiUrl);
    phases.push({
      what,
      seconds: (performance.now() - started) / 1000,
      cpuSec: after.cpuSec - before.cpuSec,
      healthMs: worstMs,
      blockMs,
      rssMb: after.rssMb,
      heapMb,
    });
    return result;
  };
  const waitUntil = async (query: Database.Statement, want: number) => {
    for (;;) {
      const { n } = query.get() as { n: number };
      if (n >= want) return;
      await sleep(100);
    }
  };

  // Accept → job id recorded, for every job: the daemon's CPU over the whole span, per job. The
  // poller, reconcile and the rest of the daemon's schedule run meanwhile, as they do.
  const ids: string[] = [];
  const posts = await phase(`${JOBS} submissions`, async () => {
    const result = await load(JOBS, CLIENTS, (i) => post(`bench-${i}`));
    await waitUntil(submitted, JOBS);
    return result;
  });
  const cpuMsPerJob = ((phases[0]?.cpuSec ?? 0) * 1000) / JOBS;
  // Ends recorded while submissions went on are in their figure: said, not hidden.
  const endedEarly = (ended.get() as { n: number }).n;
  await phase(`every end of the ${JOBS} recorded`, () => waitUntil(ended, JOBS));
  const cpuMsPerEnd = ((phases[1]?.cpuSec ?? 0) * 1000) / JOBS;

  // Reads on a history of JOBS requests: the list's first page, and one request each.
  const reads = await phase(`${READS * 2} API reads`, async () => {
    const list = await load(READS, CLIENTS, async () => (await fetch(`${daemon.apiUrl}/api/v1/jobs`, { headers })).ok);
    const one = await load(READS, CLIENTS, async (i) => {
      const res = await fetch(`${daemon.apiUrl}/api/v1/jobs/${ids[(i * 7919) % ids.length]}`, { headers });
      await res.arrayBuffer();
      return res.ok;
    });
    return { list, one };
  });

  // A burst like a 1,000-task array: a thousand jobs that start together and end together.
  await phase(`${BURST} jobs at once, to every end recorded`, async () => {
    await load(BURST, CLIENTS, (i) => post(`burst-${i}`));
    await waitUntil(ended, JOBS + BURST);
  });

  process.stderr.write(`bench:submit: waiting ${SETTLE_SEC} s for memory to settle…\n`);
  await sleep(SETTLE_SEC * 1000);
  const settled = usage(pid);
  const settledScrape = await scrape(daemon.apiUrl);
  const settledHeap = settledScrape.heapMb;
  history.close();
  await daemon.stop();

  const row = (what: string, l: Load) =>
    `| ${what} | ${l.count} | ${(l.count / l.seconds).toFixed(0)}/s | ${l.p50.toFixed(1)} | ${l.p99.toFixed(1)} | ${l.errors} |`;
  process.stdout.write(
    [
      `| phase (the daemon as users run it) | seconds | daemon CPU s | slowest /healthz ms | longest block ms | RSS after MB | heap after MB |`,
      '|---|---|---|---|---|---|---|',
      `| idle | | | | | ${idle.rssMb.toFixed(0)} | ${idleHeap.toFixed(0)} |`,
      ...phases.map(
        (p) =>
          `| ${p.what} | ${p.seconds.toFixed(1)} | ${p.cpuSec.toFixed(1)} | ${p.healthMs.toFixed(0)} | ${p.blockMs.toFixed(0)} | ${p.rssMb.toFixed(0)} | ${p.heapMb.toFixed(0)} |`,
      ),
      `| ${SETTLE_SEC} s later | | | | | ${settled.rssMb.toFixed(0)} | ${settledHeap.toFixed(0)} |`,
      '',
      `daemon CPU per submission (accept → job id recorded, ${CLIENTS} clients): ${cpuMsPerJob.toFixed(2)} ms` +
        ` (${endedEarly} of the ${JOBS} jobs had ended by then)`,
      `daemon CPU per job while they run ${RUNTIME_SEC} s and end (polls, accounting, reconcile): ${cpuMsPerEnd.toFixed(2)} ms`,
      `daemon memory (MB), idle: ${idleScrape.memory}; ${SETTLE_SEC} s after: ${settledScrape.memory}`,
      '',
      `| local API on a history of ${JOBS} requests | calls | throughput | p50 ms | p99 ms | errors |`,
      '|---|---|---|---|---|---|',
      row('POST /api/v1/jobs', posts),
      row('GET /api/v1/jobs (first page)', reads.list),
      row('GET /api/v1/jobs/{id}', reads.one),
      '',
    ].join('\n'),
  );
  probe.stop();
  const worst = (key: 'healthMs' | 'blockMs') => Math.max(...phases.map((p) => p[key]));
  const targets: [string, boolean][] = [
    ['submission < 2 ms of daemon CPU per job', cpuMsPerJob < 2],
    ['/healthz within 100 ms throughout', worst('healthMs') <= 100],
    ['no event-loop block over 200 ms', worst('blockMs') <= 200],
    [`RSS back within 50 MB of idle ${SETTLE_SEC} s after the load`, settled.rssMb - idle.rssMb <= 50],
  ];
  for (const [what, ok] of targets) process.stdout.write(`${ok ? 'met   ' : 'MISSED'}  ${what}\n`);
} finally {
  cleanupAll();
}
