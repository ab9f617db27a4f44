/**
 * What the daemon benchmarks share: the settings a run gives the daemon, the daemon process's
 * CPU and memory from /proc, a /healthz probe in a process of its own, and the daemon's own
 * /metrics figures.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { setPriority } from 'node:os';

/** The daemon settings a run asks for: each BENCH_SCHEDFLOW_X as SCHEDFLOW_X. */
export function daemonSettings(): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (name.startsWith('BENCH_SCHEDFLOW_') && value !== undefined) settings[name.slice('BENCH_'.length)] = value;
  }
  return settings;
}

export const TICKS_PER_SEC = 100; // USER_HZ on Linux

/** A process's CPU seconds so far, user + system, every thread of it, from /proc. */
export function cpuSecOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SEC;
}

/** The daemon's CPU seconds so far (user + system) and its resident memory, from /proc. */
export function usage(pid: number): { cpuSec: number; rssMb: number } {
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  return { cpuSec: cpuSecOf(pid), rssMb: rssKb / 1024 };
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

/**
 * A health probe in a process of its own, as a load balancer or systemd would probe: asked
 * from this process, the answer's time would include this process's own delays while its 32
 * clients load the daemon. It asks every 50 ms and, told `report`, sends every answer's time
 * since the last report.
 */
const PROBE = `
let times = [];
process.on('message', (m) => { if (m === 'report') { process.send(times); times = []; } else process.exit(0); });
process.on('disconnect', () => process.exit(0));
(async () => {
  // The first fetch loads Node's HTTP client and connects: the probe's own start, not the daemon.
  await fetch(process.argv[1] + '/healthz');
  process.send('ready');
  for (;;) {
    const t = performance.now();
    await fetch(process.argv[1] + '/healthz').catch(() => undefined);
    times.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 50));
  }
})();
`;

export interface HealthProbe {
  /** Every /healthz answer's time (ms) since the last report, in order. */
  report(): Promise<number[]>;
  stop(): void;
}

export async function startHealthProbe(apiUrl: string): Promise<HealthProbe> {
  const child = spawn(process.execPath, ['-e', PROBE, apiUrl], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const ready = new Promise((resolve) => child.once('message', resolve));
  // Ahead of the harness's clients, the simulator and Redis for the CPU (where allowed): on 2
  // cores they keep both busy, and a probe waiting for a core is not the daemon answering late.
  try {
    setPriority(child.pid as number, -10);
  } catch {
    // not permitted: measured at the default priority
  }
  await ready;
  return {
    report: () =>
      new Promise((resolve) => {
        child.once('message', (times) => resolve(times as number[]));
        child.send('report');
      }),
    stop: () => {
      if (child.connected) child.send('stop');
    },
  };
}

/** The /healthz answers while `work` runs: the slowest and the 99th percentile. */
export async function healthWhile<T>(
  probe: HealthProbe,
  work: Promise<T>,
): Promise<{ result: T; worstMs: number; p99Ms: number }> {
  await probe.report();
  const result = await work;
  const times = (await probe.report()).sort((a, b) => a - b);
  return { result, worstMs: times.at(-1) ?? 0, p99Ms: percentile(times, 99) };
}

/** The daemon's longest event-loop block since the last scrape, and its memory (its /metrics), in MB. */
export async function scrape(apiUrl: string): Promise<{ blockMs: number; heapMb: number; memory: string }> {
  const text = await (await fetch(`${apiUrl}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  const mb = (kind: string) => value(`schedflow_process_memory_bytes\\{kind="${kind}"\\}`) / 1048576;
  return {
    blockMs: value('schedflow_event_loop_block_max_seconds') * 1000,
    heapMb: mb('heap_used'),
    memory: ['rss', 'heap_total', 'heap_used', 'external'].map((k) => `${k} ${mb(k).toFixed(0)}`).join(', '),
  };
}

export interface Load {
  count: number;
  seconds: number;
  p50: number;
  p99: number;
  errors: number;
}

/** `count` calls of `call` by `clients` concurrent callers: overall time, latencies (ms), failures. */
export async function load(count: number, clients: number, call: (i: number) => Promise<boolean>): Promise<Load> {
  const latencies: number[] = [];
  let next = 0;
  let errors = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
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
