import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';

/**
 * Every process and temp dir the chaos run makes, so that one cleanup removes them all: at
 * the end, on an error, and on Ctrl-C. Children are started in their own process groups
 * (detached), so a terminal's Ctrl-C reaches the harness alone and the harness decides what
 * each child gets; the cleanup then kills each group, which takes a daemon's private
 * redis-server with it. Pids the harness did not spawn but is responsible for (a private
 * redis-server left by a killed daemon) are registered by pid.
 */
const groups = new Set<number>();
const extraPids = new Set<number>();
const dirs = new Set<string>();

export interface Spawned {
  child: ChildProcess;
  pid: number;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  alive(): boolean;
}

export function spawnTracked(command: string, args: string[], options: SpawnOptions): Spawned {
  const child = spawn(command, args, { ...options, detached: true });
  if (child.pid === undefined) throw new Error(`could not start ${command}`);
  const pid = child.pid;
  groups.add(pid);
  let done = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) => {
    child.once('exit', (code, signal) => {
      done = true;
      resolve({ code, signal, at: Date.now() });
    });
  });
  return { child, pid, exited, alive: () => !done };
}

/** A pid to kill at cleanup (one this run caused to exist but did not spawn itself). */
export function trackPid(pid: number): void {
  if (Number.isInteger(pid) && pid > 0) extraPids.add(pid);
}

export function trackDir(dir: string): string {
  dirs.add(dir);
  return dir;
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** SIGKILL to every process group and pid, then the temp dirs; safe to call twice. */
export function cleanupAll(keepDirs = false): void {
  for (const pgid of groups) killQuietly(-pgid);
  for (const pid of extraPids) killQuietly(pid);
  groups.clear();
  extraPids.clear();
  if (!keepDirs) for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  dirs.clear();
}

/** Cleans up on the ways a run can end early: Ctrl-C, SIGTERM, an uncaught error. */
export function cleanupOnExit(): void {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      process.stderr.write(`\nchaos: ${signal}: killing every child process and removing temp dirs\n`);
      cleanupAll();
      process.exit(130);
    });
  }
  process.once('exit', () => cleanupAll());
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `check` until it returns something other than undefined, or the deadline passes (undefined). */
export async function pollUntil<T>(
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs: number,
  intervalMs = 200,
): Promise<T | undefined> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch {
      // not yet
    }
    if (Date.now() >= end) return undefined;
    await sleep(intervalMs);
  }
}
