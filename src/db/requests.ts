import {
  and,
  asc,
  count,
  desc,
  eq,
  getTableColumns,
  gt,
  gte,
  inArray,
  isNotNull,
  lt,
  lte,
  or,
  type SQL,
  sql,
} from 'drizzle-orm';
import { nextTurn } from '../lib/turns.js';
import { driverValue } from './column-values.js';
import type { History } from './history.js';
import type { RunAccess } from './runs.js';
import {
  type AttemptPolicy,
  type Deadlines,
  type JobRequestRow,
  type JobTransitionRow,
  type PendingMove,
  REQUEST_STATES,
  type RequestState,
  type RetryCause,
  type StepNeed,
  TERMINAL_REQUEST_STATES,
  type TransitionSource,
} from './schema.js';

/**
 * Queries of the job request aggregate: requests and their transitions. Plain reads and writes;
 * the state machine and the outbox rows a state change brings are src/requests/transition.ts's.
 */

export interface NewRequest {
  id: string;
  profile: string;
  name: string;
  spec: unknown;
  origin: JobRequestRow['origin'];
  /** Whose it is, and who made it (src/access/principal.ts). */
  owner: string;
  actor: string | null;
  at: number;
  source: TransitionSource;
  /** A pipeline step: its run, step name, attempt and the steps it needs. */
  runId?: string;
  step?: string;
  attempt?: number;
  /** Which attempt of its run made it (a resumed run's steps: src/pipelines/run-resume.ts). @defaultValue 1 */
  runAttempt?: number;
  needs?: StepNeed[];
  webhookUrl?: string | null;
  deadlines?: Deadlines | null;
  /** Written with the row rather than patched after it: acceptance is on every submission's path. */
  summarize?: boolean | null;
  resubmitOf?: string | null;
  arrayTaskCount?: number | null;
  arrayRetryOf?: string | null;
  retryPolicy?: AttemptPolicy | null;
  firstAttemptId?: string | null;
  retryCause?: RetryCause | null;
  /** Its spec's `on_pending` as the mover follows it (src/requests/pending-mover.ts). */
  pendingMove?: PendingMove | null;
}

/** Creates a request in `accepted`; a second call with the same id returns the first row. */
export function createRequest(h: History, req: NewRequest): Promise<JobRequestRow> {
  return h.transaction(async (tx) => {
    const existing = await getRequest(tx, req.id);
    if (existing) return existing;
    await insertRequest(tx, req);
    return (await getRequest(tx, req.id)) as JobRequestRow;
  });
}

const placeholder = sql.placeholder;

/**
 * A value bound as given (`driverValue` has mapped it): drizzle's own mapping of a placeholder
 * wrote a json column's null as the text 'null' and a boolean column's as 0 (false), and
 * `summarize: null`, "follow the global setting", came out as "no summary".
 */
const bound = (name: string) => sql`${placeholder(name)}`;

/** The columns a new request is written with; the others keep their defaults (or NULL). */
const INSERTED = [
  'id',
  'profile',
  'name',
  'spec',
  'origin',
  'owner',
  'actor',
  'state',
  'createdAt',
  'updatedAt',
  'runId',
  'step',
  'attempt',
  'runAttempt',
  'needs',
  'webhookUrl',
  'deadlines',
  'summarize',
  'resubmitOf',
  'arrayTaskCount',
  'arrayRetryOf',
  'retryPolicy',
  'firstAttemptId',
  'retryCause',
  'pendingMove',
] as const satisfies readonly (keyof JobRequestRow)[];

/**
 * Inserts a request in `accepted` and its first transition, in the caller's transaction, for
 * an id it has found free: nothing read back (the row's spec would be parsed again for nothing).
 * With `queued`, the row is written in `queued` with both transitions, as accepting it and then
 * moving it (src/requests/transition.ts) would leave it: a new row needs no read, savepoint and
 * UPDATE to make that move, and every submission makes it. False, writing nothing, when the id
 * is taken after all (recorded meanwhile by another host).
 */
