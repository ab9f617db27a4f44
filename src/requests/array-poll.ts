import {
  type ArrayTaskPatch,
  arrayExpressionOf,
  insertArrayTask,
  insertArrayTasks,
  tasksOfRequests,
  updateTaskFrom,
} from '../db/array-tasks.js';
import type { History } from '../db/history.js';
import type { TrackedRequest } from '../db/requests.js';
import type { ArrayTaskRow } from '../db/schema.js';
import { writeInSlices } from '../db/write-in-slices.js';
import type { Freshness } from '../sched/freshness.js';
import { ArraySyntaxError, indexesOf, parseArrayExpression } from '../sched/job-array.js';
import type { JobStateEntry, SchedJob } from '../sched/job-model.js';
import { summarizeArray } from './array-state.js';
import { jobIdentity, LOST_BY_CONTROLLER_REASON, ownRecord } from './job-identity.js';
import { isTerminalRequest, requestStateFor } from './request-state.js';

/**
 * Following array jobs within the poll cycle's two requests. Asked for by the array's job id,
 * `jobs/state` lists every task (`"5_3"`: task 3 has job 5; `"1_4"`: task 4 still pending in
 * the array's record 1), so the one light request covers any number of tasks. Tasks whose state
 * changed, or that appeared under a job id not seen before, are named in the cycle's one
 * accounting request (their own job ids; the array's id, which brings every task's record, when
 * many changed at once), and each accounting record says which array and task it is.
 *
 * A cycle over arrays goes: the light states and accounting's records ({@link applyArrayRecords});
 * then, for tasks accounting did not settle, the controller's full records
 * ({@link arraysNeedingController}, {@link applyControllerTaskRecords}); then tasks found nowhere
 * are missing, and `lost` after the grace ({@link markMissingTasks}); then each request's state
 * from its tasks ({@link summarizeArrays}). Every record is checked to be the array's own job
 * (its marker, or its name and submit time) before it is applied: a crashed slurmctld gives lost
 * jobs' ids again, also an array's.
 *
 * A task's row is made when a answer first reports the task (the light listing names every task
 * of a pending array, so that is the first cycle after the submission), never for the whole
 * expression up front (issue 30). A task no answer has named is pending in the array's record;
 * one that a fresh answer should have named and none did (it ran and left the controller
 * between two cycles, with accounting silent) is given its row from the expression then, so it
 * goes missing and `lost` as a reported task does.
 */

/** Changed tasks of one array named by their own ids up to this; beyond, the array's id names them all. */
const TASK_IDS_PER_ARRAY = 50;

export interface ArrayPlan {
  /** Job ids to name in the cycle's accounting request. */
  accountingIds: number[];
  /** Some task ended (or left the controller): the query must not ask for active records only. */
  ended: boolean;
  tasks: Map<string, ArrayTaskRow[]>;
  /** Each array's task count (`array_task_count`): tasks without a row are those not reported yet. */
  taskCounts: Map<string, number>;
  /** Light entries by array request. */
  entries: Map<string, JobStateEntry[]>;
  /**
   * Tasks (by request) not ended and absent from a fresh light answer: they left the controller,
   * or (still pending here) started under a job id not known yet.
   */
  unseen: Map<string, Set<number>>;
  /** Every task entry of the light answers (`<job id>_<task id>`), attributed or not. */
  inController: Set<string>;
  /** Requests whose light answer was fresh: only such an answer can say a task is missing. */
  fresh: Set<string>;
  /**
   * Requests a task of which another writer (another host's poll of the profile) changed after
   * `tasks` was read: their tasks here are not the history's, and their state waits for the
   * next cycle, which reads them again.
   */
  raced: Set<string>;
}

