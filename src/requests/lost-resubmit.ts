import { startedRecordsOf } from '../db/accounting.js';
import type { History } from '../db/history.js';
import { attemptsEndedWith, everRunning } from '../db/requests.js';
import type { JobRequestRow } from '../db/schema.js';
import type { ErrorCode } from '../errors.js';
import { assertNever } from '../lib/assert-never.js';
import { jobIdentity } from './job-identity.js';
import type { AccountingEvidence } from './lost-evidence.js';

/**
 * Whether a request whose job the controller lost (slurmctld back from a crash without the jobs
 * it had accepted but not yet saved) is submitted again. The user asked for one run of the job:
 * a job that never started has not run, and is submitted again as a new attempt, at most
 * `SCHEDFLOW_LOST_RESUBMITS` times per request (default 1). A job that had started may have done
 * part of its work: it ends `node_fail` as before, and its retry policy, if it names NODE_FAIL,
 * decides. A job is taken as never started only on a fresh answer of accounting, asked directly
 * for the id (lost-evidence.ts), that has no started record that may be its job: without one
 * (accounting unreachable, not served by the cluster, or not asked) a start cannot be ruled out,
 * and the request ends as before, not submitted again, rather than risk running a job twice.
 * The loss itself is established by the callers (the controller's record under the id
 * is another job's, or the job is missing from the controller and from accounting past the
 * grace), so the old job cannot come back beside the new attempt: the controller keeps every
 * job it has under its own id, and gave that id to another job or has none under it.
 */

/** The error code on an attempt whose job was lost before it started and which was submitted again. */
export const LOST_BEFORE_START_CODE = 'SCHEDFLOW_ERR_JOB_LOST_BEFORE_START' satisfies ErrorCode;

/**
 * Whether this attempt was ended by the controller's loss of its job before it started and
 * submitted again: a resubmit, not its retry policy's doing (the CLI and UI say so).
 */
export function resubmittedAfterLoss(row: Pick<JobRequestRow, 'errorCode'>): boolean {
  return row.errorCode === LOST_BEFORE_START_CODE;
}

/** Whether a request has attempts to show: a retry policy, a retry or resubmit made or due. */
export function hasAttempts(
  row: Pick<JobRequestRow, 'retryPolicy' | 'retryCause' | 'retryDueAt' | 'nextAttemptId'>,
): boolean {
  return row.retryPolicy !== null || row.retryCause !== null || row.retryDueAt !== null || row.nextAttemptId !== null;
}

/** How many times a request is submitted again after a loss, unless configured. @defaultValue 1 */
export const DEFAULT_LOST_RESUBMITS = 1;

export type LostResubmitPlan =
  /** Submitted again: this is resubmit `n` of the `budget`. */
  | { kind: 'resubmit'; n: number; budget: number }
  /** A start was seen (by the poller, or in an accounting record): not submitted again. */
  | { kind: 'started' }
  /** No start seen, but accounting did not answer for the id: a start cannot be ruled out. */
  | { kind: 'unproven' }
  /** No start seen, but the budget is spent (`budget` resubmits made already). */
  | { kind: 'spent'; budget: number }
  /** `SCHEDFLOW_LOST_RESUBMITS=0`. */
  | { kind: 'off' }
  /** An array: its tasks are followed one by one, and it is never submitted again whole. */
  | { kind: 'array' };

/**
 * Decides on `row` (read locked in the caller's transaction, its job id still recorded). A start
 * counts when any record has one: the request's start time, a `running` in its transition log
 * (the light state listing moves it without a time), or an accounting record that may be its job,
 * imported or in `accounting`'s direct answer; without that answer nothing is submitted again.
 */
export async function lostResubmitPlan(
  tx: History,
  row: JobRequestRow,
  budget: number,
  accounting: AccountingEvidence,
): Promise<LostResubmitPlan> {
  if (row.arrayTaskCount !== null) return { kind: 'array' };
  if (await startSeen(tx, row, accounting)) return { kind: 'started' };
  if (budget <= 0) return { kind: 'off' };
  // A spent budget is the reason whatever accounting says: the same end, said the same way
  // whichever read (the controller's or accounting's) noticed the loss first.
  const made = await attemptsEndedWith(tx, row.firstAttemptId ?? row.id, LOST_BEFORE_START_CODE);
  if (made >= budget) return { kind: 'spent', budget };
  if (accounting.kind !== 'answered') return { kind: 'unproven' };
  return { kind: 'resubmit', n: made + 1, budget };
}

async function startSeen(tx: History, row: JobRequestRow, accounting: AccountingEvidence): Promise<boolean> {
  if (row.startedAt !== null || row.state === 'running') return true;
  if (await everRunning(tx, row.id)) return true;
  if (row.jobId === null) return false;
  const request = { id: row.id, name: row.name, createdAt: row.createdAt };
  // slurmdbd's own records under the id: every job that had it, the lost one's start kept.
  if (
    accounting.kind === 'answered' &&
    accounting.records.some((job) => job.start_time !== null && jobIdentity(job, request) !== 'other')
  ) {
    return true;
  }
  // The imported ones too (a record linked to the request outlives the id's reuse there).
  const records = await startedRecordsOf(tx, row.profile, row.id, row.jobId);
  return records.some(
    (record) =>
      record.requestId === row.id ||
      jobIdentity(
        { source: 'accounting', comment: record.comment, name: record.name, submit_time: record.submitTime },
        request,
      ) !== 'other',
  );
}

/** What the request's end says, in the user's words: the loss, then what schedflow does about it. */
export function lostMessage(jobId: number, why: string, plan: LostResubmitPlan): string {
  switch (plan.kind) {
    case 'resubmit':
      return `the controller lost job ${jobId} before it started (restarted without its state?): ${why}; it never ran, so it is submitted again as a new attempt (resubmit ${plan.n} of ${plan.budget}, SCHEDFLOW_LOST_RESUBMITS)`;
    case 'started':
      return `the controller lost this request's job ${jobId} (restarted without its state?): ${why}; it had started, so it is not submitted again (it may have done part of its work): a retry policy naming NODE_FAIL decides, else submit it again if it should run`;
    case 'unproven':
      return `the controller lost this request's job ${jobId} (restarted without its state?): ${why}; no start of it was seen, but accounting could not be asked whether it ran (unreachable, or not served by this cluster), so it is not submitted again (it may have run): submit it again if it should run`;
    case 'spent':
      return `the controller lost this request's job ${jobId} (restarted without its state?): ${why}; no start of it was seen, but this request was already submitted again ${plan.budget === 1 ? 'once' : `${plan.budget} times`} after such a loss (SCHEDFLOW_LOST_RESUBMITS=${plan.budget}): not again; submit it again if it should run`;
    case 'off':
      return `the controller lost this request's job ${jobId} (restarted without its state?): ${why}; no start of it was seen, and resubmits after a loss are off (SCHEDFLOW_LOST_RESUBMITS=0): submit it again if it should run`;
    case 'array':
      return `the controller lost this request's job ${jobId} (restarted without its state?): ${why}; an array is not submitted again after a loss: submit it again if it should run`;
    default:
      return assertNever(plan);
  }
}
