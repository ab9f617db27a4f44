import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from './database.js';
import { type ArrayTaskRow, arrayTasks, type JobRequestRow, type RequestState } from './schema.js';

/**
 * Queries of an array request's tasks: one row per index from the start, each updated as the
 * poller learns of it. The request's own state is made from them (src/requests/array-state.ts).
 */

/** Rows for every index of a new array request, pending (in slices: SQLite binds at most 32,766 values). */
export function insertArrayTasks(db: Db, requestId: string, indexes: readonly number[]): void {
  for (let at = 0; at < indexes.length; at += 2000) {
    const slice = indexes.slice(at, at + 2000);
    db.insert(arrayTasks)
      .values(slice.map((taskId) => ({ requestId, taskId, state: 'pending' as const })))
      .onConflictDoNothing()
      .run();
  }
}

export function tasksOf(db: Db, requestId: string): ArrayTaskRow[] {
  return db.select().from(arrayTasks).where(eq(arrayTasks.requestId, requestId)).orderBy(asc(arrayTasks.taskId)).all();
}

/** The tasks of several requests, by request. */
export function tasksOfRequests(db: Db, requestIds: readonly string[]): Map<string, ArrayTaskRow[]> {
  const byRequest = new Map<string, ArrayTaskRow[]>();
  for (let at = 0; at < requestIds.length; at += 500) {
    const rows = db
      .select()
      .from(arrayTasks)
      .where(inArray(arrayTasks.requestId, requestIds.slice(at, at + 500)))
      .orderBy(asc(arrayTasks.taskId))
      .all();
    for (const row of rows) {
      const list = byRequest.get(row.requestId);
      if (list) list.push(row);
      else byRequest.set(row.requestId, [row]);
    }
  }
  return byRequest;
}

/**
 * Whose record the accounting record under an array request's job id is, for the CLI and the
 * UI to say ("task 3 (job 1188)"): an array's job id is one task's own (the last to start), so
 * that record describes the task, not the array. Null for a request that is not an array.
 */
export function arrayRecordOwner(db: Db, row: Pick<JobRequestRow, 'id' | 'jobId' | 'arrayTaskCount'>): string | null {
  if (row.arrayTaskCount === null || row.jobId === null) return null;
  const task = db
    .select({ taskId: arrayTasks.taskId })
    .from(arrayTasks)
    .where(and(eq(arrayTasks.requestId, row.id), eq(arrayTasks.jobId, row.jobId)))
    .get();
  return task ? `task ${task.taskId} (job ${row.jobId})` : `job ${row.jobId} (one task)`;
}

export type ArrayTaskPatch = Partial<Omit<ArrayTaskRow, 'requestId' | 'taskId'>>;

export function updateArrayTask(db: Db, requestId: string, taskId: number, patch: ArrayTaskPatch): void {
  db.update(arrayTasks)
    .set(patch)
    .where(and(eq(arrayTasks.requestId, requestId), eq(arrayTasks.taskId, taskId)))
    .run();
}

/** How many tasks are in each state. */
export function taskCounts(db: Db, requestId: string): Partial<Record<RequestState, number>> {
  const rows = db
    .select({ state: arrayTasks.state, n: sql<number>`count(*)` })
    .from(arrayTasks)
    .where(eq(arrayTasks.requestId, requestId))
    .groupBy(arrayTasks.state)
    .all();
  return Object.fromEntries(rows.map((row) => [row.state, row.n]));
}
