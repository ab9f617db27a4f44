import type { RunTrend, SpecSuggestion } from '../db/summary-data.js';
import { cpuEfficiency, formatSeconds, median, timeEfficiency } from './efficiency.js';
import { niceMinutes } from './triage.js';

/**
 * The trend of a recurring pipeline: this run against the earlier ones, and
 * per step whether its requests fit what it uses (a time limit far above or
 * close to the longest run, CPUs mostly idle). Pure arithmetic over recorded
 * values; steps with too few recorded runs get no proposal.
 */

export interface TrendStep {
  step: string;
  state: string;
  elapsedSec: number | null;
  timeLimitMin: number | 'infinite' | null;
  cpus: number | null;
  cpuTimeSec: number | null;
  /** The spec's own `cpus_per_task` and `time_limit`, the members a resize changes. */
  spec: Record<string, unknown>;
}

export interface TrendRun {
  runId: string;
  state: string;
  createdAt: number;
  startedAt: number | null;
  endedAt: number | null;
  steps: TrendStep[];
}

/** Completed runs of a step needed before a resize is proposed. */
export const MIN_RUNS_FOR_RESIZE = 3;
/** Below this share of the limit, the limit is proposed lower; above the other, higher. */
const LOW_TIME_PERCENT = 25;
const HIGH_TIME_PERCENT = 80;
const LOW_CPU_PERCENT = 30;

function durationSec(run: TrendRun): number | null {
  return run.startedAt !== null && run.endedAt !== null ? Math.max(0, (run.endedAt - run.startedAt) / 1000) : null;
}

function compare(current: number | null, med: number | null, earlier: number): string | null {
  if (current === null || med === null) return null;
  const base = `the median of the ${earlier} earlier run(s), ${formatSeconds(med)}`;
  // Slurm's times are whole seconds: runs shorter than that compare as equal, or not at all.
  if (med <= 0) return current <= 0 ? `about as long as ${base}` : null;
  const ratio = current / med;
  if (ratio >= 0.8 && ratio <= 1.25) return `about as long as ${base}`;
  const times = Math.round((ratio >= 1 ? ratio : 1 / ratio) * 10) / 10;
  return `${times}× ${ratio > 1 ? 'longer' : 'shorter'} than ${base}`;
}

function resize(step: string, runs: TrendStep[], current: TrendStep): SpecSuggestion | null {
  const completed = runs.filter((r) => r.state === 'completed' && r.elapsedSec !== null);
  if (completed.length < MIN_RUNS_FOR_RESIZE) return null;
  const changes: SpecSuggestion['changes'] = {};
  const previous: SpecSuggestion['previous'] = {};
  const why: string[] = [];

  const limit = typeof current.timeLimitMin === 'number' ? current.timeLimitMin : null;
  const longest = Math.max(...completed.map((r) => r.elapsedSec as number));
  const timePercents = completed.map((r) => timeEfficiency(r)).filter((m) => m.known);
  if (limit !== null && timePercents.length === completed.length) {
    const maxPercent = Math.max(...timePercents.map((m) => m.percent));
    const proposal =
      maxPercent < LOW_TIME_PERCENT
        ? niceMinutes((longest / 60) * 2)
        : maxPercent > HIGH_TIME_PERCENT
          ? niceMinutes((longest / 60) * 1.5)
          : null;
    if (
      proposal !== null &&
      proposal !== limit &&
      (maxPercent < LOW_TIME_PERCENT ? proposal < limit : proposal > limit)
    ) {
      changes.time_limit = proposal;
      previous.time_limit = typeof current.spec.time_limit === 'number' ? current.spec.time_limit : null;
      why.push(
        `across ${completed.length} runs it used at most ${maxPercent}% of its ${limit}-minute limit (longest ${formatSeconds(longest)}): ${proposal} minutes ${maxPercent < LOW_TIME_PERCENT ? 'is enough and may start sooner (backfill)' : 'leaves room'}`,
      );
    }
  }

  const cpuPercents = completed.map((r) => cpuEfficiency(r));
  const cpusPerTask = typeof current.spec.cpus_per_task === 'number' ? current.spec.cpus_per_task : null;
  if (cpusPerTask !== null && cpusPerTask > 1 && cpuPercents.every((m) => m.known)) {
    const maxCpu = Math.max(...cpuPercents.map((m) => (m.known ? m.percent : 0)));
    if (maxCpu < LOW_CPU_PERCENT) {
      const proposal = Math.max(1, Math.ceil(((cpusPerTask * maxCpu) / 100) * 1.5));
      if (proposal < cpusPerTask) {
        changes.cpus_per_task = proposal;
        previous.cpus_per_task = cpusPerTask;
        why.push(`its CPUs were busy at most ${maxCpu}% of the time: ${proposal} CPU(s) per task would do`);
      }
    }
  }
  if (Object.keys(changes).length === 0) return null;
  return { changes, previous, why: why.join('; '), step };
}

export function runTrend(current: TrendRun, earlier: readonly TrendRun[]): RunTrend | null {
  if (earlier.length === 0) return null;
  const earlierDurations = earlier.map(durationSec).filter((d): d is number => d !== null);
  const med = median(earlierDurations);
  const all = [current, ...earlier];
  return {
    runs: all.map((r) => ({ runId: r.runId, state: r.state, durationSec: durationSec(r), createdAt: r.createdAt })),
    medianDurationSec: med,
    comparison: compare(durationSec(current), med, earlierDurations.length),
    steps: current.steps.map((step) => {
      const history = all
        .map((r) => r.steps.find((s) => s.step === step.step))
        .filter((s): s is TrendStep => s !== undefined);
      const percents = history.map((s) => timeEfficiency(s)).filter((m) => m.known);
      return {
        step: step.step,
        maxTimePercent: percents.length ? Math.max(...percents.map((m) => m.percent)) : null,
        resize: resize(step.step, history, step),
      };
    }),
  };
}
