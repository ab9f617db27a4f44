import { randomUUID } from 'node:crypto';
import { and, asc, desc, eq, inArray, isNotNull, isNull, sql } from 'drizzle-orm';
import type { History } from './history.js';
import {
  type AccountingJobRow,
  type JobRequestRow,
  type PipelineRunRow,
  type SummaryRow,
  TERMINAL_REQUEST_STATES,
  TERMINAL_RUN_STATES,
} from './schema.js';

/**
 * Queries of summaries: finding what ended and has not been looked at (the
 * partial `*_summary_todo` indexes hold only those rows), the summaries
 * themselves, and the daily LLM budget.
 */

/** What the dispatcher reads of an ended request to decide whether it wants a summary. */
export type EndedRequestToCheck = Pick<JobRequestRow, 'id' | 'summarize' | 'runId' | 'nextAttemptId'>;

/**
 * Ended requests the dispatcher has not taken up, oldest first. An attempt whose retry is due
 * waits: whether it is the request's last word is not known yet. Not the rows: 200 specs (up to
 * a megabyte of JSON each) read and parsed at every tick of a mass end held the event loop.
 */
export function endedRequestsToCheck(h: History, limit = 200): Promise<EndedRequestToCheck[]> {
  const { jobRequests } = h.t;
  return h.prepared(
    'summaries.endedRequestsToCheck',
    () =>
      h.db
        .select({
          id: jobRequests.id,
          summarize: jobRequests.summarize,
          runId: jobRequests.runId,
          nextAttemptId: jobRequests.nextAttemptId,
        })
        .from(jobRequests)
        .where(
          and(
            isNull(jobRequests.summaryCheckedAt),
            inArray(jobRequests.state, [...TERMINAL_REQUEST_STATES]),
            isNull(jobRequests.retryDueAt),
          ),
        )
        .orderBy(asc(jobRequests.updatedAt))
        .limit(sql.placeholder('limit')),
    { limit },
  );
}

/** Ended runs the dispatcher has not taken up, oldest first. */
export function endedRunsToCheck(h: History, limit = 100): Promise<PipelineRunRow[]> {
  const { pipelineRuns } = h.t;
  return h.all(
    h.db
      .select()
      .from(pipelineRuns)
      .where(and(isNull(pipelineRuns.summaryCheckedAt), inArray(pipelineRuns.state, [...TERMINAL_RUN_STATES])))
      .orderBy(asc(pipelineRuns.updatedAt))
      .limit(limit),
  );
}

/**
 * Marks requests and runs as taken up and makes a pending summary for those
 * that want one, in one transaction: a crash leaves either both or neither,
 * so each is summarized once (by one host: a request or run has one summary at most, and a
 * second host taking it up at the same time makes none). Returns the ids of the summaries made.
 */
export function takeUp(
  h: History,
  input: { requests: { id: string; wanted: boolean }[]; runs: { id: string; wanted: boolean }[]; at: number },
): Promise<string[]> {
  // In id order: two hosts taking up overlapping lists lock the rows in one order, never
  // waiting on each other in a cycle (a deadlock PostgreSQL would break by failing one).
  const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const requests = [...input.requests].sort(byId);
  const runs = [...input.runs].sort(byId);
  return h.transaction(async (tx) => {
    const { summaries, jobRequests, pipelineRuns } = tx.t;
    const made: string[] = [];
    for (const { id, wanted } of requests) {
      if (wanted) {
        const summaryId = randomUUID();
        // Prepared once: a mass end takes up 200 requests a tick, and building each statement
        // again with drizzle was most of a tick that held the event loop for over 100 ms (issue 14).
        const inserted = await tx.preparedRun(
          'summaries.insertPendingOfRequest',
          () =>
            tx.db
              .insert(summaries)
              .values({
                id: sql.placeholder('id'),
                requestId: sql.placeholder('requestId'),
                state: 'pending',
                createdAt: sql.placeholder('at'),
                updatedAt: sql.placeholder('at'),
              })
              .onConflictDoNothing(),
          { id: summaryId, requestId: id, at: input.at },
        );
        if (inserted > 0) made.push(summaryId);
      }
      await tx.preparedRun(
        'summaries.markRequestChecked',
        () =>
          tx.db
            .update(jobRequests)
            .set({ summaryCheckedAt: sql`${sql.placeholder('at')}` })
            .where(eq(jobRequests.id, sql.placeholder('id'))),
        { id, at: input.at },
      );
    }
    for (const { id, wanted } of runs) {
      if (wanted) {
        const summaryId = randomUUID();
        const inserted = await tx.run(
          tx.db
            .insert(summaries)
            .values({ id: summaryId, runId: id, state: 'pending', createdAt: input.at, updatedAt: input.at })
            .onConflictDoNothing(),
        );
        if (inserted > 0) made.push(summaryId);
      }
      await tx.run(tx.db.update(pipelineRuns).set({ summaryCheckedAt: input.at }).where(eq(pipelineRuns.id, id)));
    }
    return made;
  });
}

export function getSummary(h: History, id: string): Promise<SummaryRow | undefined> {
  const { summaries } = h.t;
  return h.one(h.db.select().from(summaries).where(eq(summaries.id, id)));
}

export async function summaryOfRequest(h: History, requestId: string): Promise<SummaryRow | undefined> {
  const { summaries } = h.t;
  // Prepared once: every request the local API or the CLI shows reads its summary.
  const rows = await h.prepared(
    'summaries.ofRequest',
    () =>
      h.db
        .select()
        .from(summaries)
        .where(eq(summaries.requestId, sql.placeholder('requestId'))),
    { requestId },
  );
  return rows[0];
}

