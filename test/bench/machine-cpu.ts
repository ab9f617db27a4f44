import { readdirSync, readFileSync } from 'node:fs';
import { cpuSecOf, TICKS_PER_SEC } from './daemon-probe.js';

/**
 * The machine's CPU during a run, by process: on a machine the cluster shares, a rate is bound
 * by what every process spends per job together, not by the daemon's share alone. Read from
 * /proc: each process's user + system time (every thread of it), and the machine's busy time.
 */
export type CpuGroups = Record<string, number[]>;

export interface CpuSnapshot {
  at: number;
  byGroup: Record<string, number>;
  machineBusySec: number;
}

/** Pids of processes by their command name (`comm`), as slurmctld or mariadbd are found. */
export function pidsNamed(...names: string[]): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (names.includes(readFileSync(`/proc/${entry}/comm`, 'utf8').trim())) pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

/** 0 for a process that is gone (or was never found: the bench's pid -1). */
function cpuSecOrNone(pid: number): number {
  try {
    return cpuSecOf(pid);
  } catch {
    return 0;
  }
}

/** Busy seconds of every core together: all but idle and iowait. */
function machineBusySec(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] as string;
  const ticks = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const total = ticks.reduce((a, b) => a + b, 0);
  return (total - (ticks[3] ?? 0) - (ticks[4] ?? 0)) / TICKS_PER_SEC;
}

export function cpuSnapshot(groups: CpuGroups): CpuSnapshot {
  const byGroup: Record<string, number> = {};
  for (const [name, pids] of Object.entries(groups))
    byGroup[name] = pids.reduce((sum, pid) => sum + cpuSecOrNone(pid), 0);
  return { at: performance.now(), byGroup, machineBusySec: machineBusySec() };
}

export interface CpuSpent {
  seconds: number;
  /** CPU ms per job of each group, and of the rest of the machine (`other`). */
  msPerJob: Record<string, number>;
  /** The machine's busy share over the run: 1 is every core busy. */
  machineBusy: number;
}

export function cpuSpent(before: CpuSnapshot, after: CpuSnapshot, jobs: number, cores: number): CpuSpent {
  const seconds = (after.at - before.at) / 1000;
  const msPerJob: Record<string, number> = {};
  let grouped = 0;
  for (const name of Object.keys(after.byGroup)) {
    const spent = (after.byGroup[name] ?? 0) - (before.byGroup[name] ?? 0);
    grouped += spent;
    msPerJob[name] = (spent * 1000) / jobs;
  }
  const busy = after.machineBusySec - before.machineBusySec;
  msPerJob.other = (Math.max(0, busy - grouped) * 1000) / jobs;
  return { seconds, msPerJob, machineBusy: busy / (seconds * cores) };
}
