import { usageOf } from '../db/job-usage.js';
import type { AccountingJobRow, JobRequestRow, PipelineRunRow, RequestState } from '../db/schema.js';
import type { Efficiency } from '../db/summary-data.js';
import type { ArrayExcerpt } from './array-excerpt.js';
import { efficiencyOf } from './efficiency.js';
import { type OutputTail, outputTails } from './output-tail.js';
import { type TriageInput, type TriageResult, triageJob } from './triage.js';

/**
 * The facts of one ended job, from its request (what was asked), its
 * accounting record (what Slurm recorded) and its output files (when
 * schedflow can read them). Values stay null when nothing recorded them.
 */
export interface JobFacts {
  requestId: string;
  name: string;
  profile: string;
  runId: string | null;
  step: string | null;
  attempt: number;
  state: RequestState;
  rawState: string | null;
  /** Slurm's reason code (null for an array: its request's reason is schedflow's count of its tasks). */
  reason: string | null;
  /** An array job's outcome by task ("array of 4 tasks: 1 of 4 tasks failed, 3 completed"). */
  array: string | null;
  /**
   * An array job's tasks: their counts, schedflow's words for the failed ones, and the task the
   * output excerpt (`outputs`) is from, since an array has no one output file. Null for a single job.
   */
  arrayTasks: {
    counts: string;
    /** `1 of 4 tasks did not complete (1: failed, exit 3)`: the request's reason. */
    failures: string | null;
    excerptFrom: ArrayExcerpt['task'];
  } | null;
  exitCode: number | null;
  signal: number | null;
  jobId: number | null;
  /** A refused submission's message. */
  errorMessage: string | null;
  submittedAt: number | null;
  startedAt: number | null;
  endedAt: number | null;
  /** False for a job that never started (refused, cancelled while pending). */
  ran: boolean;
  elapsedSec: number | null;
  timeLimitMin: number | 'infinite' | null;
  partition: string | null;
  account: string | null;
  user: string | null;
  nodes: string | null;
  cpus: number | null;
  requestedMemoryMb: number | null;
  cpuTimeSec: number | null;
  /** Never recorded by the accounting schedflow imports (no MaxRSS): always null for now. */
  peakMemoryMb: number | null;
  /** True when an accounting record was there (its figures are then Slurm's). */
  hasAccounting: boolean;
  /** Names of the variables the job set; their values never leave (see redact.ts). */
  environmentNames: string[];
  /** The `NAME=value` entries themselves, for the redactor only. */
  environment: string[];
  script: { head: string; shownLines: number; totalLines: number } | null;
  outputs: OutputTail[];
  /** The spec as submitted (the members a suggestion changes are read from it). */
  spec: Record<string, unknown>;
}

export interface JobFactsOptions {
  scriptHeadLines: number;
  /** Bytes read from the end of each output file (0: none read). */
  outputTailBytes: number;
  /** Folders output files are never read from (schedflow's data and configuration). */
  protectedDirs?: readonly string[];
  /**
   * The job's user's uid on this host (src/lib/host-users.ts, from accounting's user): its
   * output files must belong to it. Null or absent: not known, not checked.
   */
  jobUserUid?: number | null;
  /**
   * An array job's tasks and the excerpt of the task that explains its outcome
   * (src/summaries/array-excerpt.ts). Absent for an array: no output is read (an array has no
   * `slurm-<A>.out`) and its outcome is said from its reason only.
   */
  array?: ArrayExcerpt;
}

/** Slack for clocks and whole-second start times when telling this job's output file from an older one. */
const OUTPUT_CLOCK_SLACK_MS = 60_000;

function positiveNumber(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : null;
}

function scriptHead(script: unknown, lines: number): JobFacts['script'] {
  if (typeof script !== 'string' || lines <= 0) return null;
  const all = script.replace(/\n$/, '').split('\n');
  const shown = all.slice(0, lines);
  // A bound on characters too: one very long line must not fill the prompt.
  let head = shown.join('\n');
  if (head.length > lines * 120) head = `${head.slice(0, lines * 120)}…`;
  return { head, shownLines: shown.length, totalLines: all.length };
}