export function summaryOfRun(h: History, runId: string): Promise<SummaryRow | undefined> {
  const { summaries } = h.t;
  return h.one(h.db.select().from(summaries).where(eq(summaries.runId, runId)));
}

/** Ids of summaries still to write, oldest first (the state index answers it alone). */
export async function pendingSummaryIds(h: History, limit = 1000): Promise<string[]> {
  const { summaries } = h.t;
  const rows = await h.all(
    h.db
      .select({ id: summaries.id })
      .from(summaries)
      .where(eq(summaries.state, 'pending'))
      .orderBy(asc(summaries.createdAt))
      .limit(limit),
  );
  return rows.map((r) => r.id);
}

/** Sets columns of a summary still pending; returns false when it was settled meanwhile. */
export async function updatePendingSummary(
  h: History,
  id: string,
  patch: Partial<Omit<SummaryRow, 'id' | 'requestId' | 'runId' | 'createdAt'>>,
): Promise<boolean> {
  const { summaries } = h.t;
  const changed = await h.run(
    h.db
      .update(summaries)
      .set({ ...patch, updatedAt: patch.updatedAt ?? Date.now() })
      .where(and(eq(summaries.id, id), eq(summaries.state, 'pending'))),
  );
  return changed > 0;
}

/** One more LLM attempt and how it went. */
export async function recordSummaryAttempt(
  h: History,
  id: string,
  error: { code: string; message: string } | null,
): Promise<void> {
  const { summaries } = h.t;
  // The count is added to in the statement, so two attempts recorded at once both count.
  await h.run(
    h.db
      .update(summaries)
      .set({
        attempts: sql`${summaries.attempts} + 1`,
        errorCode: error?.code ?? null,
        error: error?.message ?? null,
        updatedAt: Date.now(),
      })
      .where(and(eq(summaries.id, id), eq(summaries.state, 'pending'))),
  );
}

/** Records the resubmission made from a summary's suggestion (only the first: one already recorded stands). */
export async function markSuggestionApplied(
  h: History,
  summaryId: string,
  requestId: string,
  at: number,
): Promise<void> {
  const { summaries } = h.t;
  await h.run(
    h.db
      .update(summaries)
      .set({ appliedRequestId: requestId, appliedAt: at, updatedAt: at })
      .where(and(eq(summaries.id, summaryId), isNull(summaries.appliedRequestId))),
  );
}

/**
 * Accounting records of a profile's jobs, for the partitions an account has used: only the
 * records of `owner`'s requests, so that a summary never tells one owner of another's jobs.
 */
export async function partitionsUsed(
  h: History,
  profile: string,
  account: string | null,
  owner: string,
): Promise<{ name: string; maxTimeLimitMin: number | null; jobs: number }[]> {
  const { accountingJobs, jobRequests } = h.t;
  const where = [
    eq(accountingJobs.profile, profile),
    isNotNull(accountingJobs.partition),
    inArray(
      accountingJobs.requestId,
      h.db.select({ id: jobRequests.id }).from(jobRequests).where(eq(jobRequests.owner, owner)),
    ),
  ];
  if (account) where.push(eq(accountingJobs.account, account));
  // Numbers on either database: PostgreSQL answers count(*) and the max of a bigint as strings.
  const rows = await h.all(
    h.db
      .select({
        name: accountingJobs.partition,
        maxTimeLimitMin: sql<number | null>`max(${accountingJobs.timeLimitMin})`.mapWith(Number),
        jobs: sql<number>`count(*)`.mapWith(Number),
      })
      .from(accountingJobs)
      .where(and(...where))
      .groupBy(accountingJobs.partition),
  );
  return rows.filter((p) => p.name !== '');
}

/**
 * The latest runs of a pipeline that ended, newest first: `owner`'s only, so that a trend never
 * mixes the runs another owner made under the same pipeline name (a file that changed owner).
 */
export function endedRunsOf(h: History, pipeline: string, owner: string, limit: number): Promise<PipelineRunRow[]> {
  const { pipelineRuns } = h.t;
  return h.all(
    h.db
      .select()
      .from(pipelineRuns)
      .where(
        and(
          eq(pipelineRuns.pipeline, pipeline),
          eq(pipelineRuns.owner, owner),
          inArray(pipelineRuns.state, ['succeeded', 'failed']),
        ),
      )
      .orderBy(desc(pipelineRuns.createdAt))
      .limit(limit),
  );
}

export function accountingOf(h: History, profile: string, jobId: number | null): Promise<AccountingJobRow | undefined> {
  if (jobId === null) return Promise.resolve(undefined);
  const { accountingJobs } = h.t;
  return h.one(
    h.db
      .select()
      .from(accountingJobs)
      .where(and(eq(accountingJobs.profile, profile), eq(accountingJobs.jobId, jobId))),
  );
}

/** Locks the summaries of a request until the transaction ends (on PostgreSQL): one applier of its suggestion at a time. */
export async function lockSummariesOfRequest(h: History, requestId: string): Promise<void> {
  const t = h.t.summaries;
  await h.all(h.forUpdate(h.db.select({ id: t.id }).from(t).where(eq(t.requestId, requestId))));
}

/** Writes a summary's outcome while it is still pending; the rows changed (0: another settled it first). */
export function settlePendingSummary(
  h: History,
  id: string,
  set: Partial<Omit<SummaryRow, 'id' | 'requestId' | 'runId' | 'createdAt'>>,
): Promise<number> {
  const t = h.t.summaries;
  return h.run(
    h.db
      .update(t)
      .set(set)
      .where(and(eq(t.id, id), eq(t.state, 'pending'))),
  );
}
