import type { RequestState } from '../db/schema.js';
import type { SpecSuggestion, Triage } from '../db/summary-data.js';
import { assertNever } from '../lib/assert-never.js';
import { explainReason } from '../sched/slurm-reasons.js';
import { formatSeconds } from './efficiency.js';
import { signalName } from './signals.js';

/**
 * Failure triage: from an ended job's facts, what most likely went wrong (a
 * classification, with Slurm's reason explained) and a proposed change to its
 * spec. Pure: the same facts give the same answer, with or without an LLM.
 */

export interface TriageInput {
  state: RequestState;
  reason: string | null;
  exitCode: number | null;
  signal: number | null;
  elapsedSec: number | null;
  /** The limit the job ran with (minutes). */
  timeLimitMin: number | 'infinite' | null;
  /** Memory requested per node (MB), as asked or as accounting recorded it. */
  requestedMemoryMb: number | null;
  nodes: string | null;
  partition: string | null;
  /** The tails of the job's output files, as read (empty when unreadable). */
  outputTail: string;
  /** A refused submission's message (Slurm's error text and number). */
  errorMessage: string | null;
  /** What the spec itself asked for (the values a suggestion changes). */
  spec: {
    memory_per_node?: unknown;
    time_limit?: unknown;
    partition?: unknown;
    excluded_nodes?: unknown;
  };
  /** Partitions this profile's account has run jobs in (from accounting), with the longest limit seen. */
  knownPartitions?: readonly { name: string; maxTimeLimitMin: number | null; jobs: number }[];
}

export interface TriageResult {
  triage: Triage | null;
  suggestion: SpecSuggestion | null;
}

const OOM_TEXT =
  /out of memory|oom[-_ ]?kill|killed process \d+|MemoryError|std::bad_alloc|cannot allocate memory|memory allocation failed|exceeded (?:job )?memory limit|Exceeded job memory limit/i;
const NOT_FOUND_TEXT = /command not found|No such file or directory|not found in PATH/i;
const DENIED_TEXT = /permission denied/i;
const ERROR_LINE = /error|exception|fatal|traceback|failed|abort|denied|not found|killed/i;

/** Minutes rounded up to a limit a person would write: 5-minute steps to an hour, then 15, then whole hours. */
export function niceMinutes(minutes: number): number {
  const m = Math.max(1, Math.ceil(minutes));
  if (m <= 60) return Math.ceil(m / 5) * 5;
  if (m <= 240) return Math.ceil(m / 15) * 15;
  return Math.ceil(m / 60) * 60;
}

/** MB rounded up to 256 MB steps below 4 GB, whole GB above. */
export function niceMemoryMb(mb: number): number {
  const m = Math.max(256, Math.ceil(mb));
  return m <= 4096 ? Math.ceil(m / 256) * 256 : Math.ceil(m / 1024) * 1024;
}

/** The last line of the output that looks like an error, cut to 200 characters. */
export function lastErrorLine(tail: string): string | null {
  const lines = tail
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i] as string;
    if (ERROR_LINE.test(line)) return line.slice(0, 200);
  }
  return null;
}

