import { and, asc, desc, eq, gte, inArray, isNull, lt, or, type SQL, sql } from 'drizzle-orm';
import type { History } from './history.js';
import type { JobRequestRow, PipelineRunRow, RunState, RunTransitionRow } from './schema.js';

/**
 * Queries of pipeline runs and their transitions; their steps are job requests with the run's
 * id. Plain reads and writes: which moves a run may make is src/pipelines/run-transition.ts's.
 */

export interface RunFilter {
  pipeline?: string;
  state?: RunState[];
  /** Cursor: runs created before this (ms), newest first. */
  before?: number;
  limit?: number;
}

/** Runs, newest first (the CLI's list): the page query's rows, at most `limit` (50 unless given). */
export async function listRuns(h: History, filter: RunFilter = {}): Promise<PipelineRunRow[]> {
  const limit = filter.limit ?? 50;
  const rows = await runsPage(h, { pipeline: filter.pipeline, states: filter.state, before: filter.before, limit });
  return rows.slice(0, limit);
}

/**
 * Which runs a reader may see (src/access/visibility.ts, runAccess): its owner's, and those of
 * the pipelines that let its owner in (their `allow:`).
 */
export interface RunAccess {
  readonly owner: string;
  readonly pipelines: readonly string[];
}

export interface RunsFilter {
  pipeline?: string;
  states?: RunState[];
  /** Runs created before this (ms). */
  before?: number;
  /** The sort key of the last row of the page before: created_at, id. */
  after?: readonly [number, string];
  /** Only the runs these may read (src/access/visibility.ts, runAccess); absent: every run. */
  access?: RunAccess;
  limit: number;
}

/** Runs of `access.owner`, or of a pipeline that lets that owner in. */
function runAccessWhere(h: History, access: RunAccess): SQL {
  const { pipelineRuns } = h.t;
  const own = eq(pipelineRuns.owner, access.owner);
  return access.pipelines.length ? (or(own, inArray(pipelineRuns.pipeline, [...access.pipelines])) as SQL) : own;
}

/**
 * Pipeline runs, newest first, with the id as a tie-breaker for keyset pages: the one query of
 * the API's and the UI's pages and the CLI's list. It takes one row more than `limit`, to know
 * whether there is a next page.
 */
export function runsPage(h: History, filter: RunsFilter): Promise<PipelineRunRow[]> {
  const { pipelineRuns } = h.t;
  const where: SQL[] = [];
  if (filter.pipeline) where.push(eq(pipelineRuns.pipeline, filter.pipeline));
  if (filter.states?.length) where.push(inArray(pipelineRuns.state, filter.states));
  if (filter.before) where.push(lt(pipelineRuns.createdAt, filter.before));
  if (filter.access) where.push(runAccessWhere(h, filter.access));
  if (filter.after) {
    where.push(sql`(${pipelineRuns.createdAt}, ${pipelineRuns.id}) < (${filter.after[0]}, ${filter.after[1]})`);
  }
  return h.all(
    h.db
      .select()
      .from(pipelineRuns)
      .where(where.length ? and(...where) : undefined)
      .orderBy(desc(pipelineRuns.createdAt), desc(pipelineRuns.id))
      .limit(filter.limit + 1),
  );
}

export async function getRun(h: History, id: string, access?: RunAccess): Promise<PipelineRunRow | undefined> {
  const t = h.t.pipelineRuns;
  if (access) {
    // Another owner's run reads as an unknown one: one query, filtered (src/access/visibility.ts).
    const rows = await h.all(
      h.db
        .select()
        .from(t)
        .where(and(eq(t.id, id), runAccessWhere(h, access))),
    );
    return rows[0];
  }
  // Prepared: each submission of a step reads its run (stepDependencies), as does each page of one.
  const rows = await h.prepared(
    'runs.getRun',
    () =>
      h.db
        .select()
        .from(t)
        .where(eq(t.id, sql.placeholder('id'))),
    { id },
  );
  return rows[0];
}

/** Every request of a run, all attempts, in step then attempt order. */
export function stepRequests(h: History, runId: string): Promise<JobRequestRow[]> {
  const t = h.t.jobRequests;
  // Prepared: read for each submission of a step and each pass of the pipeline tick over a run.
  return h.prepared(
    'runs.stepRequests',
    () =>
      h.db
        .select()
        .from(t)
        .where(eq(t.runId, sql.placeholder('runId')))
        .orderBy(asc(t.step), asc(t.attempt)),
    { runId },
  );
}