export async function insertRequest(
  h: History,
  req: NewRequest,
  queued?: { source: TransitionSource; at: number },
): Promise<boolean> {
  const row: Record<(typeof INSERTED)[number], unknown> = {
    id: req.id,
    profile: req.profile,
    name: req.name,
    spec: req.spec,
    origin: req.origin,
    owner: req.owner,
    actor: req.actor,
    state: queued ? 'queued' : 'accepted',
    createdAt: req.at,
    updatedAt: queued ? queued.at : req.at,
    runId: req.runId,
    step: req.step,
    attempt: req.attempt ?? 1,
    runAttempt: req.runAttempt ?? 1,
    needs: req.needs,
    webhookUrl: req.webhookUrl,
    deadlines: req.deadlines,
    summarize: req.summarize,
    resubmitOf: req.resubmitOf,
    arrayTaskCount: req.arrayTaskCount,
    arrayRetryOf: req.arrayRetryOf,
    retryPolicy: req.retryPolicy,
    firstAttemptId: req.firstAttemptId,
    retryCause: req.retryCause,
    pendingMove: req.pendingMove,
  };
  const t = h.t.jobRequests;
  const inserted = await h.preparedRun(
    'requests.insert',
    () =>
      h.db
        .insert(t)
        .values(Object.fromEntries(INSERTED.map((key) => [key, bound(key)])) as never)
        .onConflictDoNothing(),
    Object.fromEntries(INSERTED.map((key) => [key, driverValue(t[key], row[key])])),
  );
  if (inserted === 0) return false;
  await insertTransition(h, {
    requestId: req.id,
    fromState: null,
    toState: 'accepted',
    at: req.at,
    source: req.source,
  });
  if (queued) {
    await insertTransition(h, {
      requestId: req.id,
      fromState: 'accepted',
      toState: 'queued',
      at: queued.at,
      source: queued.source,
    });
  }
  return true;
}

export type TransitionRecord = Omit<JobTransitionRow, 'id' | 'fromState' | 'rawState' | 'reason' | 'stale' | 'detail'> &
  Partial<Pick<JobTransitionRow, 'fromState' | 'rawState' | 'reason' | 'stale' | 'detail'>>;

const TRANSITION_COLUMNS = [
  'requestId',
  'fromState',
  'toState',
  'at',
  'source',
  'rawState',
  'reason',
  'stale',
  'detail',
] as const;

/** Appends a row to a request's transition log; the caller has moved the request (requests/transition.ts). */
export async function insertTransition(h: History, record: TransitionRecord): Promise<void> {
  const t = h.t.jobTransitions;
  const values = { ...record, stale: record.stale ?? false };
  await h.preparedRun(
    'transitions.insert',
    () => h.db.insert(t).values(Object.fromEntries(TRANSITION_COLUMNS.map((key) => [key, bound(key)])) as never),
    Object.fromEntries(TRANSITION_COLUMNS.map((key) => [key, driverValue(t[key], values[key])])),
  );
}

export type RequestPatch = Partial<Omit<JobRequestRow, 'id'>>;

/**
 * UPDATE of the columns `set` names, prepared once per set of names: the poller, the
 * submitter and the API each write a handful of shapes, again and again. With `from`, only
 * while the request is in that state (another process or host may have moved it since it was
 * read): the rows changed (0 or 1).
 */
export async function updateRequest(
  h: History,
  requestId: string,
  set: RequestPatch,
  from?: RequestState,
): Promise<number> {
  const keys = (Object.keys(set) as (keyof RequestPatch)[]).filter((key) => set[key] !== undefined).sort();
  if (keys.length === 0) return 0;
  const t = h.t.jobRequests;
  for (const key of keys) if (!(key in t)) throw new Error(`job_requests has no column "${key}"`);
  const values: Record<string, unknown> = Object.fromEntries(keys.map((key) => [key, driverValue(t[key], set[key])]));
  values.requestId = requestId;
  if (from !== undefined) values.from = from;
  return h.preparedRun(
    `requests.update:${keys.join(',')}${from === undefined ? '' : ':from'}`,
    () =>
      h.db
        .update(t)
        .set(Object.fromEntries(keys.map((key) => [key, bound(key)])))
        .where(
          from === undefined
            ? eq(t.id, placeholder('requestId'))
            : and(eq(t.id, placeholder('requestId')), eq(t.state, placeholder('from'))),
        ),
    values,
  );
}

/** Sets columns without a state change (freshness of the last sighting, accounting fields). */
export async function patchRequest(
  h: History,
  requestId: string,
  patch: Partial<Omit<JobRequestRow, 'id' | 'state'>>,
): Promise<void> {
  await updateRequest(h, requestId, patch);
}

