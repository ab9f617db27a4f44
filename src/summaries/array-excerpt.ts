import { getAccountingJob } from '../db/accounting.js';
import { tasksOf } from '../db/array-tasks.js';
import type { History } from '../db/history.js';
import type { ArrayTaskRow, JobRequestRow, RequestState } from '../db/schema.js';
import { assertNever } from '../lib/assert-never.js';
import { describeArrayOutcome, formatCounts, summarizeArray } from '../requests/array-state.js';
import { type JobOutput, type OutputStream, readJobOutput } from '../requests/job-output.js';
import { isTerminalRequest } from '../requests/request-state.js';
import { type OutputTail, printable } from './output-tail.js';

/**
 * What a summary says of an array job: its tasks' outcome, and the output of the one task that
 * explains it. An array writes no `slurm-<A>.out`: each task writes its own, so the excerpt is
 * the first task that failed (the lowest index), else the first task, read by the same reader
 * as `schedflow jobs output --task N` and `?task=N` (src/requests/job-output.ts).
 */
export interface ArrayExcerpt {
  total: number;
  /** Tasks in each state. */
  counts: Partial<Record<RequestState, number>>;
  /** `1 of 4 tasks failed, 3 completed`, as the UI and `jobs show` say it. */
  outcome: string;
  /** `3 completed, 1 failed`. */
  countsText: string;
  /** The task the output excerpt is from; null when no task has been reported. */
  task: {
    taskId: number;
    jobId: number | null;
    state: RequestState;
    exitCode: number | null;
    /** Why this one: the first that failed, or (none failed) the first. */
    why: 'first_failed' | 'first_cancelled' | 'first';
  } | null;
  outputs: OutputTail[];
}

/**
 * The task whose output explains the array's outcome: the lowest-index task that failed
 * (failed, timeout, out of memory, node failure…), else a cancelled one (cancelled tasks say
 * little of why, so they come after real failures), else the first task.
 */
export function explainingTask(
  tasks: readonly ArrayTaskRow[],
): { task: ArrayTaskRow; why: NonNullable<ArrayExcerpt['task']>['why'] } | null {
  const sorted = [...tasks].sort((a, b) => a.taskId - b.taskId);
  const ended = sorted.filter((t) => isTerminalRequest(t.state) && t.state !== 'completed');
  const failed = ended.find((t) => t.state !== 'cancelled');
  if (failed) return { task: failed, why: 'first_failed' };
  const cancelled = ended[0];
  if (cancelled) return { task: cancelled, why: 'first_cancelled' };
  const first = sorted[0];
  return first ? { task: first, why: 'first' } : null;
}

/**
 * Words for an output that could not be read: fixed, never the reader's message, which holds
 * the path (the job's text, quoted apart in the prompt) and the host.
 */
function noteOf(reason: Extract<JobOutput, { kind: 'unavailable' }>['reason']): string {
  switch (reason) {
    case 'not_submitted':
    case 'never_ran':
      return 'the task never ran: no output';
    case 'not_started':
      return 'the task has not started: no output yet';
    case 'path_unknown':
      return 'its name pattern uses fields schedflow does not know';
    case 'not_on_this_host':
      return 'not found from the machine schedflow runs on (not on a shared file system, or removed)';
    case 'older_than_job':
      return 'last written before the task started: not its output';
    case 'no_permission':
      return 'schedflow may not read it';
    case 'protected':
      return "inside schedflow's own folders: not read";
    case 'not_a_file':
      return 'not a regular file: not opened';
    case 'symlink':
      return 'reached through a symbolic link: not followed';
    case 'unsafe_path':
      return 'not an absolute path of plain names: not read';
    case 'not_owner':
      return "not owned by the job's user: not read";
    case 'hard_link':
      return "a file of schedflow's own user with other names (hard links): not read";
    case 'read_error':
      return 'cannot be read';
    default:
      return assertNever(reason);
  }
}

function tailOf(output: JobOutput, label: OutputTail['label'], pattern: string): OutputTail {
  if (output.kind === 'unavailable') {
    return { label, path: output.path ?? pattern, text: null, sizeBytes: null, note: noteOf(output.reason) };
  }
  if (output.binary) {
    return {
      label,
      path: output.path,
      text: null,
      sizeBytes: output.sizeBytes,
      note: 'binary, not text output: left out',
    };
  }
  return { label, path: output.path, text: printable(output.text), sizeBytes: output.sizeBytes, note: null };
}

export async function arrayExcerpt(
  h: History,
  row: JobRequestRow,
  options: { outputTailBytes: number; protectedDirs: readonly string[] },
): Promise<ArrayExcerpt> {
  const tasks = await tasksOf(h, row.id);
  const total = row.arrayTaskCount ?? tasks.length;
  const { counts } = summarizeArray(tasks, total);
  const chosen = explainingTask(tasks);
  const outputs: OutputTail[] = [];
  if (chosen && row.jobId !== null && options.outputTailBytes > 0) {
    const { task } = chosen;
    const jobId = task.jobId ?? row.jobId;
    const accounting = await getAccountingJob(h, row.profile, jobId);
    const read = (stream: OutputStream) =>
      readJobOutput(
        row,
        accounting,
        stream,
        { maxBytes: options.outputTailBytes, protectedDirs: options.protectedDirs },
        task,
      );
    const spec = row.spec as { standard_output?: unknown; standard_error?: unknown };
    const pattern = (p: unknown) => (typeof p === 'string' ? p : 'slurm-%A_%a.out');
    const stdout = await read('stdout');
    const stderr = await read('stderr');
    // One file for both (the spec names no stderr, or the same pattern): shown once.
    if (stdout.path !== null && stdout.path === stderr.path) {
      outputs.push(tailOf(stdout, 'output', pattern(spec.standard_output)));
    } else {
      outputs.push(
        tailOf(stdout, 'stdout', pattern(spec.standard_output)),
        tailOf(stderr, 'stderr', pattern(spec.standard_error ?? spec.standard_output)),
      );
    }
  }
  return {
    total,
    counts,
    outcome: describeArrayOutcome(counts, total),
    countsText: formatCounts(counts),
    task: chosen
      ? {
          taskId: chosen.task.taskId,
          jobId: chosen.task.jobId,
          state: chosen.task.state,
          exitCode: chosen.task.exitCode,
          why: chosen.why,
        }
      : null,
    outputs,
  };
}
