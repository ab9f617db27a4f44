import { and, desc, eq, gte, inArray, isNotNull, isNull, lt, or, type SQL, sql } from 'drizzle-orm';
import type { SchedJob } from '../sched/job-model.js';
import type { History } from './history.js';
import type { AccountingJobRow, ArrayTaskRow, profileSync, RequestState } from './schema.js';

/** Queries of accounting records (slurmdbd's view) and each profile's sync progress. */

/** The columns an accounting record sets (all but the link to a request and the sync time). */
function recordValues(profile: string, job: SchedJob) {
  return {
    profile,
    jobId: job.job_id,
    name: job.name,
    account: job.account,
    user: job.user,
    partition: job.partition,
    state: job.state,
    rawState: job.state_flags.join(','),
    reason: job.reason,
    exitCode: job.exit_code,
    signal: job.signal?.id ?? null,
    submitTime: job.submit_time,
    startTime: job.start_time,
    endTime: job.end_time,
    elapsedSec: job.elapsed_sec,
    timeLimitMin: job.time_limit === null || job.time_limit === 'infinite' ? null : job.time_limit.minutes,
    nodes: job.nodes,
    cpus: job.cpus,
    memoryPerNodeMb: job.memory_per_node_mb,
    cpuTimeSec: job.cpu_time_sec,
    peakMemoryMb: job.peak_memory_mb ?? null,
    comment: job.comment,
  };
}

export async function upsertAccountingJob(
  h: History,
  profile: string,
  job: SchedJob,
  requestId: string | null,
  at: number,
): Promise<void> {
  const values = { ...recordValues(profile, job), requestId, syncedAt: at };
  const t = h.t.accountingJobs;
  // Prepared once per connection (its columns are always these): reconcile and the poller write
  // thousands of records at a time. Every column is plain text or a number, which drizzle binds
  // as given (null included).
  await h.preparedRun(
    'accounting.upsert',
    () => {
      const set = Object.fromEntries(Object.keys(values).map((key) => [key, sql.placeholder(key)])) as never;
      return h.db
        .insert(t)
        .values(set)
        .onConflictDoUpdate({ target: [t.profile, t.jobId], set });
    },
    values,
  );
}

/** Grow while a job runs, without anything else about it changing. */
const RUNNING_COUNTERS = new Set(['elapsedSec', 'cpuTimeSec']);

/**
 * The records among `jobs` stored already as they are now. slurmdbd answers every job active
 * in a window, so each reconcile run gets every running job of the account again; those that
 * have not changed since (the running time aside) need no write (issue 14: one write per active
 * record every minute was 7 s of a core at 12,000 of them).
 */
export async function unchangedAccountingJobs(
  h: History,
  profile: string,
  jobs: readonly SchedJob[],
): Promise<Set<number>> {
  const unchanged = new Set<number>();
  if (jobs.length === 0) return unchanged;
  const t = h.t.accountingJobs;
  const rows = await h.all(
    h.db
      .select()
      .from(t)
      .where(
        and(
          eq(t.profile, profile),
          inArray(
            t.jobId,
            jobs.map((j) => j.job_id),
          ),
        ),
      ),
  );
  const stored = new Map(rows.map((row) => [row.jobId, row]));
  for (const job of jobs) {
    const row = stored.get(job.job_id);
    if (!row) continue;
    const same = Object.entries(recordValues(profile, job)).every(
      ([key, value]) => RUNNING_COUNTERS.has(key) || row[key as keyof AccountingJobRow] === value,
    );
    if (same) unchanged.add(job.job_id);
  }
  return unchanged;
}

export function getAccountingJob(h: History, profile: string, jobId: number): Promise<AccountingJobRow | undefined> {
  const t = h.t.accountingJobs;
  return h.one(
    h.db
      .select()
      .from(t)
      .where(and(eq(t.profile, profile), eq(t.jobId, jobId)))
      .limit(1),
  );
}

/**
 * Accounting records with a start time that may be a request's job: those linked to it, and the
 * one now stored under its job id (which may be another job's: the caller tells, by jobIdentity).
 */
export function startedRecordsOf(
  h: History,
  profile: string,
  requestId: string,
  jobId: number,
): Promise<AccountingJobRow[]> {
  const t = h.t.accountingJobs;
  return h.all(
    h.db
      .select()
      .from(t)
      .where(
        and(isNotNull(t.startTime), or(eq(t.requestId, requestId), and(eq(t.profile, profile), eq(t.jobId, jobId)))),
      ),
  );
}