/** A request's state alone: without its spec (up to a megabyte of JSON) to read and parse. */
export async function requestStateOf(h: History, id: string): Promise<JobRequestRow['state'] | undefined> {
  const t = h.t.jobRequests;
  const rows = await h.prepared(
    'requests.stateById',
    () =>
      h.db
        .select({ state: t.state })
        .from(t)
        .where(eq(t.id, placeholder('id'))),
    { id },
  );
  return rows[0]?.state;
}

/** The profile a request is for, without reading its spec. */
export async function requestProfileOf(h: History, id: string): Promise<string | undefined> {
  const t = h.t.jobRequests;
  const rows = await h.prepared(
    'requests.profileById',
    () =>
      h.db
        .select({ profile: t.profile })
        .from(t)
        .where(eq(t.id, placeholder('id'))),
    { id },
  );
  return rows[0]?.profile;
}

/** What a state change reads of a request: not its spec (up to a megabyte of JSON) to parse. */
export type TransitionFacts = Pick<
  JobRequestRow,
  'state' | 'rawState' | 'webhookUrl' | 'runId' | 'retryPolicy' | 'pendingMove' | 'heldAt' | 'specChangedAt'
>;

/**
 * The facts of a state change, locking the row on PostgreSQL until the transaction `h` is
 * (where another host may change it meanwhile).
 */
export async function transitionFactsOf(h: History, id: string): Promise<TransitionFacts | undefined> {
  const t = h.t.jobRequests;
  const rows = await h.prepared(
    'requests.transitionFacts',
    () =>
      h.forUpdate(
        h.db
          .select({
            state: t.state,
            rawState: t.rawState,
            webhookUrl: t.webhookUrl,
            runId: t.runId,
            // A few hundred bytes at most: whether an end makes another attempt.
            retryPolicy: t.retryPolicy,
            // As small: whether an end is a move's cancel (src/requests/pending-mover.ts).
            pendingMove: t.pendingMove,
            // Whether it may move to `submitting` (src/requests/job-control.ts).
            heldAt: t.heldAt,
            specChangedAt: t.specChangedAt,
          })
          .from(t)
          .where(eq(t.id, placeholder('id'))),
      ),
    { id },
  );
  return rows[0];
}

/** What failing a submit the queue gave up on reads of its request: whether it got a job since. */
export type SubmitGiveUpFacts = Pick<JobRequestRow, 'state' | 'jobId' | 'errorMessage'>;

/**
 * The facts of a submit the queue gave up on, in the transaction `h` that fails it, the row
 * locked (on PostgreSQL): another attempt (a requeue, another host's worker) may have submitted
 * it since, and a request with a job must not be failed.
 */
export async function submitGiveUpFactsOf(h: History, id: string): Promise<SubmitGiveUpFacts | undefined> {
  const t = h.t.jobRequests;
  return h.one(
    h.forUpdate(
      h.db.select({ state: t.state, jobId: t.jobId, errorMessage: t.errorMessage }).from(t).where(eq(t.id, id)),
    ),
  );
}

/**
 * A request's row. With `lock`, in a transaction, the row is locked (on PostgreSQL) until it
 * ends: for a decision on the row that the transaction then writes.
 */
export async function getRequest(
  h: History,
  id: string,
  options: { lock?: boolean; owner?: string } = {},
): Promise<JobRequestRow | undefined> {
  const t = h.t.jobRequests;
  if (options.owner !== undefined) {
    // Another owner's id reads as an unknown one: the same single query, no row (src/access/visibility.ts).
    const rows = await h.prepared(
      'requests.byIdOfOwner',
      () =>
        h.db
          .select()
          .from(t)
          .where(and(eq(t.id, placeholder('id')), eq(t.owner, placeholder('owner')))),
      { id, owner: options.owner },
    );
    return rows[0];
  }
  const select = () =>
    h.db
      .select()
      .from(t)
      .where(eq(t.id, placeholder('id')));
  const rows = options.lock
    ? await h.prepared('requests.byIdLocked', () => h.forUpdate(select()), { id })
    : await h.prepared('requests.byId', select, { id });
  return rows[0];
}

/**
 * A request's row as a reader sees it (src/access/visibility.ts, runAccess): with `access`, only
 * its owner's requests and the steps of the runs of the pipelines that let it in (whose runs it
 * reads), in one query, so that any other id reads as an unknown one; without, any request.
 */
