import { SchedflowError } from '../errors.js';
import type { Clock } from '../lib/clock.js';
import type { SchedClient } from '../sched/client.js';
import type { SchedJob } from '../sched/job-model.js';

/**
 * What accounting says, asked directly, of a job id whose job the controller lost: the ground for
 * submitting the request again (lost-resubmit.ts). The records imported into the history cannot
 * be that ground: they are kept one per (profile, job id), so once the job that has the id now is
 * imported, the lost job's record (and its start time) is overwritten there. slurmdbd keeps every
 * job of a reused id, told apart by marker, comment and submit time (job-identity.ts).
 */
export type AccountingEvidence =
  /** A fresh answer naming the id: every record accounting has under it (maybe none). */
  | { kind: 'answered'; records: readonly SchedJob[] }
  /** Not asked, unreachable, served stale, or a cluster without accounting: a start cannot be ruled out. */
  | { kind: 'unknown' };

export const UNKNOWN_ACCOUNTING: AccountingEvidence = { kind: 'unknown' };

/** How far past now the window ends: a URL no cached answer has, as the poller's afresh query. */
const AFRESH_WINDOW_SEC = 86_400;

/**
 * Asks accounting for the records under `jobId` since the request was created (one query, made
 * only when a job is found lost: rare). Any failure, or an answer served from a cache, is
 * `unknown`: no resubmit can rest on it.
 */
export async function askLostJobRecords(
  client: SchedClient,
  clock: Clock,
  row: { jobId: number; createdAt: number },
  signal?: AbortSignal,
): Promise<AccountingEvidence> {
  const account = client.profile.account;
  try {
    const answer = await client.listAccountingJobs(
      {
        jobIds: [row.jobId],
        accounts: account ? [account] : undefined,
        startTime: Math.floor(row.createdAt / 1000) - 60,
        endTime: Math.floor(clock.now() / 1000) + AFRESH_WINDOW_SEC,
      },
      { forPolling: true, signal },
    );
    if (answer.freshness.stale) return UNKNOWN_ACCOUNTING;
    return {
      kind: 'answered',
      records: answer.data.filter((job) => job.job_id === row.jobId && job.array_job_id === null),
    };
  } catch (error) {
    if (error instanceof SchedflowError) return UNKNOWN_ACCOUNTING;
    throw error;
  }
}
