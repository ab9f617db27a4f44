import type { RequestState } from '../db/schema.js';
import type { JobState } from '../sched/job-model.js';
import { isTerminalRequest } from './request-state.js';

/** What the request of an array job says, made from its tasks. */
export interface ArraySummary {
  /** The Slurm state the request takes (as one job's would): see {@link summarizeArray}. */
  state: JobState;
  /** Tasks in each state, only the states some task is in. */
  counts: Partial<Record<RequestState, number>>;
  /** Words for the request's reason: `2 of 6 tasks failed (3: failed, exit 3; 5: timeout)`. */
  reason: string | null;
  /** The highest exit code of the ended tasks (0 when all succeeded); null before any ended. */
  exitCode: number | null;
  /** Earliest start and latest end (ms), the end once every task has ended. */
  startedAt: number | null;
  endedAt: number | null;
  /**
   * Tasks `lost` (missing from the controller and accounting past the grace), when every other
   * task has ended: the request is `lost` then, as a single job would be, not ended. 0 otherwise.
   */
  lost: number;
}

/** The fields of a task the summary reads. */
export interface TaskView {
  taskId: number;
  state: RequestState;
  exitCode: number | null;
  startedAt: number | null;
  endedAt: number | null;
}

/** Failures listed by name in a reason, beyond which only their count is said. */
const FAILURES_NAMED = 5;

/**
 * The request's state from its tasks: pending while every task is; running once one has started
 * and until all have ended; then completed when every task completed, cancelled when every task
 * that did not complete was cancelled, and failed otherwise, with the counts in the reason. A
 * lost task has not ended: while others run the request runs, and once only lost ones are left
 * `lost` says so (the request is lost, not ended).
 *
 * `taskCount` is the array's (the request's `array_task_count`): tasks the scheduler has not
 * reported yet have no row, and are pending.
 */
export function summarizeArray(tasks: readonly TaskView[], taskCount = tasks.length): ArraySummary {
  const counts: Partial<Record<RequestState, number>> = {};
  const unreported = Math.max(0, taskCount - tasks.length);
  const total = tasks.length + unreported;
  if (unreported > 0) counts.pending = unreported;
  let exitCode: number | null = null;
  let startedAt: number | null = null;
  let endedAt: number | null = null;
  let ended = 0;
  let completed = 0;
  let cancelled = 0;
  const failures: TaskView[] = [];
  for (const task of tasks) {
    counts[task.state] = (counts[task.state] ?? 0) + 1;
    if (task.startedAt !== null) startedAt = startedAt === null ? task.startedAt : Math.min(startedAt, task.startedAt);
    if (!isTerminalRequest(task.state)) continue;
    ended++;
    if (task.endedAt !== null) endedAt = Math.max(endedAt ?? 0, task.endedAt);
    if (task.exitCode !== null) exitCode = Math.max(exitCode ?? 0, task.exitCode);
    if (task.state === 'completed') completed++;
    else {
      if (task.state === 'cancelled') cancelled++;
      failures.push(task);
    }
  }
  const allEnded = ended === total;
  const lost = counts.lost ?? 0;
  let state: JobState;
  if (allEnded) {
    state = completed === total ? 'COMPLETED' : cancelled === failures.length ? 'CANCELLED' : 'FAILED';
  } else if (startedAt !== null || ended > 0 || (counts.running ?? 0) > 0) {
    // A running task without a start time: the light listing's state, accounting lagging or absent.
    state = 'RUNNING';
  } else {
    state = 'PENDING';
  }
  return {
    state,
    counts,
    reason: failures.length > 0 ? describeFailures(failures, total) : null,
    exitCode,
    startedAt,
    endedAt: allEnded ? endedAt : null,
    lost: lost > 0 && ended + lost === total ? lost : 0,
  };
}

function describeFailures(failures: TaskView[], total: number): string {
  const named = failures
    .slice(0, FAILURES_NAMED)
    .map((task) => `${task.taskId}: ${task.state}${task.exitCode ? `, exit ${task.exitCode}` : ''}`);
  const more = failures.length > FAILURES_NAMED ? `; ${failures.length - FAILURES_NAMED} more` : '';
  const verb = failures.every((task) => task.state === 'cancelled') ? 'were cancelled' : 'did not complete';
  return `${failures.length} of ${total} tasks ${verb} (${named.join('; ')}${more})`;
}

/** Counts as `3 completed, 1 failed, 2 pending`, in the order of the request's life. */
export function formatCounts(counts: Partial<Record<RequestState, number>>): string {
  const order: RequestState[] = [
    'completed',
    'failed',
    'timeout',
    'out_of_memory',
    'node_fail',
    'cancelled',
    'preempted',
    'boot_fail',
    'deadline',
    'lost',
    'running',
    'pending',
  ];
  const known = new Set(order);
  const rest = (Object.keys(counts) as RequestState[]).filter((state) => !known.has(state));
  return [...order, ...rest]
    .filter((state) => (counts[state] ?? 0) > 0)
    .map((state) => `${counts[state]} ${state}`)
    .join(', ');
}

/**
 * An array's outcome in a few words, from its tasks' counts: `3 of 10 tasks failed, 7
 * completed`, `all 10 tasks completed`, `4 of 10 tasks not ended yet; 6 completed`. Said of the
 * array as a whole, never of the one task whose record has the array's job id.
 */
export function describeArrayOutcome(counts: Partial<Record<RequestState, number>>, total: number): string {
  let ended = 0;
  for (const [state, n] of Object.entries(counts) as [RequestState, number][]) {
    if (isTerminalRequest(state)) ended += n;
  }
  const completed = counts.completed ?? 0;
  const cancelled = counts.cancelled ?? 0;
  const failed = ended - completed;
  const open = total - ended;
  if (open === 0 && failed === 0) return `all ${total} tasks completed`;
  const failures =
    failed === 0 ? null : `${failed} of ${total} tasks ${failed === cancelled ? 'were cancelled' : 'failed'}`;
  if (open === 0) return `${failures}${completed > 0 ? `, ${completed} completed` : ''}`;
  const so = [
    failures && `${failed} ${failed === cancelled ? 'cancelled' : 'failed'}`,
    completed && `${completed} completed`,
  ]
    .filter(Boolean)
    .join(', ');
  return `${open} of ${total} tasks not ended yet${so ? `; ${so}` : ''}`;
}

/**
 * The tasks a page or a terminal lists of an array, at most `max` (an array may have
 * thousands): those that did not complete first, so a failure is never cut off by the cap,
 * then the others, shown in task order. The UI's job page and `schedflow jobs show` list these.
 */
export function tasksToList<T extends Pick<TaskView, 'taskId' | 'state'>>(tasks: readonly T[], max: number): T[] {
  const failed = (t: T) => isTerminalRequest(t.state) && t.state !== 'completed';
  return [...tasks.filter(failed), ...tasks.filter((t) => !failed(t))]
    .slice(0, max)
    .sort((a, b) => a.taskId - b.taskId);
}