export async function getReadableRequest(
  h: History,
  id: string,
  access: RunAccess | undefined,
): Promise<JobRequestRow | undefined> {
  if (!access) return getRequest(h, id);
  if (access.pipelines.length === 0) return getRequest(h, id, { owner: access.owner });
  const { jobRequests: t, pipelineRuns: r } = h.t;
  const allowedRuns = h.db
    .select({ id: r.id })
    .from(r)
    .where(inArray(r.pipeline, [...access.pipelines]));
  const rows = await h.all(
    h.db
      .select()
      .from(t)
      .where(and(eq(t.id, id), or(eq(t.owner, access.owner), inArray(t.runId, allowedRuns)))),
  );
  return rows[0];
}

/** The request that has this Slurm job on this profile, if any; `lock` as for getRequest. */
export async function requestByJobId(
  h: History,
  profile: string,
  jobId: number,
  options: { lock?: boolean } = {},
): Promise<JobRequestRow | undefined> {
  const t = h.t.jobRequests;
  const select = () =>
    h.db
      .select()
      .from(t)
      .where(and(eq(t.profile, placeholder('profile')), eq(t.jobId, placeholder('jobId'))));
  const rows = options.lock
    ? await h.prepared('requests.byJobIdLocked', () => h.forUpdate(select()), { profile, jobId })
    : await h.prepared('requests.byJobId', select, { profile, jobId });
  return rows[0];
}

/**
 * Requests whose id starts with `prefix`, at most `limit`, newest first: for ids abbreviated
 * as people do. `substr` rather than LIKE: the same exact, case-sensitive comparison on SQLite
 * and PostgreSQL, with no wildcard in the prefix to escape. It reads every id (no index serves
 * it), which a command typed by a person can afford.
 */
export function requestsByIdPrefix(h: History, prefix: string, limit: number): Promise<JobRequestRow[]> {
  const t = h.t.jobRequests;
  return h.all(
    h.db
      .select()
      .from(t)
      .where(sql`substr(${t.id}, 1, ${prefix.length}) = ${prefix}`)
      .orderBy(desc(t.createdAt))
      .limit(limit),
  );
}

/**
 * The requests that have this Slurm job id, on any profile (each profile is its own cluster, so
 * more than one may), or a task of their array with it; newest first.
 */
export function requestsByAnyJobId(h: History, jobId: number): Promise<JobRequestRow[]> {
  const t = h.t.jobRequests;
  const tasks = h.t.arrayTasks;
  return h.all(
    h.db
      .select()
      .from(t)
      .where(
        or(
          eq(t.jobId, jobId),
          inArray(t.id, h.db.select({ id: tasks.requestId }).from(tasks).where(eq(tasks.jobId, jobId))),
        ),
      )
      .orderBy(desc(t.createdAt)),
  );
}

export function transitionsOf(h: History, requestId: string): Promise<JobTransitionRow[]> {
  const t = h.t.jobTransitions;
  return h.prepared(
    'transitions.ofRequest',
    () =>
      h.db
        .select()
        .from(t)
        .where(eq(t.requestId, placeholder('requestId')))
        .orderBy(asc(t.at), asc(t.id)),
    { requestId },
  );
}

/** The columns polling reads and compares; not the spec, which may be large. */
function trackedColumns(t: History['t']['jobRequests']) {
  return {
    id: t.id,
    state: t.state,
    name: t.name,
    jobId: t.jobId,
    jobConfirmedAt: t.jobConfirmedAt,
    rawState: t.rawState,
    reason: t.reason,
    expectedStartAt: t.expectedStartAt,
    exitCode: t.exitCode,
    signal: t.signal,
    startedAt: t.startedAt,
    endedAt: t.endedAt,
    submittedAt: t.submittedAt,
    createdAt: t.createdAt,
    missingSince: t.missingSince,
    stdoutPath: t.stdoutPath,
    stderrPath: t.stderrPath,
    arrayTaskCount: t.arrayTaskCount,
  };
}
export type TrackedRequest = Pick<JobRequestRow, keyof ReturnType<typeof trackedColumns>>;

/** States a request with a job may be followed in: every one but the terminal ones (`lost` included). */
const FOLLOWED_STATES = REQUEST_STATES.filter(
  (state) => !(TERMINAL_REQUEST_STATES as readonly string[]).includes(state),
);

/**
 * Rows of tracked requests read between two turns of the event loop: about 10 ms. All 10,000
 * tracked requests in one read held the loop 60 to 120 ms every poll cycle (the slowest
 * /healthz of bench:submit, issue 14).
 */