export async function planArrays(
  h: History,
  arrays: readonly TrackedRequest[],
  taskEntries: readonly JobStateEntry[],
  freshnessOf: (row: TrackedRequest) => Freshness,
): Promise<ArrayPlan> {
  const tasks = await tasksOfRequests(
    h,
    arrays.map((row) => row.id),
  );
  const owner = new Map<number, TrackedRequest>();
  for (const row of arrays) {
    owner.set(row.jobId as number, row);
    for (const task of tasks.get(row.id) ?? []) if (task.jobId !== null) owner.set(task.jobId, row);
  }
  const entries = new Map<string, JobStateEntry[]>();
  const unknown = new Set<number>();
  const inController = new Set<string>();
  for (const entry of taskEntries) {
    inController.add(`${entry.job_id}_${entry.array_task_id}`);
    const row = owner.get(entry.job_id);
    if (!row) {
      unknown.add(entry.job_id);
      continue;
    }
    const list = entries.get(row.id);
    if (list) list.push(entry);
    else entries.set(row.id, [entry]);
  }
  const taskCounts = new Map(arrays.map((row) => [row.id, row.arrayTaskCount ?? 0]));
  await addReportedTasks(h, tasks, entries, taskCounts);
  let ended = false;
  const ids = new Set<number>();
  const unseenOf = new Map<string, Set<number>>();
  const freshRows = new Set<string>();
  for (const row of arrays) {
    const arrayId = row.jobId as number;
    const stored = new Map((tasks.get(row.id) ?? []).map((task) => [task.taskId, task]));
    // Tasks no answer has named yet: pending in the array's record, where a fresh answer lists
    // them; absent from it, they left that record under a job id not known yet, or the controller.
    const unreported = (taskCounts.get(row.id) ?? 0) - stored.size;
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
    if (fresh) freshRows.add(row.id);
    let unseenPending = false;
    const unseen = new Set<number>();
    for (const task of stored.values()) {
      if (seen.has(task.taskId) || isTerminalRequest(task.state)) continue;
      if (fresh) unseen.add(task.taskId);
      if (task.jobId !== null) {
        // Left the controller: ended, and past MinJobAge.
        if (fresh) {
          changed.add(task.jobId);
          ended = true;
        }
      } else if (fresh) unseenPending = true;
    }
    if (fresh && unreported > 0) unseenPending = true;
    if (unseen.size > 0) unseenOf.set(row.id, unseen);
    // A task that left the array's record under a job id not known yet (named below while few;
    // none at all: it left the controller too); or the whole array gone from the controller: its
    // id brings every task's record.
    const nothingSeen =
      seen.size === 0 && fresh && (unreported > 0 || [...stored.values()].some((t) => !isTerminalRequest(t.state)));
    const unexplained = unseenPending && (unknown.size > TASK_IDS_PER_ARRAY || unknown.size === 0);
    if (nothingSeen || unexplained || changed.size > TASK_IDS_PER_ARRAY) {
      ids.add(arrayId);
      ended ||= nothingSeen;
    } else {
      for (const id of changed) ids.add(id);
    }
  }
  if (unknown.size <= TASK_IDS_PER_ARRAY) for (const id of unknown) ids.add(id);
  return {
    accountingIds: [...ids],
    ended,
    tasks,
    taskCounts,
    entries,
    unseen: unseenOf,
    inController,
    fresh: freshRows,
    raced: new Set(),
  };
}

/** The task ids that have a row, by request, as the cycle read them. */
function taskIdsByRequest(plan: ArrayPlan): Map<string, Set<number>> {
  const ids = new Map<string, Set<number>>();
  for (const [requestId, rows] of plan.tasks) ids.set(requestId, new Set(rows.map((task) => task.taskId)));
  return ids;
}

/** A task's row as it is made: pending, nothing known of it yet. */
export function newTask(requestId: string, taskId: number): ArrayTaskRow {
  return {
    requestId,
    taskId,
    jobId: null,
    state: 'pending',
    reason: null,
    exitCode: null,
    signal: null,
    startedAt: null,
    endedAt: null,
    nodes: null,
    missingSince: null,
    stdoutPath: null,
    stderrPath: null,
  };
}

