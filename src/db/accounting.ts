import { and, desc, eq, gte, inArray, sql } from 'drizzle-orm';
import type { SchedJob } from '../sched/job-model.js';
import type { Db } from './database.js';
import { placeholders, prepared } from './prepared.js';
import { type AccountingJobRow, accountingJobs, jobRequests, profileSync } from './schema.js';

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

export function upsertAccountingJob(
  db: Db,
  profile: string,
  job: SchedJob,
  requestId: string | null,
  at: number,
): void {
  const values = { ...recordValues(profile, job), requestId, syncedAt: at };
  // Prepared once per connection (its columns are always these): reconcile and the poller write
  // thousands of records at a time.
  prepared(db, 'accounting.upsert', () => {
    const set = placeholders(Object.keys(values)) as unknown as typeof accountingJobs.$inferInsert;
    return db
      .insert(accountingJobs)
      .values(set)
      .onConflictDoUpdate({ target: [accountingJobs.profile, accountingJobs.jobId], set })
      .prepare();
  }).run(values);
}

/** Grow while a job runs, without anything else about it changing. */
const RUNNING_COUNTERS = new Set(['elapsedSec', 'cpuTimeSec']);

/**
 * The records among `jobs` stored already as they are now. slurmdbd answers every job active
 * in a window, so each reconcile run gets every running job of the account again; those that
 * have not changed since (the running time aside) need no write (issue 14: one write per active
 * record every minute was 7 s of a core at 12,000 of them).
 */
export function unchangedAccountingJobs(db: Db, profile: string, jobs: readonly SchedJob[]): Set<number> {
  const unchanged = new Set<number>();
  if (jobs.length === 0) return unchanged;
  const stored = new Map(
    db
      .select()
      .from(accountingJobs)
      .where(
        and(
          eq(accountingJobs.profile, profile),
          inArray(
            accountingJobs.jobId,
            jobs.map((j) => j.job_id),
          ),
        ),
      )
      .all()
      .map((row) => [row.jobId, row]),
  );
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

export function getAccountingJob(db: Db, profile: string, jobId: number): AccountingJobRow | undefined {
  return db
    .select()
    .from(accountingJobs)
    .where(and(eq(accountingJobs.profile, profile), eq(accountingJobs.jobId, jobId)))
    .get();
}

export type ProfileSyncRow = typeof profileSync.$inferSelect;

export function getProfileSync(db: Db, profile: string): ProfileSyncRow | undefined {
  return prepared(db, 'profileSync.byProfile', () =>
    db
      .select()
      .from(profileSync)
      .where(eq(profileSync.profile, sql.placeholder('profile')))
      .prepare(),
  ).get({ profile });
}

export function updateProfileSync(db: Db, profile: string, patch: Partial<Omit<ProfileSyncRow, 'profile'>>): void {
  const values = { ...patch, updatedAt: Date.now() };
  db.insert(profileSync)
    .values({ profile, ...values })
    .onConflictDoUpdate({ target: profileSync.profile, set: values })
    .run();
}

/** The profile's last accounting answer: it came (no error), or why it did not. */
/** Records the last accounting answer; true when it differs from the one before (worth a log line). */
export function recordAccountingAnswer(db: Db, profile: string, error: string | null, at = Date.now()): boolean {
  const before = getProfileSync(db, profile);
  updateProfileSync(db, profile, { accountingOk: error === null, accountingError: error, accountingCheckedAt: at });
  return (before?.accountingError ?? null) !== error;
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
  exitCode: number | null;
  submitTimeSec: number | null;
  startTimeSec: number | null;
  endTimeSec: number | null;
  elapsedSec: number | null;
  nodes: string | null;
  cpus: number | null;
  cpuTimeSec: number | null;
}

/** Accounting records with the local request beside them, newest first. */
export function history(db: Db, filter: { profile?: string; sinceSec?: number; limit?: number } = {}): HistoryRow[] {
  const conditions = [];
  if (filter.profile) conditions.push(eq(accountingJobs.profile, filter.profile));
  if (filter.sinceSec !== undefined) conditions.push(gte(accountingJobs.submitTime, filter.sinceSec));
  return db
    .select({
      profile: accountingJobs.profile,
      jobId: accountingJobs.jobId,
      requestId: accountingJobs.requestId,
      external: sql<boolean>`${accountingJobs.requestId} is null`.mapWith(Boolean),
      name: accountingJobs.name,
      account: accountingJobs.account,
      user: accountingJobs.user,
      partition: accountingJobs.partition,
      accountingState: accountingJobs.state,
      localState: jobRequests.state,
      exitCode: accountingJobs.exitCode,
      submitTimeSec: accountingJobs.submitTime,
      startTimeSec: accountingJobs.startTime,
      endTimeSec: accountingJobs.endTime,
      elapsedSec: accountingJobs.elapsedSec,
      nodes: accountingJobs.nodes,
      cpus: accountingJobs.cpus,
      cpuTimeSec: accountingJobs.cpuTimeSec,
    })
    .from(accountingJobs)
    .leftJoin(jobRequests, eq(jobRequests.id, accountingJobs.requestId))
    .where(conditions.length ? and(...conditions) : undefined)
    .orderBy(desc(accountingJobs.submitTime))
    .limit(filter.limit ?? 100)
    .all();
}