const TRACKED_PAGE_ROWS = 2000;

/**
 * Requests the poller follows: submitted to this profile and not finished (lost ones included).
 * Read a page at a time, each state's rows in the order of the (profile, state) index, with a
 * turn of the event loop between pages. A request that changes state meanwhile is read once
 * (its latest row) or, moved back to a state already read, followed from the next cycle.
 */
export async function trackedRequests(h: History, profile: string): Promise<TrackedRequest[]> {
  const t = h.t.jobRequests;
  // The page's key: SQLite's rowid is the (profile, state) index's own order, so a page costs no
  // sort; PostgreSQL's tables have no such column, and sort a state's rows by id.
  const key: SQL<number | string> = h.dialect === 'sqlite' ? sql<number>`${t}.rowid` : sql<string>`${t.id}`;
  const tracked = new Map<string, TrackedRequest>();
  let sinceTurn = 0;
  for (const state of FOLLOWED_STATES) {
    let after: number | string = h.dialect === 'sqlite' ? 0 : '';
    for (;;) {
      // A profile of a few hundred jobs is read in one turn; a state with none costs nothing.
      if (sinceTurn >= TRACKED_PAGE_ROWS / 2) {
        await nextTurn();
        sinceTurn = 0;
      }
      const rows = await h.prepared(
        'requests.trackedPage',
        () =>
          h.db
            .select({ ...trackedColumns(t), key })
            .from(t)
            .where(
              and(
                eq(t.profile, placeholder('profile')),
                eq(t.state, placeholder('state')),
                isNotNull(t.jobId),
                gt(key, placeholder('after')),
              ),
            )
            .orderBy(key)
            .limit(TRACKED_PAGE_ROWS),
        { profile, state, after },
      );
      sinceTurn += rows.length;
      for (const { key: _key, ...row } of rows) tracked.set(row.id, row);
      const last = rows.at(-1);
      if (!last || rows.length < TRACKED_PAGE_ROWS) break;
      after = last.key as number | string;
    }
  }
  // In job id order, as one query by the (profile, job_id) index gave them: the poller's chunks
  // of ids, and so their URLs (and the proxy's kept answers), do not change with job states.
  return [...tracked.values()].sort((a, b) => (a.jobId as number) - (b.jobId as number));
}

/**
 * Whether the profile has a request whose job is in the controller (submitted, pending or
 * running): one that can end and free a slot of a submit limit. The history knows a job the
 * moment it is submitted; a controller listing may be an answer the proxy kept from before.
 */
export async function hasActiveJob(h: History, profile: string): Promise<boolean> {
  const t = h.t.jobRequests;
  const rows = await h.all(
    h.db
      .select({ id: t.id })
      .from(t)
      .where(and(eq(t.profile, profile), inArray(t.state, ['submitted', 'pending', 'running']), isNotNull(t.jobId)))
      .limit(1),
  );
  return rows.length > 0;
}

/**
 * Submissions of the profile whose answer is not recorded yet, by job name: the earliest
 * attempt's start (ms). The job such an attempt makes exists before its id is recorded.
 */
export async function submissionsInFlight(h: History, profile: string): Promise<Map<string, number>> {
  const t = h.t.jobRequests;
  const rows = await h.prepared(
    'requests.submissionsInFlight',
    () =>
      h.db
        .select({ name: t.name, since: sql<number>`min(${t.submitAttemptAt})`.mapWith(Number) })
        .from(t)
        .where(
          and(
            eq(t.profile, placeholder('profile')),
            inArray(t.state, ['submitting', 'waiting']),
            sql`+${t.jobId} is null`,
            isNotNull(t.submitAttemptAt),
          ),
        )
        .groupBy(t.name),
    { profile },
  );
  return new Map(rows.map((row) => [row.name, row.since]));
}

/**
 * How many requests of the profile, accepted before this one, wait on a submit limit (the
 * first of them keeps `waiting` while it is tried again). They go first: a freed slot is taken
 * in order of acceptance.
 */