/** A run as made: every column but those set later (its start, cancel, summary check, attempt: 1 until resumed). */
export type NewRunRow = Omit<
  PipelineRunRow,
  | 'startedAt'
  | 'summaryCheckedAt'
  | 'cancelRequestedAt'
  | 'cancelledBy'
  | 'attempt'
  | 'upstreamRunId'
  | 'upstreamAttempt'
  | 'downstreamCheckedAt'
> &
  Partial<Pick<PipelineRunRow, 'upstreamRunId' | 'upstreamAttempt' | 'downstreamCheckedAt'>>;

/**
 * Records a run; undefined when its tick (pipeline, scheduled_for), or the upstream end that
 * starts it (pipeline, upstream run, its attempt), has a run already: one made by another host
 * since the caller looked, whose insert committed first. (No target: either unique index.)
 */
export function insertRun(h: History, run: NewRunRow): Promise<PipelineRunRow | undefined> {
  const t = h.t.pipelineRuns;
  return h.one(h.db.insert(t).values(run).onConflictDoNothing().returning());
}

/** The run of `pipeline` that this end of an upstream run started, if it has one. */
export function runOfUpstream(
  h: History,
  pipeline: string,
  upstream: { runId: string; attempt: number },
): Promise<PipelineRunRow | undefined> {
  const t = h.t.pipelineRuns;
  return h.one(
    h.db
      .select()
      .from(t)
      .where(
        and(eq(t.pipeline, pipeline), eq(t.upstreamRunId, upstream.runId), eq(t.upstreamAttempt, upstream.attempt)),
      ),
  );
}

/** Ended runs whose downstream runs (other pipelines' `on:`) are still to be made, oldest end first. */
export function runsToFollow(h: History, limit: number): Promise<PipelineRunRow[]> {
  const t = h.t.pipelineRuns;
  return h.all(
    h.db
      .select()
      .from(t)
      .where(and(isNull(t.downstreamCheckedAt), inArray(t.state, ['succeeded', 'failed', 'cancelled'])))
      .orderBy(asc(t.endedAt))
      .limit(limit),
  );
}

/**
 * Marks this end of the run followed: only the attempt that ended (a resume since made the run
 * run again, and its next end is followed in turn). False when it was not that end any more.
 */
export async function markRunFollowed(
  h: History,
  run: Pick<PipelineRunRow, 'id' | 'attempt' | 'state'>,
  now: number,
): Promise<boolean> {
  const t = h.t.pipelineRuns;
  const rows = await h.all(
    h.db
      .update(t)
      .set({ downstreamCheckedAt: now })
      .where(and(eq(t.id, run.id), eq(t.attempt, run.attempt), eq(t.state, run.state), isNull(t.downstreamCheckedAt)))
      .returning({ id: t.id }),
  );
  return rows.length > 0;
}

/** The run of a pipeline's scheduled tick, if it has one. */
export function runOfTick(h: History, pipeline: string, scheduledFor: number): Promise<PipelineRunRow | undefined> {
  const t = h.t.pipelineRuns;
  return h.one(
    h.db
      .select()
      .from(t)
      .where(and(eq(t.pipeline, pipeline), eq(t.scheduledFor, scheduledFor))),
  );
}

/**
 * Holds the pipeline's schedule row (made if missing) until the transaction ends: on PostgreSQL a
 * second transaction deciding about the pipeline's runs waits here, as every one did on SQLite.
 * The row is left as it was.
 */
export async function lockPipelineRuns(h: History, pipeline: string, now: number): Promise<void> {
  const s = h.t.pipelineSchedules;
  await h.run(
    h.db
      .insert(s)
      .values({ pipeline, updatedAt: now })
      .onConflictDoUpdate({ target: s.pipeline, set: { updatedAt: sql`${s.updatedAt}` } }),
  );
}

/** The run, locked until the transaction ends: one decision about a run's steps or end at a time. */
export async function lockedRun(h: History, runId: string): Promise<PipelineRunRow | undefined> {
  const t = h.t.pipelineRuns;
  // Prepared: read for every active run at every pipeline tick.
  const rows = await h.prepared(
    'runs.lockedRun',
    () =>
      h.forUpdate(
        h.db
          .select()
          .from(t)
          .where(eq(t.id, sql.placeholder('id'))),
      ),
    { id: runId },
  );
  return rows[0];
}

/** Records when the run's first step started, unless that is recorded already. */
export async function recordRunStarted(h: History, runId: string, startedAt: number, now: number): Promise<void> {
  const t = h.t.pipelineRuns;
  await h.run(
    h.db
      .update(t)
      .set({ startedAt, updatedAt: now })
      .where(and(eq(t.id, runId), isNull(t.startedAt))),
  );
}

