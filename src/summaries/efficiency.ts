import type { Efficiency, Measure } from '../db/summary-data.js';

/**
 * Efficiency arithmetic: what a job used against what it held. Every figure is
 * computed only from recorded values; a figure that was not recorded is
 * reported as unknown with the reason, never estimated.
 */

export interface EfficiencyInput {
  /** Seconds the job ran. */
  elapsedSec: number | null;
  /** CPUs allocated. */
  cpus: number | null;
  /** CPU seconds used (user + system), from accounting. */
  cpuTimeSec: number | null;
  /** Time limit in minutes; null when none is known, 'infinite' for UNLIMITED. */
  timeLimitMin: number | 'infinite' | null;
  /** Memory requested per node (MB) and the peak used (MB). */
  requestedMemoryMb: number | null;
  peakMemoryMb: number | null;
}

function percent(used: number, of: number): number {
  return Math.round((used / of) * 1000) / 10;
}

function measure(used: number, of: number): Measure {
  return { known: true, used, of, percent: percent(used, of) };
}

export function cpuEfficiency(input: Pick<EfficiencyInput, 'elapsedSec' | 'cpus' | 'cpuTimeSec'>): Measure {
  const { elapsedSec, cpus, cpuTimeSec } = input;
  if (elapsedSec === null) return { known: false, why: 'the job did not run (no elapsed time)' };
  if (cpus === null || cpus <= 0) return { known: false, why: 'the allocated CPU count is not recorded' };
  if (cpuTimeSec === null) return { known: false, why: 'CPU time is not recorded in accounting' };
  if (elapsedSec <= 0) return { known: false, why: 'the job ran for less than a second' };
  // Slurm reports 0 when nothing gathered the job's usage (JobAcctGatherType=none, or a
  // simulator job that ended before its first sample): a job that ran for a while with exactly zero CPU seconds is not a
  // measurement one can trust, so it is reported as unknown rather than as 0 %.
  if (cpuTimeSec === 0) {
    return { known: false, why: 'accounting reports 0 CPU seconds, which means CPU time was not measured' };
  }
  return measure(cpuTimeSec, elapsedSec * cpus);
}

export function memoryEfficiency(input: Pick<EfficiencyInput, 'requestedMemoryMb' | 'peakMemoryMb'>): Measure {
  if (input.peakMemoryMb === null) {
    return {
      known: false,
      why: 'peak memory (MaxRSS) is not recorded: the cluster gathers no job accounting (jobacct_gather), or accounting has no record yet',
    };
  }
  if (input.requestedMemoryMb === null || input.requestedMemoryMb <= 0) {
    return { known: false, why: 'the requested memory is not recorded' };
  }
  return measure(input.peakMemoryMb, input.requestedMemoryMb);
}

export function timeEfficiency(input: Pick<EfficiencyInput, 'elapsedSec' | 'timeLimitMin'>): Measure {
  if (input.elapsedSec === null) return { known: false, why: 'the job did not run (no elapsed time)' };
  if (input.timeLimitMin === 'infinite') return { known: false, why: 'the job had no time limit (UNLIMITED)' };
  if (input.timeLimitMin === null || input.timeLimitMin <= 0) {
    return { known: false, why: 'the time limit is not recorded' };
  }
  return measure(input.elapsedSec, input.timeLimitMin * 60);
}

export function efficiencyOf(input: EfficiencyInput): Efficiency {
  return { cpu: cpuEfficiency(input), memory: memoryEfficiency(input), time: timeEfficiency(input) };
}

/** `42 s`, `3 min 5 s`, `2 h 10 min`, `1 d 4 h`. */
export function formatSeconds(totalSec: number): string {
  const sec = Math.round(totalSec);
  if (sec < 60) return `${sec} s`;
  if (sec < 3600) return `${Math.floor(sec / 60)} min${sec % 60 ? ` ${sec % 60} s` : ''}`;
  if (sec < 86_400) {
    const min = Math.floor((sec % 3600) / 60);
    return `${Math.floor(sec / 3600)} h${min ? ` ${min} min` : ''}`;
  }
  const hours = Math.floor((sec % 86_400) / 3600);
  return `${Math.floor(sec / 86_400)} d${hours ? ` ${hours} h` : ''}`;
}

/** One line per figure, for prompts, templates and the CLI. */
export function describeEfficiency(e: Efficiency): { cpu: string; memory: string; time: string } {
  const cpu = e.cpu.known
    ? `${formatSeconds(e.cpu.used)} CPU time of ${formatSeconds(e.cpu.of)} allocated (${e.cpu.percent}%)`
    : `not known: ${e.cpu.why}`;
  const memory = e.memory.known
    ? `peak ${e.memory.used} MB of ${e.memory.of} MB requested (${e.memory.percent}%)`
    : `not known: ${e.memory.why}`;
  const time = e.time.known
    ? `${formatSeconds(e.time.used)} of the ${formatSeconds(e.time.of)} limit (${e.time.percent}%)`
    : `not known: ${e.time.why}`;
  return { cpu, memory, time };
}

/** The median of some numbers; null for none. */
export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}