export async function submitLimitQueueAhead(
  h: History,
  row: Pick<JobRequestRow, 'id' | 'profile' | 'createdAt'>,
): Promise<number> {
  const t = h.t.jobRequests;
  const tr = h.t.jobTransitions;
  // Requests accepted in the same millisecond go in the order they were recorded (their ids
  // are random): the order of their first transitions, whose ids are given in that order.
  const recorded = (id: SQL | typeof t.id) => sql`(select min(${tr.id}) from ${tr} where ${tr.requestId} = ${id})`;
  const rows = await h.prepared(
    'requests.submitLimitQueueAhead',
    () =>
      h.db
        .select({ n: count() })
        .from(t)
        .where(
          and(
            eq(t.profile, placeholder('profile')),
            eq(t.state, 'waiting'),
            // Unary + keeps SQLite on the (profile, state) index: by (profile, job_id) it went
            // through every request not submitted yet, for every submission (issue 14).
            sql`+${t.jobId} is null`,
            or(
              lt(t.createdAt, placeholder('createdAt')),
              and(
                eq(t.createdAt, placeholder('createdAt')),
                sql`${recorded(t.id)} < ${recorded(sql`${placeholder('id')}`)}`,
              ),
            ),
          ),
        ),
    { profile: row.profile, createdAt: row.createdAt, id: row.id },
  );
  return rows[0]?.n ?? 0;
}

/** Requests not yet submitted (after a restart they must be queued again). */
export function unsubmittedRequests(h: History): Promise<JobRequestRow[]> {
  const t = h.t.jobRequests;
  return h.all(
    h.db
      .select()
      .from(t)
      .where(inArray(t.state, ['accepted', 'queued', 'waiting', 'submitting'])),
  );
}

export interface ListFilter {
  state?: RequestState[];
  profile?: string;
  /** Cursor: rows created before this (ms), for paging newest first. */
  before?: number;
  limit?: number;
}

export function listRequests(h: History, filter: ListFilter = {}): Promise<JobRequestRow[]> {
  const t = h.t.jobRequests;
  const where: SQL[] = [];
  if (filter.state?.length) where.push(inArray(t.state, filter.state));
  if (filter.profile) where.push(eq(t.profile, filter.profile));
  if (filter.before) where.push(lt(t.createdAt, filter.before));
  return h.all(
    h.db
      .select()
      .from(t)
      .where(where.length ? and(...where) : undefined)
      .orderBy(desc(t.createdAt))
      .limit(filter.limit ?? 50),
  );
}

export interface JobsFilter {
  states?: RequestState[];
  profile?: string;
  pipeline?: string;
  runId?: string;
  createdSince?: number;
  createdUntil?: number;
  /** Only this owner's (src/access/visibility.ts, readOwner); absent: every owner's. */
  owner?: string;
  /** The sort key of the last row of the page before: created_at, id. */
  after?: readonly [number, string];
  limit: number;
}

/** A request as lists show it: every column but its spec (up to a megabyte of JSON to parse). */
export type JobListRow = Omit<JobRequestRow, 'spec'>;

/**
 * The API's and the UI's page of requests: newest first, with the id as a unique tie-breaker, so
 * rows created in the same millisecond are neither skipped nor repeated across pages. It takes
 * one row more than `limit`, to know whether there is a next page.
 */
export function jobsPage(h: History, filter: JobsFilter): Promise<JobListRow[]> {
  const { jobRequests, pipelineRuns } = h.t;
  const { spec: _spec, ...listColumns } = getTableColumns(jobRequests);
  // Prepared once per shape of filter (which filters are given, how many states), the values
  // bound: building and preparing the query on each call was most of a page's cost (issue 14).
  const values: Record<string, unknown> = { limit: filter.limit + 1 };
  const bind = (name: string, value: unknown) => {
    values[name] = value;
    return sql.placeholder(name);
  };
  const where: SQL[] = [];
  const shape: string[] = [];
  // Each state once: the shapes, and so the statements kept, stay as few as the states.
  const states = [...new Set(filter.states)];
  if (states.length) {
    where.push(
      inArray(
        jobRequests.state,
        states.map((state, i) => bind(`state${i}`, state)),
      ),
    );
    shape.push(`states${states.length}`);
  }
  if (filter.owner !== undefined) {
    where.push(eq(jobRequests.owner, bind('owner', filter.owner)));
    shape.push('owner');
  }
  if (filter.profile) {
    where.push(eq(jobRequests.profile, bind('profile', filter.profile)));
    shape.push('profile');
  }
  if (filter.runId) {
    where.push(eq(jobRequests.runId, bind('runId', filter.runId)));
    shape.push('runId');
  }
  if (filter.pipeline) {
    const pipeline = bind('pipeline', filter.pipeline);
    where.push(
      inArray(
        jobRequests.runId,
        h.db.select({ id: pipelineRuns.id }).from(pipelineRuns).where(eq(pipelineRuns.pipeline, pipeline)),
      ),
    );
    shape.push('pipeline');
  }
  if (filter.createdSince !== undefined) {
    where.push(gte(jobRequests.createdAt, bind('createdSince', filter.createdSince)));
    shape.push('since');
  }
  if (filter.createdUntil !== undefined) {
    where.push(lt(jobRequests.createdAt, bind('createdUntil', filter.createdUntil)));
    shape.push('until');
  }
  if (filter.after) {
    where.push(
      sql`(${jobRequests.createdAt}, ${jobRequests.id}) < (${bind('afterAt', filter.after[0])}, ${bind('afterId', filter.after[1])})`,
    );
    shape.push('after');
  }
  return h.prepared(
    `jobsPage:${shape.join(',')}`,
    () =>
      h.db
        .select(listColumns)
        .from(jobRequests)
        .where(where.length ? and(...where) : undefined)
        .orderBy(desc(jobRequests.createdAt), desc(jobRequests.id))
        .limit(sql.placeholder('limit')),
    values,
  );
}