/** Whether a task index can be one of an array's `taskCount` tasks with `have` rows already. */
function roomFor(taskId: number | null, have: number, taskCount: number): taskId is number {
  // Never more rows than the array has tasks, whatever an answer says: the count was bounded at
  // the door, and it bounds what an array costs the history.
  return taskId !== null && Number.isSafeInteger(taskId) && taskId >= 0 && have < taskCount;
}

/**
 * Rows for the tasks the light answers report under an array's own ids that have none yet
 * (pending, as the array's record shows them): made once, then followed as any task.
 */
async function addReportedTasks(
  h: History,
  tasks: Map<string, ArrayTaskRow[]>,
  entries: ReadonlyMap<string, readonly JobStateEntry[]>,
  taskCounts: ReadonlyMap<string, number>,
): Promise<void> {
  for (const [requestId, list] of entries) {
    const rows = tasks.get(requestId) ?? [];
    const known = new Set(rows.map((task) => task.taskId));
    const added: number[] = [];
    for (const entry of list) {
      const taskId = entry.array_task_id;
      if (known.has(taskId as number)) continue;
      if (!roomFor(taskId, known.size, taskCounts.get(requestId) ?? 0)) continue;
      known.add(taskId);
      added.push(taskId);
    }
    if (added.length === 0) continue;
    await insertArrayTasks(h, requestId, added);
    // Another host's poll may have made some first: they are read back as the history has them.
    const fresh = (await tasksOfRequests(h, [requestId])).get(requestId) ?? [];
    tasks.set(requestId, fresh);
  }
}

/** `<request id>:<task id>`: the key of a task in the sets a cycle keeps. */
const keyOf = (requestId: string, taskId: number) => `${requestId}:${taskId}`;

/** Patches of tasks gathered over a pass, then written (a task once, whatever changed it). */
class TaskPatches {
  private readonly byRow = new Map<string, Map<number, ArrayTaskPatch>>();

  of(requestId: string, taskId: number): ArrayTaskPatch {
    let forRow = this.byRow.get(requestId);
    if (!forRow) {
      forRow = new Map();
      this.byRow.set(requestId, forRow);
    }
    const patch = forRow.get(taskId) ?? {};
    forRow.set(taskId, patch);
    return patch;
  }

  /**
   * Writes what changed, in slices (an array of thousands of tasks may change at once); the
   * plan's task rows are kept in step with the history.
   */
  async write(h: History, plan: ArrayPlan): Promise<void> {
    const writes: { requestId: string; task: ArrayTaskRow; set: ArrayTaskPatch }[] = [];
    const made: { requestId: string; task: ArrayTaskRow }[] = [];
    for (const [requestId, forRow] of this.byRow) {
      const rows = plan.tasks.get(requestId) ?? [];
      const known = new Set(rows.map((task) => task.taskId));
      // A task a record names before any light answer did (it ran and ended between two
      // cycles): its row is made now, with what the record says.
      for (const [taskId, patch] of forRow) {
        if (known.has(taskId) || !roomFor(taskId, known.size, plan.taskCounts.get(requestId) ?? 0)) continue;
        known.add(taskId);
        made.push({ requestId, task: { ...newTask(requestId, taskId), ...patch } });
      }
      for (const task of rows) {
        const patch = forRow.get(task.taskId);
        if (!patch) continue;
        const changes = Object.entries(patch).filter(([key, value]) => task[key as keyof ArrayTaskRow] !== value);
        if (changes.length === 0) continue;
        // Never back from an end: a stale or reordered answer does not undo it.
        if (isTerminalRequest(task.state) && patch.state !== undefined && !isTerminalRequest(patch.state)) continue;
        writes.push({ requestId, task, set: Object.fromEntries(changes) as ArrayTaskPatch });
      }
    }
    await writeInSlices(h, made, async (tx, { requestId, task }) => {
      // Another host's poll made it first: this cycle's view of the array is not the history's.
      if ((await insertArrayTask(tx, task)) === 0) {
        plan.raced.add(requestId);
        return false;
      }
      const rows = plan.tasks.get(requestId);
      if (rows) rows.push(task);
      else plan.tasks.set(requestId, [task]);
      return true;
    });
    await writeInSlices(h, writes, async (tx, { requestId, task, set }) => {
      // Decided on the task as read at the cycle's start: written only while it is still in that
      // state, so that another host's poll having ended it meanwhile is not undone.
      if ((await updateTaskFrom(tx, requestId, task, set)) === 0) {
        plan.raced.add(requestId);
        return false;
      }
      Object.assign(task, set);
      return true;
    });
  }
}

