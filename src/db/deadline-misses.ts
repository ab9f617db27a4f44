import { and, eq, isNotNull, notInArray, sql } from 'drizzle-orm';
import type { History } from './history.js';
import { type DeadlineKind, type DeadlineMissRow, type JobRequestRow, TERMINAL_REQUEST_STATES } from './schema.js';

/** Queries of missed deadlines (src/requests/deadlines.ts decides what is missed). */

/** Whether the miss of `subject` (`request:<id>`, `run:<id>`) and `kind` is recorded already. */
export async function missRecorded(h: History, subject: string, kind: DeadlineKind): Promise<boolean> {
  // Asked again at every tick for each miss already recorded (until its request ends): prepared.
  const seen = await h.prepared(
    'deadlines.missSeen',
    () => {
      const t = h.t.deadlineMisses;
      return h.db
        .select({ id: t.id })
        .from(t)
        .where(and(eq(t.subject, sql.placeholder('subject')), eq(t.kind, sql.placeholder('kind'))))
        .limit(1);
    },
    { subject, kind },
  );
  return seen.length > 0;
}

/**
 * Records a miss once (by its unique subject and kind): of two hosts' ticks that find it at once,
 * one inserts it; the other gets undefined.
 */
export function insertMiss(h: History, miss: Omit<DeadlineMissRow, 'id'>): Promise<DeadlineMissRow | undefined> {
  return h.one(h.db.insert(h.t.deadlineMisses).values(miss).onConflictDoNothing().returning());
}

export function missesOfRequest(h: History, requestId: string): Promise<DeadlineMissRow[]> {
  const t = h.t.deadlineMisses;
  return h.all(h.db.select().from(t).where(eq(t.requestId, requestId)));
}

export function missesOfRun(h: History, runId: string): Promise<DeadlineMissRow[]> {
  const t = h.t.deadlineMisses;
  return h.all(h.db.select().from(t).where(eq(t.runId, runId)));
}

/** Requests with deadlines that have not ended: what the deadline check looks at. */
export function requestsWithDeadlines(h: History): Promise<JobRequestRow[]> {
  const t = h.t.jobRequests;
  return h.all(
    h.db
      .select()
      .from(t)
      .where(and(isNotNull(t.deadlines), notInArray(t.state, [...TERMINAL_REQUEST_STATES]))),
  );
}