function specNumber(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function moreMemory(input: TriageInput, why: string): SpecSuggestion {
  const asked = specNumber(input.spec.memory_per_node);
  const base = asked ?? input.requestedMemoryMb;
  const next = niceMemoryMb(Math.max((base ?? 2048) * 2, 1024));
  return {
    changes: { memory_per_node: next },
    previous: { memory_per_node: asked },
    why:
      base === null
        ? `${why}; the job asked for no memory, so the partition's default applied: ask for ${next} MB`
        : `${why}; twice the ${base} MB it had: ${next} MB`,
  };
}

function longerLimit(input: TriageInput): SpecSuggestion {
  const asked = specNumber(input.spec.time_limit);
  const current = asked ?? (typeof input.timeLimitMin === 'number' ? input.timeLimitMin : null);
  const fromElapsed = input.elapsedSec !== null ? input.elapsedSec / 60 : null;
  const next = niceMinutes(Math.max((current ?? fromElapsed ?? 30) * 2, (fromElapsed ?? 0) * 1.5));
  return {
    changes: { time_limit: next },
    previous: { time_limit: asked },
    why: `it was stopped at its ${current !== null ? `${current}-minute ` : ''}limit before it finished; ${next} minutes leaves room (lower it again once the real run time is known: shorter limits start sooner)`,
  };
}

function awayFromNode(input: TriageInput, why: string): SpecSuggestion {
  if (!input.nodes) return { changes: {}, previous: {}, why: `${why}; submit it again unchanged` };
  const previous = Array.isArray(input.spec.excluded_nodes) ? (input.spec.excluded_nodes as string[]) : [];
  return {
    changes: { excluded_nodes: [...new Set([...previous, input.nodes])] },
    previous: { excluded_nodes: previous.length ? previous : null },
    why: `${why}; submit it again, away from ${input.nodes}`,
  };
}

/** A partition this account has used that allows the job's limit, for a refusal about the partition. */
function otherPartition(input: TriageInput, needMinutes: number | null): SpecSuggestion | null {
  const current = typeof input.spec.partition === 'string' ? input.spec.partition : input.partition;
  const candidates = (input.knownPartitions ?? [])
    .filter((p) => p.name !== current)
    .filter((p) => needMinutes === null || (p.maxTimeLimitMin !== null && p.maxTimeLimitMin >= needMinutes))
    .sort((a, b) => b.jobs - a.jobs);
  const best = candidates[0];
  if (!best) return null;
  return {
    changes: { partition: best.name },
    previous: { partition: typeof input.spec.partition === 'string' ? input.spec.partition : null },
    why: `this account has run ${best.jobs} job(s) in partition ${best.name}${best.maxTimeLimitMin !== null ? ` with limits up to ${best.maxTimeLimitMin} minutes` : ''}`,
  };
}

function triage(
  classification: Triage['classification'],
  cause: string,
  input: TriageInput,
  evidence: string[],
): Triage {
  return { classification, cause, reason: endReason(input.reason), evidence: evidence.filter(Boolean) };
}

export function triageJob(input: TriageInput): TriageResult {
  const tail = input.outputTail;
  const errorLine = lastErrorLine(tail);
  const elapsed = input.elapsedSec !== null ? `after ${formatSeconds(input.elapsedSec)}` : '';
  switch (input.state) {
    case 'completed':
    case 'accepted':
    case 'queued':
    case 'waiting':
    case 'submitting':
    case 'submitted':
    case 'pending':
    case 'running':
    case 'lost':
      return { triage: null, suggestion: null };
    case 'timeout':
      return {
        triage: triage('time_limit', `it ran out of time ${elapsed}`.trim(), input, [
          input.timeLimitMin !== null
            ? `time limit ${input.timeLimitMin === 'infinite' ? 'UNLIMITED' : `${input.timeLimitMin} min`}`
            : '',
        ]),
        suggestion: longerLimit(input),
      };
    case 'out_of_memory':
      return {
        triage: triage('out_of_memory', 'it used more memory than it requested and was killed', input, [
          input.requestedMemoryMb !== null ? `requested ${input.requestedMemoryMb} MB` : '',
          errorLine ?? '',
        ]),
        suggestion: moreMemory(input, 'it ran out of memory'),
      };
    case 'node_fail':
      return {
        triage: triage(
          'node_failure',
          `the node it ran on${input.nodes ? ` (${input.nodes})` : ''} failed; the job itself is not at fault`,
          input,
          [],
        ),
        suggestion: awayFromNode(input, 'a node failure is not caused by the job'),
      };
    case 'boot_fail':
      return {
        triage: triage('boot_failure', 'its node failed to boot, so the job never ran', input, []),
        suggestion: awayFromNode(input, 'a boot failure is not caused by the job'),
      };
    case 'failed':
      return triageFailed(input, errorLine);
    case 'preempted':
      return {
        triage: triage('preempted', 'a job with higher priority took its resources', input, []),
        suggestion: {
          changes: {},
          previous: {},
          why: 'preemption is not caused by the job; submit it again (a partition without preemption avoids it)',
        },
      };
    case 'cancelled':
      return {
        triage:
          input.reason === 'DependencyNeverSatisfied'
            ? triage(
                'dependency',
                'a job it depended on did not end as the dependency required, so it never ran',
                input,
                [],
              )
            : triage('cancelled', 'it was cancelled', input, []),
        suggestion: null,
      };
    case 'deadline':
      return { triage: triage('deadline', 'it could not finish before its deadline', input, []), suggestion: null };
    case 'submit_failed':
      return triageRefused(input);
    default:
      return assertNever(input.state);
  }
}

function triageFailed(input: TriageInput, errorLine: string | null): TriageResult {
  const exit = input.exitCode;
  const tail = input.outputTail;
  const oomLine = tail
    .split('\n')
    .findLast((l) => OOM_TEXT.test(l))
    ?.trim();
  if (oomLine) {
    return {
      triage: triage('out_of_memory', 'it most likely ran out of memory', input, [
        exit !== null ? `exit code ${exit}` : '',
        oomLine.slice(0, 200),
      ]),
      suggestion: moreMemory(input, 'the output shows it ran out of memory'),
    };
  }
  if (
    exit === 127 ||
    (exit !== null && exit !== 0 && NOT_FOUND_TEXT.test(tail) && /not found/i.test(errorLine ?? ''))
  ) {
    return {
      triage: triage(
        'command_not_found',
        'a command or file it runs was not found (PATH, a module not loaded, a wrong path)',
        input,
        [exit !== null ? `exit code ${exit}` : '', errorLine ?? ''],
      ),
      suggestion: null,
    };
  }
  if (exit === 126 || (errorLine !== null && DENIED_TEXT.test(errorLine))) {
    return {
      triage: triage('permission_denied', 'it was not allowed to run or open something (file permissions)', input, [
        exit !== null ? `exit code ${exit}` : '',
        errorLine ?? '',
      ]),
      suggestion: null,
    };
  }
  const signal = input.signal ?? (exit !== null && exit > 128 && exit < 160 ? exit - 128 : null);
  if (signal !== null) {
    const name = signalName(signal);
    const killed = signal === 9;
    return {
      triage: triage(
        'crashed',
        killed
          ? 'it was killed with SIGKILL, which is often the out-of-memory killer (the output does not say so)'
          : `it was ended by ${name}${signal === 11 || signal === 7 ? ' (a crash in the program)' : ''}`,
        input,
        [exit !== null ? `exit code ${exit}` : `signal ${signal}`, errorLine ?? ''],
      ),
      suggestion: null,
    };
  }
  return {
    triage: triage(
      'script_error',
      `the script failed${exit !== null ? ` with exit code ${exit}` : ''}; the last lines of its output show why`,
      input,
      [errorLine ?? ''],
    ),
    suggestion: null,
  };
}

function triageRefused(input: TriageInput): TriageResult {
  const message = input.errorMessage ?? '';
  const errno = Number(/error (\d{4})/.exec(message)?.[1] ?? Number.NaN);
  const limit = specNumber(input.spec.time_limit);
  const cause = message
    ? `the scheduler refused the submission: ${message.slice(0, 300)}`
    : 'the submission was refused';
  const evidence = Number.isNaN(errno) ? [] : [`Slurm error ${errno}`];
  // 2051 time limit over the partition's, 2045 account not allowed there, 2000 no such partition.
  const partition =
    errno === 2051
      ? otherPartition(input, limit)
      : errno === 2045 || errno === 2000
        ? otherPartition(input, null)
        : null;
  return { triage: triage('refused', cause, input, evidence), suggestion: partition };
}

/** The end's reason as a summary keeps it: code and meaning (what to do is the triage's). */
function endReason(code: string | null): { code: string; meaning: string } | null {
  const explained = explainReason(code);
  return explained && { code: explained.code, meaning: explained.meaning };
}