/** Every running run, oldest first: the pipeline tick's work. */
export function runningRuns(h: History): Promise<PipelineRunRow[]> {
  const t = h.t.pipelineRuns;
  return h.all(h.db.select().from(t).where(eq(t.state, 'running')).orderBy(asc(t.createdAt)));
}

/**
 * Records a cancel asked for (when, who) on a run not over: the first to ask is the one
 * recorded. The rows changed (0 when it had one already, or has ended).
 */
export function recordRunCancelRequested(h: History, runId: string, by: string, now: number): Promise<number> {
  const t = h.t.pipelineRuns;
  return h.run(
    h.db
      .update(t)
      .set({ cancelRequestedAt: now, cancelledBy: by, updatedAt: now })
      .where(and(eq(t.id, runId), isNull(t.cancelRequestedAt), inArray(t.state, ['queued', 'running']))),
  );
}

/** The pipeline's oldest queued run, locked until the transaction ends (overlap: queue). */
export function oldestQueuedRun(h: History, pipeline: string): Promise<PipelineRunRow | undefined> {
  const t = h.t.pipelineRuns;
  return h.one(
    h.forUpdate(
      h.db
        .select()
        .from(t)
        .where(and(eq(t.pipeline, pipeline), eq(t.state, 'queued')))
        .orderBy(asc(t.createdAt))
        .limit(1),
    ),
  );
}

/** Whether one of the pipeline's runs is running. */
export async function hasRunningRun(h: History, pipeline: string): Promise<boolean> {
  const t = h.t.pipelineRuns;
  const row = await h.one(
    h.db
      .select({ id: t.id })
      .from(t)
      .where(and(eq(t.pipeline, pipeline), eq(t.state, 'running')))
      .limit(1),
  );
  return row !== undefined;
}

/** Every run not over (queued or running), of every pipeline. */
export function unfinishedRuns(h: History): Promise<PipelineRunRow[]> {
  const t = h.t.pipelineRuns;
  return h.all(
    h.db
      .select()
      .from(t)
      .where(inArray(t.state, ['queued', 'running'])),
  );
}

/**
 * The pipeline's runs that are not over (queued or running). With `lock`, in a transaction,
 * locked until it ends (on PostgreSQL): for a decision that depends on them.
 */
export function activeRuns(h: History, pipeline: string, options: { lock?: boolean } = {}): Promise<PipelineRunRow[]> {
  const t = h.t.pipelineRuns;
  const select = h.db
    .select()
    .from(t)
    .where(and(eq(t.pipeline, pipeline), inArray(t.state, ['queued', 'running'])));
  return h.all(options.lock ? h.forUpdate(select) : select);
}

export type RunPatch = Partial<Omit<PipelineRunRow, 'id'>>;

/**
 * Writes `set` on the run only while it is in `from` (the state's guard: another process or host
 * may have moved it since the caller read it). The run as written, or undefined when it was not.
 */
export function updateRunFrom(
  h: History,
  runId: string,
  from: RunState,
  set: RunPatch,
): Promise<PipelineRunRow | undefined> {
  const t = h.t.pipelineRuns;
  return h.one(
    h.db
      .update(t)
      .set(set)
      .where(and(eq(t.id, runId), eq(t.state, from)))
      .returning(),
  );
}

export type RunTransitionRecord = Omit<RunTransitionRow, 'id'>;

/** Appends a row to a run's transition log; the caller has moved the run (src/pipelines/run-transition.ts). */
export async function insertRunTransition(h: History, record: RunTransitionRecord): Promise<void> {
  await h.run(h.db.insert(h.t.runTransitions).values(record));
}

/** A run's transitions, in the order they were made. */
export function runTransitionsOf(h: History, runId: string): Promise<RunTransitionRow[]> {
  const t = h.t.runTransitions;
  return h.all(h.db.select().from(t).where(eq(t.runId, runId)).orderBy(asc(t.at), asc(t.id)));
}

/** The state of each run changed at or after `since` (ms): the UI's live feed. */
export function runStatesSince(
  h: History,
  since: number,
): Promise<{ id: string; state: RunState; owner: string; pipeline: string }[]> {
  const t = h.t.pipelineRuns;
  return h.prepared(
    'liveChanges.runs',
    () =>
      h.db
        .select({ id: t.id, state: t.state, owner: t.owner, pipeline: t.pipeline })
        .from(t)
        .where(gte(t.updatedAt, sql.placeholder('since'))),
    { since },
  );
}