export function jobFacts(
  row: JobRequestRow,
  accounting: AccountingJobRow | undefined,
  options: JobFactsOptions,
): JobFacts {
  const spec = (row.spec ?? {}) as Record<string, unknown>;
  const environment = Array.isArray(spec.environment)
    ? (spec.environment as unknown[]).filter((e): e is string => typeof e === 'string')
    : [];
  const acct = accounting;
  const isArray = row.arrayTaskCount !== null;
  const ran = row.startedAt !== null || (acct?.startTime ?? null) !== null;
  // The figures a trend reads too (and retention keeps): one function makes them for both.
  const usage = usageOf(row, acct);
  const node = acct?.nodes?.split(',')[0] ?? null;
  const excerpt = isArray ? options.array : undefined;
  const outputs = isArray
    ? ran && options.outputTailBytes > 0
      ? (excerpt?.outputs ?? [])
      : []
    : ran && row.jobId !== null && options.outputTailBytes > 0
      ? outputTails(
          spec,
          {
            jobId: row.jobId,
            name: row.name,
            user: acct?.user ?? null,
            node: node && !node.includes('[') ? node : null,
            uid: options.jobUserUid,
          },
          options.outputTailBytes,
          row.startedAt !== null ? row.startedAt - OUTPUT_CLOCK_SLACK_MS : null,
          options.protectedDirs,
          { stdout: row.stdoutPath ?? null, stderr: row.stderrPath ?? null },
        )
      : [];
  return {
    requestId: row.id,
    name: row.name,
    profile: row.profile,
    runId: row.runId,
    step: row.step,
    attempt: row.attempt,
    state: row.state,
    rawState: row.rawState,
    // An array's accounting record is one task's (the one holding the array's job id).
    reason: isArray ? null : (row.reason ?? acct?.reason ?? null),
    array: !isArray
      ? null
      : excerpt
        ? `array of ${excerpt.total} tasks: ${excerpt.outcome}`
        : `array of ${row.arrayTaskCount} tasks${row.reason ? `: ${row.reason}` : ''}`,
    arrayTasks:
      isArray && excerpt ? { counts: excerpt.countsText, failures: row.reason, excerptFrom: excerpt.task } : null,
    exitCode: row.exitCode ?? acct?.exitCode ?? null,
    signal: row.signal ?? acct?.signal ?? null,
    jobId: row.jobId,
    errorMessage: row.errorMessage,
    submittedAt: row.submittedAt,
    startedAt: row.startedAt,
    endedAt: row.endedAt,
    ran,
    elapsedSec: usage.elapsedSec,
    timeLimitMin: usage.timeLimitMin,
    partition: acct?.partition || (typeof spec.partition === 'string' ? spec.partition : null),
    account: acct?.account || (typeof spec.account === 'string' ? spec.account : null),
    user: acct?.user || null,
    nodes: acct?.nodes ?? null,
    cpus: usage.cpus,
    requestedMemoryMb: positiveNumber(spec.memory_per_node) ?? acct?.memoryPerNodeMb ?? null,
    cpuTimeSec: acct?.cpuTimeSec ?? null,
    peakMemoryMb: acct?.peakMemoryMb ?? null,
    hasAccounting: acct !== undefined,
    environmentNames: environment.map((e) => e.slice(0, Math.max(0, e.indexOf('=')))).filter(Boolean),
    environment,
    script: scriptHead(spec.script, options.scriptHeadLines),
    outputs,
    spec,
  };
}

export function jobEfficiency(f: JobFacts): Efficiency {
  return efficiencyOf({
    elapsedSec: f.elapsedSec,
    cpus: f.cpus,
    cpuTimeSec: f.cpuTimeSec,
    timeLimitMin: f.timeLimitMin,
    requestedMemoryMb: f.requestedMemoryMb,
    peakMemoryMb: f.peakMemoryMb,
  });
}

export function jobTriage(f: JobFacts, knownPartitions?: TriageInput['knownPartitions']): TriageResult {
  return triageJob({
    state: f.state,
    reason: f.reason,
    exitCode: f.exitCode,
    signal: f.signal,
    elapsedSec: f.elapsedSec,
    timeLimitMin: f.timeLimitMin,
    requestedMemoryMb: f.requestedMemoryMb,
    nodes: f.nodes,
    partition: f.partition,
    outputTail: f.outputs.map((o) => o.text ?? '').join('\n'),
    errorMessage: f.errorMessage,
    spec: f.spec,
    knownPartitions,
  });
}

/** A pipeline run's facts: the run, every step attempt, and the latest attempt of each step in full. */
export interface RunFacts {
  run: PipelineRunRow;
  /** Latest attempt per step, in the plan's order. */
  steps: JobFacts[];
  /** Every attempt: step, attempt, state. */
  attempts: { step: string; attempt: number; state: RequestState }[];
}
