import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import type { History } from './history.js';
import type { ArrayTaskRow, RequestState } from './schema.js';

/**
 * Queries of an array request's tasks: a row per task the scheduler has reported, made when it
 * first does (a task not reported yet is pending in the array's record), each updated as the
 * poller learns of it. The request's own state is made from them and its task count
 * (src/requests/array-state.ts).
 */

/**
 * Rows for tasks of an array request, pending, in slices: SQLite binds at most 32,766 values in
 * a statement, PostgreSQL 65,535. A task that has one already keeps it.
 */
export async function insertArrayTasks(h: History, requestId: string, indexes: readonly number[]): Promise<void> {
  const t = h.t.arrayTasks;
  for (let at = 0; at < indexes.length; at += 2000) {
    const slice = indexes.slice(at, at + 2000);
    await h.run(
      h.db
        .insert(t)
        .values(slice.map((taskId) => ({ requestId, taskId, state: 'pending' as const })))
        .onConflictDoNothing(),
    );
  }
}

/** A task's row made with what is known of it; 0 when another writer made it first. */
export function insertArrayTask(h: History, row: ArrayTaskRow): Promise<number> {
  return h.run(h.db.insert(h.t.arrayTasks).values(row).onConflictDoNothing());
}

/**
 * The array expression of a request's spec (null when it has none): for the tasks the scheduler
 * never reported, which only the expression names. Reads the spec, so only when needed.
 */
export async function arrayExpressionOf(h: History, requestId: string): Promise<string | null> {
  const t = h.t.jobRequests;
  const row = await h.one(h.db.select({ spec: t.spec }).from(t).where(eq(t.id, requestId)));
  const array = (row?.spec as { array?: unknown } | null | undefined)?.array;
  return typeof array === 'string' ? array : null;
}

export function tasksOf(h: History, requestId: string): Promise<ArrayTaskRow[]> {
  const t = h.t.arrayTasks;
  return h.all(h.db.select().from(t).where(eq(t.requestId, requestId)).orderBy(asc(t.taskId)));
}

/** The tasks of several requests, by request. */
export async function tasksOfRequests(h: History, requestIds: readonly string[]): Promise<Map<string, ArrayTaskRow[]>> {
  const t = h.t.arrayTasks;
  const byRequest = new Map<string, ArrayTaskRow[]>();
  for (let at = 0; at < requestIds.length; at += 500) {
    const rows = await h.all(
      h.db
        .select()
        .from(t)
        .where(inArray(t.requestId, requestIds.slice(at, at + 500)))
        .orderBy(asc(t.taskId)),
    );
    for (const row of rows) {
      const list = byRequest.get(row.requestId);
      if (list) list.push(row);
      else byRequest.set(row.requestId, [row]);
    }
  }
  return byRequest;
}

export type ArrayTaskPatch = Partial<Omit<ArrayTaskRow, 'requestId' | 'taskId'>>;

export async function updateArrayTask(
  h: History,
  requestId: string,
  taskId: number,
  patch: ArrayTaskPatch,
): Promise<void> {
  const t = h.t.arrayTasks;
  await h.run(
    h.db
      .update(t)
      .set(patch)
      .where(and(eq(t.requestId, requestId), eq(t.taskId, taskId))),
  );
}

/** How many tasks are in each state. */
export async function taskCounts(h: History, requestId: string): Promise<Partial<Record<RequestState, number>>> {
  const t = h.t.arrayTasks;
  const rows = await h.all(
    h.db
      .select({ state: t.state, n: sql<number>`count(*)`.mapWith(Number) })
      .from(t)
      .where(eq(t.requestId, requestId))
      .groupBy(t.state),
  );
  return Object.fromEntries(rows.map((row) => [row.state, row.n]));
}

/**
 * UPDATE of a task's columns `set` names while the task is in the state `task` has; the rows
 * changed (0 or 1). Prepared once per set of names: a cycle writes a handful of shapes, for
 * thousands of tasks at times. The columns are plain text and numbers, which drizzle binds as
 * given (null included).
 */
export function updateTaskFrom(
  h: History,
  requestId: string,
  task: ArrayTaskRow,
  set: ArrayTaskPatch,
): Promise<number> {
  const keys = (Object.keys(set) as (keyof ArrayTaskPatch)[]).sort();
  const t = h.t.arrayTasks;
  return h.preparedRun(
    `arrayTasks.updateFrom:${keys.join(',')}`,
    () =>
      h.db
        .update(t)
        .set(Object.fromEntries(keys.map((key) => [key, sql.placeholder(key)])))
        .where(
          and(
            eq(t.requestId, sql.placeholder('requestId')),
            eq(t.taskId, sql.placeholder('taskId')),
            eq(t.state, sql.placeholder('from')),
          ),
        ),
    { ...set, requestId, taskId: task.taskId, from: task.state },
  );
}