export type ProfileSyncRow = typeof profileSync.$inferSelect;

export async function getProfileSync(h: History, profile: string): Promise<ProfileSyncRow | undefined> {
  const t = h.t.profileSync;
  const rows = await h.prepared(
    'profileSync.byProfile',
    () =>
      h.db
        .select()
        .from(t)
        .where(eq(t.profile, sql.placeholder('profile'))),
    { profile },
  );
  return rows[0];
}

export async function updateProfileSync(
  h: History,
  profile: string,
  patch: Partial<Omit<ProfileSyncRow, 'profile'>>,
): Promise<void> {
  const values = { ...patch, updatedAt: Date.now() };
  const t = h.t.profileSync;
  await h.run(
    h.db
      .insert(t)
      .values({ profile, ...values })
      .onConflictDoUpdate({ target: t.profile, set: values }),
  );
}

/**
 * Moves the profile's import point (unix seconds) to `to`, never back: an import of an older
 * window that ends after a newer one (another host's, or a run slower than the next) would
 * otherwise make the next run import again what both did. The windows a run imports run on
 * from the point it read, so the furthest point any run reached has everything before it.
 */
export async function advanceAccountingSync(h: History, profile: string, to: number, at: number): Promise<void> {
  const t = h.t.profileSync;
  const values = { accountingSyncedTo: to, accountingSyncedAt: at, updatedAt: Date.now() };
  await h.run(
    h.db
      .insert(t)
      .values({ profile, ...values })
      .onConflictDoUpdate({
        target: t.profile,
        set: values,
        setWhere: or(isNull(t.accountingSyncedTo), lt(t.accountingSyncedTo, to)),
      }),
  );
}

/**
 * Records the last accounting answer (it came, or why it did not); true when it differs from
 * the one before (worth a log line). The poll and the import both record theirs, and other
 * hosts' too: the one before is read, locked, in the transaction that writes the new one, so
 * that of two answers saying the same change only one is told it is new.
 */
export function recordAccountingAnswer(
  h: History,
  profile: string,
  error: string | null,
  at = Date.now(),
): Promise<boolean> {
  return h.transaction(async (tx) => {
    const t = tx.t.profileSync;
    const before = await tx.one(
      tx.forUpdate(tx.db.select({ accountingError: t.accountingError }).from(t).where(eq(t.profile, profile)).limit(1)),
    );
    await updateProfileSync(tx, profile, {
      accountingOk: error === null,
      accountingError: error,
      accountingCheckedAt: at,
    });
    return (before?.accountingError ?? null) !== error;
  });
}

export interface HistoryRow {
  profile: string;
  jobId: number;
  requestId: string | null;
  /** True for jobs schedflow did not submit. */
  external: boolean;
  name: string;
  account: string;
  user: string;
  partition: string;
  /** Slurm's state from accounting, and schedflow's own, side by side. */
  accountingState: string;
  localState: string | null;
  /**
   * The record is one task of an array request (its own job id, or the array's): which, and the
   * task's state; `localState` is then the whole array's.
   */
  taskId: number | null;
  taskState: string | null;
  exitCode: number | null;
  submitTimeSec: number | null;
  startTimeSec: number | null;
  endTimeSec: number | null;
  elapsedSec: number | null;
  nodes: string | null;
  cpus: number | null;
  cpuTimeSec: number | null;
}

export interface AccountingHistoryFilter {
  profile?: string;
  /** Slurm base states (COMPLETED, FAILED, …). */
  states?: string[];
  account?: string;
  /** Only records of the requests of this pipeline's runs. */
  pipeline?: string;
  /** Submit time, Unix seconds: from (inclusive), until (exclusive). */
  sinceSec?: number;
  untilSec?: number;
  /** true: only jobs schedflow did not submit; false: only its own. */
  external?: boolean;
  /**
   * Only the records of this owner's requests, and external jobs' when `ownerSeesExternal`
   * (they are no owner's: the `default` owner, which saw them before owners existed, keeps them);
   * absent: every record.
   */
  owner?: string;
  ownerSeesExternal?: boolean;
  /** The sort key of the last row of the page before: submit time (0 when unknown), job id, profile. */
  after?: readonly [number, number, string];
  limit: number;
}

export interface AccountingHistoryRow {
  accounting: AccountingJobRow;
  /** schedflow's state of the request the record is (of the whole array, for a task's record). */
  localState: RequestState | null;
  /** The array task the record is, when it is one of an array request's, and the task's state. */
  taskId: number | null;
  taskState: ArrayTaskRow['state'] | null;
}