/** A record's details, as a task keeps them. */
function recordPatch(record: SchedJob): ArrayTaskPatch {
  return {
    jobId: record.job_id,
    reason: record.reason,
    exitCode: record.exit_code,
    signal: record.signal?.id ?? null,
    startedAt: record.start_time === null ? null : record.start_time * 1000,
    endedAt: record.end_time === null ? null : record.end_time * 1000,
    nodes: record.nodes,
    missingSince: null,
    // The task's own files, as Slurm expanded its patterns for it (`slurm-%A_%a.out` by default);
    // a record without them (a scheduler that reports none) leaves what is known as it is.
    ...(record.stdout_path !== null && {
      stdoutPath: record.stdout_path,
      stderrPath: record.stderr_path ?? record.stdout_path,
    }),
  };
}

/**
 * Applies the light states of tasks that have not ended, then accounting's task records (null
 * when accounting did not answer: ends then wait), each only when it is the array's own job: its
 * marker, or (slurmdbd keeps no comment by default) its name, submitted after the request was
 * made and not well after its submission (a same-name job given a lost array's id; the
 * controller's record, which keeps the marker, decides then). A record still active in
 * accounting for a task gone from a fresh light answer is not taken as running: accounting lags
 * behind its end, or slurmctld lost it (as for a single job). Returns the tasks a record
 * settled, by {@link keyOf}.
 */
export async function applyArrayRecords(
  h: History,
  arrays: readonly TrackedRequest[],
  plan: ArrayPlan,
  records: readonly SchedJob[] | null,
): Promise<Set<string>> {
  const byArrayId = new Map(arrays.map((row) => [row.jobId as number, row]));
  const patches = new TaskPatches();
  const settled = new Set<string>();
  const rowsOf = taskIdsByRequest(plan);
  for (const row of arrays) {
    for (const entry of plan.entries.get(row.id) ?? []) {
      const state = requestStateFor(entry.state);
      if (state === null || isTerminalRequest(state) || entry.array_task_id === null) continue;
      const patch = patches.of(row.id, entry.array_task_id);
      patch.state = state;
      if (entry.job_id !== row.jobId || state !== 'pending') patch.jobId = entry.job_id;
    }
  }
  for (const record of records ?? []) {
    const row = record.array_job_id === null ? undefined : byArrayId.get(record.array_job_id);
    // The array's pending record (no task id) says nothing the light listing did not.
    if (!row || record.array_task_id === null) continue;
    if (ownRecord([record], row).kind !== 'ours') continue;
    const state = requestStateFor(record.state);
    if (state === null) continue;
    const taskId = record.array_task_id;
    // Unseen: a task the fresh light answer did not list, reported before or never (no row yet).
    const unseen = plan.unseen.get(row.id)?.has(taskId) || (plan.fresh.has(row.id) && !rowsOf.get(row.id)?.has(taskId));
    const gone = unseen && !plan.inController.has(`${record.job_id}_${taskId}`);
    if (!isTerminalRequest(state) && gone) continue;
    const patch = patches.of(row.id, taskId);
    // The controller's state while accounting lags behind a start.
    if (!(state === 'pending' && patch.state === 'running')) patch.state = state;
    Object.assign(patch, recordPatch(record));
    settled.add(keyOf(row.id, taskId));
  }
  await patches.write(h, plan);
  return settled;
}

