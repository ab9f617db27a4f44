import { hasMarker } from '../sched/client.js';
import type { SchedJob } from '../sched/job-model.js';

/**
 * Whether a scheduler record is a request's own job. A job id alone does not say so: slurmctld
 * killed with SIGKILL (a crash) forgets the jobs it accepted since its last state save and, once
 * back, gives their ids to the next jobs submitted.
 *
 * - `ours`: the record carries the request's marker (`schedflow:<id>` in its comment);
 * - `other`: it is another job: a controller record without the marker (the controller always
 *   keeps the comment, and every schedflow submission carries the marker), a record whose comment
 *   is another's, or one with another job name or submitted before the request existed;
 * - `unsure`: an accounting record without a comment (slurmdbd keeps comments only with
 *   `AccountingStoreFlags=job_comment`) whose name and submit time fit. A later submit time says
 *   nothing: Slurm stamps a requeued job with a new one.
 */
export type JobIdentity = 'ours' | 'other' | 'unsure';

/** Seconds a job's submit time (slurmctld's clock) may precede the request's creation (the daemon's). */
const CLOCK_LEEWAY_SEC = 60;

export interface IdentityOf {
  id: string;
  /** The job name the request submitted (its spec's name). */
  name: string;
  createdAt: number;
}

export function jobIdentity(
  job: Pick<SchedJob, 'source' | 'comment' | 'name' | 'submit_time'>,
  request: IdentityOf,
): JobIdentity {
  if (job.comment !== '' || job.source === 'controller') return hasMarker(job.comment, request.id) ? 'ours' : 'other';
  if (job.name !== request.name) return 'other';
  if (job.submit_time !== null && job.submit_time < Math.floor(request.createdAt / 1000) - CLOCK_LEEWAY_SEC) {
    return 'other';
  }
  return 'unsure';
}

/** The reason recorded on a request whose job the controller lost. */
export const LOST_BY_CONTROLLER_REASON = 'JobLostByController';
export const LOST_BY_CONTROLLER_CODE = 'SCHEDFLOW_ERR_JOB_LOST_BY_CONTROLLER';

export function lostByControllerMessage(jobId: number, why: string): string {
  return `the controller lost this request's job ${jobId} (restarted without its state?): ${why}; it is not resubmitted (it may have started before the loss): submit it again if it should run`;
}
