import { type ArrayTaskPatch, tasksOfRequests, updateArrayTask } from '../db/array-tasks.js';
import type { Db } from '../db/database.js';
import type { TrackedRequest } from '../db/requests.js';
import type { ArrayTaskRow } from '../db/schema.js';
import type { Freshness } from '../sched/freshness.js';
import type { JobStateEntry, SchedJob } from '../sched/job-model.js';
import { summarizeArray } from './array-state.js';
import { isTerminalRequest, requestStateFor } from './request-state.js';

/**
 * Following array jobs within the poll cycle's two requests. Asked for by the array's job id,
 * `jobs/state` lists every task (`"5_3"`: task 3 has job 5; `"1_4"`: task 4 still pending in
 * the array's record 1), so the one light request covers any number of tasks. Tasks whose state
 * changed, or that appeared under a job id not seen before, are named in the cycle's one
 * accounting request (their own job ids; the array's id, which brings every task's record, when
 * many changed at once), and each accounting record says which array and task it is.
 */

/** Changed tasks of one array named by their own ids up to this; beyond, the array's id names them all. */
const TASK_IDS_PER_ARRAY = 50;

export interface ArrayPlan {
  /** Job ids to name in the cycle's accounting request. */
  accountingIds: number[];
  /** Some task ended (or left the controller): the query must not ask for active records only. */
  ended: boolean;
  tasks: Map<string, ArrayTaskRow[]>;
  /** Light entries by array request. */
  entries: Map<string, JobStateEntry[]>;
}

export function planArrays(
  db: Db,
  arrays: readonly TrackedRequest[],
  taskEntries: readonly JobStateEntry[],
  freshnessOf: (row: TrackedRequest) => Freshness,
): ArrayPlan {
  const tasks = tasksOfRequests(
    db,
    arrays.map((row) => row.id),
  );
  const owner = new Map<number, TrackedRequest>();
  for (const row of arrays) {
    owner.set(row.jobId as number, row);
    for (const task of tasks.get(row.id) ?? []) if (task.jobId !== null) owner.set(task.jobId, row);
  }
  const entries = new Map<string, JobStateEntry[]>();
  const unknown = new Set<number>();
  for (const entry of taskEntries) {
    const row = owner.get(entry.job_id);
    if (!row) {
      unknown.add(entry.job_id);
      continue;
    }
    const list = entries.get(row.id);
    if (list) list.push(entry);
    else entries.set(row.id, [entry]);
  }
  let ended = false;
  const ids = new Set<number>();
  for (const row of arrays) {
    const arrayId = row.jobId as number;
    const stored = new Map((tasks.get(row.id) ?? []).map((task) => [task.taskId, task]));
    const seen = new Set<number>();
    const changed = new Set<number>();
    for (const entry of entries.get(row.id) ?? []) {
      const task = stored.get(entry.array_task_id as number);
      if (!task) continue;
      seen.add(task.taskId);
      const state = requestStateFor(entry.state);
      const ownJob = entry.job_id !== arrayId || state !== 'pending';
      if (state !== null && (state !== task.state || (ownJob && task.jobId !== entry.job_id))) {
        changed.add(entry.job_id);
        if (isTerminalRequest(state)) ended = true;
      }
    }
    const fresh = !freshnessOf(row).stale;
    let unseenPending = false;
    for (const task of stored.values()) {
      if (seen.has(task.taskId) || isTerminalRequest(task.state)) continue;
      if (task.jobId !== null) {
        // Left the controller: ended, and past MinJobAge.
        if (fresh) {
          changed.add(task.jobId);
          ended = true;
        }
      } else unseenPending = true;
    }
    // A task that left the array's record under a job id not known yet; or the whole array gone
    // from the controller: its id brings every task's record.
    const nothingSeen = seen.size === 0 && fresh && [...stored.values()].some((t) => !isTerminalRequest(t.state));
    if (nothingSeen || (unseenPending && unknown.size > TASK_IDS_PER_ARRAY) || changed.size > TASK_IDS_PER_ARRAY) {
      ids.add(arrayId);
      ended ||= nothingSeen;
    } else {
      for (const id of changed) ids.add(id);
    }
  }
  if (unknown.size <= TASK_IDS_PER_ARRAY) for (const id of unknown) ids.add(id);
  return { accountingIds: [...ids], ended, tasks, entries };
}

/**
 * Applies accounting's task records (null when accounting did not answer: then the light
 * states of tasks that have not ended, ends waiting for their record), then gives each array
 * request the state its tasks make. Returns the requests whose summary changed, for the caller
 * to apply as a job observation.
 */
export function applyArrayTasks(
  db: Db,
  arrays: readonly TrackedRequest[],
  plan: ArrayPlan,
  records: readonly SchedJob[] | null,
): Map<string, ReturnType<typeof summarizeArray>> {
  const byArrayId = new Map(arrays.map((row) => [row.jobId as number, row]));
  const updates = new Map<string, Map<number, ArrayTaskPatch>>();
  const patchOf = (row: TrackedRequest, taskId: number) => {
    let forRow = updates.get(row.id);
    if (!forRow) {
      forRow = new Map();
      updates.set(row.id, forRow);
    }
    const patch = forRow.get(taskId) ?? {};
    forRow.set(taskId, patch);
    return patch;
  };
  for (const row of arrays) {
    for (const entry of plan.entries.get(row.id) ?? []) {
      const state = requestStateFor(entry.state);
      if (state === null || isTerminalRequest(state) || entry.array_task_id === null) continue;
      const patch = patchOf(row, entry.array_task_id);
      patch.state = state;
      if (entry.job_id !== row.jobId || state !== 'pending') patch.jobId = entry.job_id;
    }
  }
  for (const record of records ?? []) {
    const row = record.array_job_id === null ? undefined : byArrayId.get(record.array_job_id);
    // The array's pending record (no task id) says nothing the light listing did not.
    if (!row || record.array_task_id === null) continue;
    const state = requestStateFor(record.state);
    if (state === null) continue;
    const patch = patchOf(row, record.array_task_id);
    // The controller's state while accounting lags behind a start.
    if (!(state === 'pending' && patch.state === 'running')) patch.state = state;
    Object.assign(patch, {
      jobId: record.job_id,
      reason: record.reason,
      exitCode: record.exit_code,
      signal: record.signal?.id ?? null,
      startedAt: record.start_time === null ? null : record.start_time * 1000,
      endedAt: record.end_time === null ? null : record.end_time * 1000,
      nodes: record.nodes,
    });
  }
  const summaries = new Map<string, ReturnType<typeof summarizeArray>>();
  for (const row of arrays) {
    const tasks = plan.tasks.get(row.id) ?? [];
    const forRow = updates.get(row.id);
    for (const task of tasks) {
      const patch = forRow?.get(task.taskId);
      if (!patch) continue;
      const changes = Object.entries(patch).filter(([key, value]) => task[key as keyof ArrayTaskRow] !== value);
      if (changes.length === 0) continue;
      // Never back from an end: a stale or reordered answer does not undo it.
      if (isTerminalRequest(task.state) && patch.state !== undefined && !isTerminalRequest(patch.state)) continue;
      const set = Object.fromEntries(changes) as ArrayTaskPatch;
      updateArrayTask(db, row.id, task.taskId, set);
      Object.assign(task, set);
    }
    if (tasks.length > 0) summaries.set(row.id, summarizeArray(tasks));
  }
  return summaries;
}