/**
 * The arrays whose tasks accounting did not settle, for the controller's full records (one
 * listing, shared with single jobs, decoding only these arrays' tasks): a task the light listing
 * shows ended without accounting's record of its end, or one that left the array's pending
 * record under a job id no record has named. With accounting unavailable (down, or a cluster
 * without it) at once, as a single job's end is; otherwise once accounting has said nothing of
 * them for `patienceMs`, so a cycle where accounting is a moment behind costs no third request.
 * `waiting` keeps, per request, since when it has waited.
 */
export function arraysNeedingController(
  arrays: readonly TrackedRequest[],
  plan: ArrayPlan,
  settled: ReadonlySet<string>,
  waiting: Map<string, number>,
  options: { now: number; atOnce: boolean; patienceMs: number },
): Set<number> {
  const due = new Set<number>();
  const still = new Set<string>();
  for (const row of arrays) {
    const tasks = new Map((plan.tasks.get(row.id) ?? []).map((task) => [task.taskId, task]));
    const open = (taskId: number | null) => {
      const task = taskId === null ? undefined : tasks.get(taskId);
      // A lost task is not looked for in the controller at every cycle: accounting may resolve it.
      return task !== undefined && !isTerminalRequest(task.state) && task.state !== 'lost';
    };
    const endedUnsettled = (plan.entries.get(row.id) ?? []).some((entry) => {
      const state = requestStateFor(entry.state);
      return state !== null && isTerminalRequest(state) && open(entry.array_task_id);
    });
    // Or tasks no answer has named, absent from a fresh light answer and from accounting's.
    const unreported = plan.fresh.has(row.id) && tasks.size < (plan.taskCounts.get(row.id) ?? 0);
    const startedUnknown =
      unreported ||
      [...(plan.unseen.get(row.id) ?? [])].some(
        (taskId) => open(taskId) && tasks.get(taskId)?.jobId === null && !settled.has(keyOf(row.id, taskId)),
      );
    if (!endedUnsettled && !startedUnknown) continue;
    still.add(row.id);
    const since = waiting.get(row.id) ?? options.now;
    waiting.set(row.id, since);
    if (options.atOnce || options.now - since >= options.patienceMs) due.add(row.jobId as number);
  }
  for (const id of waiting.keys()) if (!still.has(id)) waiting.delete(id);
  return due;
}

/**
 * Applies the controller's full records of the arrays' tasks (null when the listing failed): each
 * carries the marker, so one that is the array's own job gives its task state, exit code, times
 * and node. One that is another job (a fresh listing's, under the array's id) says the controller
 * lost the array and gave its id again: the task ends `node_fail` (JobLostByController), as a
 * single job does, never taking the other job's state. Returns the tasks it settled.
 */
export async function applyControllerTaskRecords(
  h: History,
  arrays: readonly TrackedRequest[],
  plan: ArrayPlan,
  listing: { records: readonly SchedJob[]; fresh: boolean } | null,
  now: number,
): Promise<Set<string>> {
  const settled = new Set<string>();
  if (!listing) return settled;
  const byArrayId = new Map(arrays.map((row) => [row.jobId as number, row]));
  const taskOf = new Map<string, ArrayTaskRow>();
  for (const row of arrays)
    for (const task of plan.tasks.get(row.id) ?? []) taskOf.set(keyOf(row.id, task.taskId), task);
  const patches = new TaskPatches();
  for (const record of listing.records) {
    const row = record.array_job_id === null ? undefined : byArrayId.get(record.array_job_id);
    if (!row || record.array_task_id === null) continue;
    const taskId = record.array_task_id;
    // A task without a row has not been reported before: its row is made with this record.
    const task = taskOf.get(keyOf(row.id, taskId)) ?? newTask(row.id, taskId);
    if (isTerminalRequest(task.state)) continue;
    if (jobIdentity(record, row) !== 'ours') {
      if (!listing.fresh) continue;
      Object.assign(patches.of(row.id, taskId), {
        state: 'node_fail',
        reason: LOST_BY_CONTROLLER_REASON,
        endedAt: now,
        missingSince: null,
      } satisfies ArrayTaskPatch);
      settled.add(keyOf(row.id, taskId));
      continue;
    }
    const state = requestStateFor(record.state);
    if (state === null) continue;
    Object.assign(patches.of(row.id, taskId), { state, ...recordPatch(record) });
    settled.add(keyOf(row.id, taskId));
  }
  await patches.write(h, plan);
  return settled;
}