/**
 * The history: accounting records with the local request beside them, newest submission first
 * (records without a submit time last), with a unique order for keyset pages. The one query
 * behind the API's `/history`, the UI's history page and `schedflow jobs history`.
 */
export function accountingHistory(h: History, filter: AccountingHistoryFilter): Promise<AccountingHistoryRow[]> {
  const { accountingJobs, jobRequests, arrayTasks, pipelineRuns } = h.t;
  const submitKey = sql<number>`coalesce(${accountingJobs.submitTime}, 0)`;
  const where: SQL[] = [];
  if (filter.profile) where.push(eq(accountingJobs.profile, filter.profile));
  if (filter.states?.length) where.push(inArray(accountingJobs.state, filter.states));
  if (filter.account) where.push(eq(accountingJobs.account, filter.account));
  if (filter.sinceSec !== undefined) where.push(gte(accountingJobs.submitTime, filter.sinceSec));
  if (filter.untilSec !== undefined) where.push(lt(accountingJobs.submitTime, filter.untilSec));
  // An owner sees the records of its own requests only: external jobs are no owner's.
  if (filter.owner !== undefined) {
    const own = eq(jobRequests.owner, filter.owner);
    where.push(filter.ownerSeesExternal ? (or(own, isNull(accountingJobs.requestId)) as SQL) : own);
  }
  if (filter.external === true) where.push(isNull(accountingJobs.requestId));
  if (filter.external === false) where.push(isNotNull(accountingJobs.requestId));
  if (filter.pipeline) {
    where.push(
      inArray(
        jobRequests.runId,
        h.db.select({ id: pipelineRuns.id }).from(pipelineRuns).where(eq(pipelineRuns.pipeline, filter.pipeline)),
      ),
    );
  }
  if (filter.after) {
    const [submit, jobId, profile] = filter.after;
    where.push(
      sql`(${submitKey}, ${accountingJobs.jobId}, ${accountingJobs.profile}) < (${submit}, ${jobId}, ${profile})`,
    );
  }
  return h.all(
    h.db
      .select({
        accounting: accountingJobs,
        localState: jobRequests.state,
        taskId: arrayTasks.taskId,
        taskState: arrayTasks.state,
      })
      .from(accountingJobs)
      .leftJoin(jobRequests, eq(jobRequests.id, accountingJobs.requestId))
      // A task of an array request (under its own job id) is the request's, not external.
      .leftJoin(arrayTasks, arrayTaskOfRecord(h))
      .where(where.length ? and(...where) : undefined)
      .orderBy(desc(submitKey), desc(accountingJobs.jobId), desc(accountingJobs.profile))
      .limit(filter.limit),
  );
}

/** The values of a column the records have (their Slurm states, their accounts), for a filter's choices. */
export async function accountingValues(h: History, column: 'state' | 'account'): Promise<string[]> {
  const { accountingJobs } = h.t;
  const rows = await h.all(h.db.selectDistinct({ value: accountingJobs[column] }).from(accountingJobs));
  return rows.map((r) => r.value).sort();
}

/** Accounting records with the local request beside them, newest first, as flat rows (the CLI's). */
export async function history(
  h: History,
  filter: { profile?: string; sinceSec?: number; limit?: number } = {},
): Promise<HistoryRow[]> {
  const rows = await accountingHistory(h, { ...filter, limit: filter.limit ?? 100 });
  return rows.map(({ accounting: a, localState, taskId, taskState }) => ({
    profile: a.profile,
    jobId: a.jobId,
    requestId: a.requestId,
    external: a.requestId === null,
    name: a.name,
    account: a.account,
    user: a.user,
    partition: a.partition,
    accountingState: a.state,
    localState,
    taskId,
    taskState,
    exitCode: a.exitCode,
    submitTimeSec: a.submitTime,
    startTimeSec: a.startTime,
    endTimeSec: a.endTime,
    elapsedSec: a.elapsedSec,
    nodes: a.nodes,
    cpus: a.cpus,
    cpuTimeSec: a.cpuTimeSec,
  }));
}

/** Joins an accounting record to the array task it is (its request's task under its job id). */
export function arrayTaskOfRecord(h: History) {
  const { accountingJobs, arrayTasks } = h.t;
  return and(eq(arrayTasks.requestId, accountingJobs.requestId), eq(arrayTasks.jobId, accountingJobs.jobId));
}
