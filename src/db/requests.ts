import {
  and,
  asc,
  type Column,
  count,
  desc,
  eq,
  getTableColumns,
  inArray,
  isNotNull,
  lt,
  or,
  type SQL,
  sql,
} from 'drizzle-orm';
import { nextTurn } from '../lib/turns.js';
import { connectionOf, type Db } from './database.js';
import { driverValue, prepared, rowDecoder, selectList } from './prepared.js';
import {
  type AttemptPolicy,
  type Deadlines,
  type JobRequestRow,
  type JobTransitionRow,
  jobRequests,
  jobTransitions,
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
  at: number;
  source: TransitionSource;
  /** A pipeline step: its run, step name, attempt and the steps it needs. */
  runId?: string;
  step?: string;
  attempt?: number;
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
}

/** Creates a request in `accepted`; a second call with the same id returns the first row. */
export function createRequest(db: Db, req: NewRequest): JobRequestRow {
  return db.transaction((tx) => {
    const existing = getRequest(tx, req.id);
    if (existing) return existing;
    insertRequest(tx, req);
    return getRequest(tx, req.id) as JobRequestRow;
  });
}

/**
 * Inserts a request in `accepted` and its first transition, in the caller's transaction, for
 * an id it has found free: nothing read back (the row's spec would be parsed again for nothing).
 * With `queued`, the row is written in `queued` with both transitions, as accepting it and then
 * moving it (src/requests/transition.ts) would leave it: a new row needs no read, savepoint and
 * UPDATE to make that move, and every submission makes it.
 */
export function insertRequest(db: Db, req: NewRequest, queued?: { source: TransitionSource; at: number }): void {
  const row: Record<(typeof INSERTED)[number], unknown> = {
    id: req.id,
    profile: req.profile,
    name: req.name,
    spec: req.spec,
    origin: req.origin,
    state: queued ? 'queued' : 'accepted',
    createdAt: req.at,
    updatedAt: queued ? queued.at : req.at,
    runId: req.runId,
    step: req.step,
    attempt: req.attempt ?? 1,
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
  };
  insertRequestStatement(db).run(INSERTED.map((key) => driverValue(requestColumns[key], row[key])));
  insertTransition(db, { requestId: req.id, fromState: null, toState: 'accepted', at: req.at, source: req.source });
  if (queued) {
    insertTransition(db, {
      requestId: req.id,
      fromState: 'accepted',
      toState: 'queued',
      at: queued.at,
      source: queued.source,
    });
  }
}

const placeholder = sql.placeholder;

const requestColumns = getTableColumns(jobRequests);
const decodeRequest = rowDecoder<JobRequestRow>(requestColumns);

/** The columns a new request is written with; the others keep their defaults (or NULL). */
const INSERTED = [
  'id',
  'profile',
  'name',
  'spec',
  'origin',
  'state',
  'createdAt',
  'updatedAt',
  'runId',
  'step',
  'attempt',
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
] as const satisfies readonly (keyof typeof requestColumns)[];

const insertRequestStatement = (db: Db) =>
  prepared(db, 'requests.insert', () =>
    connectionOf(db).prepare(
      `insert into job_requests (${INSERTED.map((key) => `"${requestColumns[key].name}"`).join(', ')})
       values (${INSERTED.map(() => '?').join(', ')})`,
    ),
  );

export type TransitionRecord = Omit<typeof jobTransitions.$inferInsert, 'id'>;