/**
 * Tasks found nowhere: absent from a fresh light answer, and neither accounting (when it answered
 * for them, or on a cluster without it) nor the controller had a record of them. As a single job,
 * such a task is never taken to have finished: it is missing from then (`missing_since`), and
 * `lost` once the grace has passed; a record found later resolves it. A task seen again, or
 * given a record, is missing no more.
 */
export async function markMissingTasks(
  h: History,
  arrays: readonly TrackedRequest[],
  plan: ArrayPlan,
  settled: ReadonlySet<string>,
  options: { now: number; graceMs: number; canTell: boolean },
): Promise<void> {
  const patches = new TaskPatches();
  for (const row of arrays) {
    const unseen = plan.unseen.get(row.id) ?? new Set<number>();
    // A stale answer (the proxy's, kept from before an outage) says neither way.
    const fresh = plan.fresh.has(row.id);
    if (fresh && options.canTell) {
      for (const taskId of await neverReported(h, row.id, plan)) {
        patches.of(row.id, taskId).missingSince = options.now;
      }
    }
    for (const task of plan.tasks.get(row.id) ?? []) {
      const settledNow = settled.has(keyOf(row.id, task.taskId));
      const found = settledNow || (fresh && !unseen.has(task.taskId));
      if (found || isTerminalRequest(task.state)) {
        if (task.missingSince !== null) patches.of(row.id, task.taskId).missingSince = null;
        continue;
      }
      if (!fresh || !options.canTell) continue;
      if (task.missingSince === null) patches.of(row.id, task.taskId).missingSince = options.now;
      else if (task.state !== 'lost' && options.now - task.missingSince >= options.graceMs) {
        patches.of(row.id, task.taskId).state = 'lost';
      }
    }
  }
  await patches.write(h, plan);
}

/**
 * The tasks of an array no answer has named, though a fresh one could have: only its expression
 * names them (read from the spec then, a rare case: tasks that ran and left the controller
 * between two cycles while accounting said nothing of them). Bounded by the task count, which
 * the door bounded.
 */
async function neverReported(h: History, requestId: string, plan: ArrayPlan): Promise<number[]> {
  const rows = plan.tasks.get(requestId) ?? [];
  if (rows.length >= (plan.taskCounts.get(requestId) ?? 0)) return [];
  const expression = await arrayExpressionOf(h, requestId);
  if (expression === null) return [];
  let indexes: number[];
  try {
    indexes = indexesOf(parseArrayExpression(expression));
  } catch (error) {
    // Recorded from a spec that was checked: an expression that no longer parses names nothing.
    if (error instanceof ArraySyntaxError) return [];
    throw error;
  }
  const known = new Set(rows.map((task) => task.taskId));
  return indexes.filter((taskId) => !known.has(taskId));
}

/**
 * Each array request's state, made from its tasks as they are now; none for a request whose
 * tasks another writer changed meanwhile (`plan.raced`), which the next cycle reads again.
 */
export function summarizeArrays(
  arrays: readonly TrackedRequest[],
  plan: ArrayPlan,
): Map<string, ReturnType<typeof summarizeArray>> {
  const summaries = new Map<string, ReturnType<typeof summarizeArray>>();
  for (const row of arrays) {
    if (plan.raced.has(row.id)) continue;
    const tasks = plan.tasks.get(row.id) ?? [];
    // Tasks not reported yet (no row) are pending: the count says how many.
    if (tasks.length > 0) summaries.set(row.id, summarizeArray(tasks, plan.taskCounts.get(row.id)));
  }
  return summaries;
}