/** Requests per state, for /metrics. */
export async function requestCountsByState(h: History): Promise<{ state: RequestState; count: number }[]> {
  const { jobRequests } = h.t;
  const rows = await h.all(
    h.db
      .select({ state: jobRequests.state, count: sql<number>`count(*)` })
      .from(jobRequests)
      .groupBy(jobRequests.state),
  );
  // PostgreSQL's count is a bigint, which pg hands over as text.
  return rows.map((row) => ({ state: row.state, count: Number(row.count) }));
}

/** The id of the newest transition of any request (0 when there is none). */
export async function lastTransitionId(h: History): Promise<number> {
  const t = h.t.jobTransitions;
  const last = await h.one(h.db.select({ id: sql<number | string>`coalesce(max(${t.id}), 0)` }).from(t));
  // PostgreSQL's max of a bigint comes as text.
  return Number(last?.id ?? 0);
}

/** Ids of the transitions with ids in (after, upTo]. */
export async function transitionIdsIn(h: History, after: number, upTo: number): Promise<number[]> {
  const t = h.t.jobTransitions;
  const rows = await h.all(
    h.db
      .select({ id: t.id })
      .from(t)
      .where(and(gt(t.id, after), lte(t.id, upTo))),
  );
  return rows.map((r) => r.id);
}

/** The transitions after id `after`, oldest first, a thousand at most: the UI's live feed. */
export function transitionsAfter(
  h: History,
  after: number,
): Promise<{ id: number; requestId: string; state: RequestState }[]> {
  const t = h.t.jobTransitions;
  return h.prepared(
    'liveChanges.transitions',
    () =>
      h.db
        .select({ id: t.id, requestId: t.requestId, state: t.toState })
        .from(t)
        .where(gt(t.id, sql.placeholder('after')))
        .orderBy(asc(t.id))
        .limit(1000),
    { after },
  );
}

/** Whose a request is, as the UI's live feed filters its changes: its owner, and its run's pipeline. */
export interface RequestOwnership {
  owner: string;
  runId: string | null;
  /** The pipeline of its run; null for a request not of a run. */
  pipeline: string | null;
}

/** The owner, run and run's pipeline of each of these requests: one query for a tick's changes. */
export async function ownershipOf(h: History, requestIds: readonly string[]): Promise<Map<string, RequestOwnership>> {
  const { jobRequests: t, pipelineRuns: r } = h.t;
  if (requestIds.length === 0) return new Map();
  const rows = await h.all(
    h.db
      .select({ id: t.id, owner: t.owner, runId: t.runId, pipeline: r.pipeline })
      .from(t)
      .leftJoin(r, eq(r.id, t.runId))
      .where(inArray(t.id, [...requestIds])),
  );
  return new Map(rows.map((row) => [row.id, { owner: row.owner, runId: row.runId, pipeline: row.pipeline }]));
}

/** Requests whose next attempt (a retry policy's) is due by `now`, soonest first. */
export function dueAttempts(h: History, now: number, limit: number): Promise<JobRequestRow[]> {
  const t = h.t.jobRequests;
  return h.all(
    h.db
      .select()
      .from(t)
      .where(and(isNotNull(t.retryDueAt), lte(t.retryDueAt, now)))
      .orderBy(asc(t.retryDueAt))
      .limit(limit),
  );
}