/** Appends a row to a request's transition log; the caller has moved the request (requests/transition.ts). */
export function insertTransition(db: Db, record: TransitionRecord): void {
  prepared(db, 'transitions.insert', () =>
    connectionOf(db).prepare(
      'insert into job_transitions (request_id, from_state, to_state, at, source, raw_state, reason, stale, detail) values (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ),
  ).run(
    record.requestId,
    record.fromState ?? null,
    record.toState,
    record.at,
    record.source,
    record.rawState ?? null,
    record.reason ?? null,
    record.stale ? 1 : 0,
    record.detail ?? null,
  );
}

export type RequestPatch = Partial<Omit<JobRequestRow, 'id'>>;

/** A request column by its key; a patch that names no column is a programming error, said as such. */
function columnOf(key: string): Column {
  const column = (requestColumns as Record<string, Column | undefined>)[key];
  if (!column) throw new Error(`job_requests has no column "${key}"`);
  return column;
}

/**
 * UPDATE of the columns `set` names, prepared once per set of names: the poller, the
 * submitter and the API each write a handful of shapes, again and again.
 */
export function updateRequest(db: Db, requestId: string, set: RequestPatch): void {
  const keys = (Object.keys(set) as (keyof RequestPatch)[]).filter((key) => set[key] !== undefined).sort();
  if (keys.length === 0) return;
  const columns = keys.map(columnOf);
  prepared(db, `requests.update:${keys.join(',')}`, () =>
    connectionOf(db).prepare(
      `update job_requests set ${columns.map((column) => `"${column.name}" = ?`).join(', ')} where id = ?`,
    ),
  ).run(...keys.map((key, i) => driverValue(columns[i] as Column, set[key])), requestId);
}

/** Sets columns without a state change (freshness of the last sighting, accounting fields). */
export function patchRequest(db: Db, requestId: string, patch: Partial<Omit<JobRequestRow, 'id' | 'state'>>): void {
  updateRequest(db, requestId, patch);
}

/** A request's state alone: without its spec (up to a megabyte of JSON) to read and parse. */
export function requestStateOf(db: Db, id: string): JobRequestRow['state'] | undefined {
  return prepared(db, 'requests.stateById', () =>
    connectionOf(db).prepare<[string], JobRequestRow['state']>('select state from job_requests where id = ?').pluck(),
  ).get(id);
}

/** What a state change reads of a request: not its spec (up to a megabyte of JSON) to parse. */
export type TransitionFacts = Pick<JobRequestRow, 'state' | 'rawState' | 'webhookUrl' | 'runId' | 'retryPolicy'>;

const factColumns = {
  state: jobRequests.state,
  rawState: jobRequests.rawState,
  webhookUrl: jobRequests.webhookUrl,
  runId: jobRequests.runId,
  // A few hundred bytes at most: whether an end makes another attempt.
  retryPolicy: jobRequests.retryPolicy,
};
const decodeFacts = rowDecoder<TransitionFacts>(factColumns);

export function transitionFactsOf(db: Db, id: string): TransitionFacts | undefined {
  const row = prepared(db, 'requests.transitionFacts', () =>
    connectionOf(db).prepare<[string], Record<string, unknown>>(
      `select ${selectList(factColumns)} from job_requests where id = ?`,
    ),
  ).get(id);
  return row && decodeFacts(row);
}

export function getRequest(db: Db, id: string): JobRequestRow | undefined {
  const row = prepared(db, 'requests.byId', () =>
    connectionOf(db).prepare<[string], Record<string, unknown>>(
      `select ${selectList(requestColumns)} from job_requests where id = ?`,
    ),
  ).get(id);
  return row && decodeRequest(row);
}

/** The request that has this Slurm job on this profile, if any. */
export function requestByJobId(db: Db, profile: string, jobId: number): JobRequestRow | undefined {
  const row = prepared(db, 'requests.byJobId', () =>
    connectionOf(db).prepare<[string, number], Record<string, unknown>>(
      `select ${selectList(requestColumns)} from job_requests where profile = ? and job_id = ?`,
    ),
  ).get(profile, jobId);
  return row && decodeRequest(row);
}

export function transitionsOf(db: Db, requestId: string): JobTransitionRow[] {
  return prepared(db, 'transitions.ofRequest', () =>
    db
      .select()
      .from(jobTransitions)
      .where(eq(jobTransitions.requestId, placeholder('requestId')))
      .orderBy(asc(jobTransitions.at), asc(jobTransitions.id))
      .prepare(),
  ).all({ requestId });
}

/** The columns polling reads and compares; not the spec, which may be large. */
const trackedColumns = {
  id: jobRequests.id,
  state: jobRequests.state,
  name: jobRequests.name,
  jobId: jobRequests.jobId,
  jobConfirmedAt: jobRequests.jobConfirmedAt,
  rawState: jobRequests.rawState,
  reason: jobRequests.reason,
  exitCode: jobRequests.exitCode,
  signal: jobRequests.signal,
  startedAt: jobRequests.startedAt,
  endedAt: jobRequests.endedAt,
  submittedAt: jobRequests.submittedAt,
  createdAt: jobRequests.createdAt,
  missingSince: jobRequests.missingSince,
  stdoutPath: jobRequests.stdoutPath,
  stderrPath: jobRequests.stderrPath,
  arrayTaskCount: jobRequests.arrayTaskCount,
};
export type TrackedRequest = Pick<JobRequestRow, keyof typeof trackedColumns>;

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
export async function trackedRequests(db: Db, profile: string): Promise<TrackedRequest[]> {
  // better-sqlite3 makes the objects, named as TrackedRequest's keys: drizzle's mapping of each
  // column of 10,000 rows (plain text and integers, nothing to convert) was a sixth of a cycle.
  const page = prepared(db, 'requests.trackedPage', () =>
    connectionOf(db).prepare<{ profile: string; state: string; after: number }, TrackedRequest & { rowid: number }>(
      `select ${selectList(trackedColumns)}, rowid from job_requests
       where profile = :profile and state = :state and job_id is not null and rowid > :after
       order by rowid limit ${TRACKED_PAGE_ROWS}`,
    ),
  );
  const tracked = new Map<string, TrackedRequest>();
  let sinceTurn = 0;
  for (const state of FOLLOWED_STATES) {
    let after = 0;
    for (;;) {
      // A profile of a few hundred jobs is read in one turn; a state with none costs nothing.
      if (sinceTurn >= TRACKED_PAGE_ROWS / 2) {
        await nextTurn();
        sinceTurn = 0;
      }
      const rows = page.all({ profile, state, after });
      sinceTurn += rows.length;
      for (const row of rows) tracked.set(row.id, row);
      const last = rows.at(-1);
      if (!last || rows.length < TRACKED_PAGE_ROWS) break;
      after = last.rowid;
    }
  }
  // In job id order, as one query by the (profile, job_id) index gave them: the poller's chunks
  // of ids, and so their URLs (and the proxy's kept answers), do not change with job states.
  return [...tracked.values()].sort((a, b) => (a.jobId as number) - (b.jobId as number));
}

/**
 * Submissions of the profile whose answer is not recorded yet, by job name: the earliest
 * attempt's start (ms). The job such an attempt makes exists before its id is recorded.
 */
export function submissionsInFlight(db: Db, profile: string): Map<string, number> {
  const rows = prepared(db, 'requests.submissionsInFlight', () =>
    db
      .select({ name: jobRequests.name, since: sql<number>`min(${jobRequests.submitAttemptAt})` })
      .from(jobRequests)
      .where(
        and(
          eq(jobRequests.profile, placeholder('profile')),
          inArray(jobRequests.state, ['submitting', 'waiting']),
          sql`+${jobRequests.jobId} is null`,
          isNotNull(jobRequests.submitAttemptAt),
        ),
      )
      .groupBy(jobRequests.name)
      .prepare(),
  ).all({ profile });
  return new Map(rows.map((row) => [row.name, row.since]));
}

/**
 * How many requests of the profile, accepted before this one, wait on a submit limit (the
 * first of them keeps `waiting` while it is tried again). They go first: a freed slot is taken
 * in order of acceptance.
 */
export function submitLimitQueueAhead(db: Db, row: Pick<JobRequestRow, 'id' | 'profile' | 'createdAt'>): number {
  return (
    prepared(db, 'requests.submitLimitQueueAhead', () =>
      db
        .select({ n: count() })
        .from(jobRequests)
        .where(
          and(
            eq(jobRequests.profile, placeholder('profile')),
            eq(jobRequests.state, 'waiting'),
            // Unary + keeps SQLite on the (profile, state) index: by (profile, job_id) it went
            // through every request not submitted yet, for every submission (issue 14).
            sql`+${jobRequests.jobId} is null`,
            or(
              lt(jobRequests.createdAt, placeholder('createdAt')),
              // Accepted in the same millisecond: in the order they were recorded (ids are random).
              and(
                eq(jobRequests.createdAt, placeholder('createdAt')),
                sql`"job_requests".rowid < (select "r".rowid from "job_requests" "r" where "r"."id" = ${placeholder('id')})`,
              ),
            ),
          ),
        )
        .prepare(),
    ).get({ profile: row.profile, createdAt: row.createdAt, id: row.id })?.n ?? 0
  );
}

/** Requests not yet submitted (after a restart they must be queued again). */
export function unsubmittedRequests(db: Db): JobRequestRow[] {
  return db
    .select()
    .from(jobRequests)
    .where(inArray(jobRequests.state, ['accepted', 'queued', 'waiting', 'submitting']))
    .all();
}

export interface ListFilter {
  state?: RequestState[];
  profile?: string;
  /** Cursor: rows created before this (ms), for paging newest first. */
  before?: number;
  limit?: number;
}

export function listRequests(db: Db, filter: ListFilter = {}): JobRequestRow[] {
  const where: SQL[] = [];
  if (filter.state?.length) where.push(inArray(jobRequests.state, filter.state));
  if (filter.profile) where.push(eq(jobRequests.profile, filter.profile));
  if (filter.before) where.push(lt(jobRequests.createdAt, filter.before));
  return db
    .select()
    .from(jobRequests)
    .where(where.length ? and(...where) : undefined)
    .orderBy(desc(jobRequests.createdAt))
    .limit(filter.limit ?? 50)
    .all();
}