/** What the mover reads of a request whose spec says `on_pending` (src/requests/pending-mover.ts). */
export type MovableRequest = Pick<
  JobRequestRow,
  | 'id'
  | 'profile'
  | 'state'
  | 'jobId'
  | 'reason'
  | 'createdAt'
  | 'submittedAt'
  | 'startedAt'
  | 'nextAttemptId'
  | 'pendingMove'
>;

/**
 * Requests whose `on_pending` may still move them: waiting in the scheduler (`submitted`,
 * `pending`) with a move left, or half-way through a move by cancel and resubmission (its
 * cancel recorded, its next attempt not yet made). Through the partial index on `pending_move`:
 * no spec is read.
 */
export async function movableRequests(h: History, limit: number): Promise<MovableRequest[]> {
  const t = h.t.jobRequests;
  const rows = await h.all(
    h.db
      .select({
        id: t.id,
        profile: t.profile,
        state: t.state,
        jobId: t.jobId,
        reason: t.reason,
        createdAt: t.createdAt,
        submittedAt: t.submittedAt,
        startedAt: t.startedAt,
        nextAttemptId: t.nextAttemptId,
        pendingMove: t.pendingMove,
      })
      .from(t)
      .where(and(isNotNull(t.pendingMove), inArray(t.state, ['submitted', 'pending', 'cancelled'])))
      .orderBy(asc(t.createdAt))
      .limit(limit),
  );
  // Few rows: a request that starts or ends lets its pending_move go (src/requests/transition.ts),
  // but for a move's own cancel, until the move's next attempt is made.
  return rows.filter(
    (row) =>
      row.pendingMove !== null &&
      (row.state === 'cancelled'
        ? Boolean(row.pendingMove.movingTo) && row.nextAttemptId === null
        : row.pendingMove.next < row.pendingMove.partitions.length && !row.pendingMove.note),
  );
}

/**
 * When the request's next attempt is due (null: none is), its row locked until the transaction
 * ends; undefined when there is no such request. Its due time alone: not the spec, which may be large.
 */
export async function retryDueAtLocked(h: History, id: string): Promise<number | null | undefined> {
  const t = h.t.jobRequests;
  const row = await h.one(h.forUpdate(h.db.select({ retryDueAt: t.retryDueAt }).from(t).where(eq(t.id, id))));
  return row?.retryDueAt;
}

/** The attempts after the first of a request (those linked to `firstAttemptId`), in order. */
export function laterAttempts(h: History, firstAttemptId: string): Promise<JobRequestRow[]> {
  const t = h.t.jobRequests;
  return h.all(h.db.select().from(t).where(eq(t.firstAttemptId, firstAttemptId)).orderBy(asc(t.attempt)));
}

/**
 * How many attempts of the request whose first attempt is `firstAttemptId` (that one included)
 * ended with `errorCode`: the resubmits already made after a job lost before it started
 * (src/requests/lost-resubmit.ts) are counted so.
 */
export async function attemptsEndedWith(h: History, firstAttemptId: string, errorCode: string): Promise<number> {
  const t = h.t.jobRequests;
  const row = await h.one(
    h.db
      .select({ n: count() })
      .from(t)
      .where(and(or(eq(t.id, firstAttemptId), eq(t.firstAttemptId, firstAttemptId)), eq(t.errorCode, errorCode))),
  );
  return row?.n ?? 0;
}

/** Whether the request's transition log has it `running` at some time (a start seen, maybe without its time). */
export async function everRunning(h: History, id: string): Promise<boolean> {
  const t = h.t.jobTransitions;
  const row = await h.one(
    h.db
      .select({ id: t.requestId })
      .from(t)
      .where(and(eq(t.requestId, id), eq(t.toState, 'running')))
      .limit(1),
  );
  return row !== undefined;
}

/** A request's state and since when its job is missing, locked until the transaction ends. */
export function missingFactsLocked(
  h: History,
  id: string,
): Promise<Pick<JobRequestRow, 'state' | 'missingSince'> | undefined> {
  const t = h.t.jobRequests;
  return h.one(
    h.forUpdate(h.db.select({ state: t.state, missingSince: t.missingSince }).from(t).where(eq(t.id, id)).limit(1)),
  );
}
