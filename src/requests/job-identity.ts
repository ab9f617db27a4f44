import { isTerminalState, type SchedJob } from '../sched/job-model.js';
import { hasMarker } from '../sched/marker-lookup.js';

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

/** Seconds slurmctld's clock (a job's submit time) may differ from the daemon's. */
const CLOCK_LEEWAY_SEC = 60;

export interface IdentityOf {
  id: string;
  /** The job name the request submitted (its spec's name). */
  name: string;
  createdAt: number;
}

export interface RequestOfRecords extends IdentityOf {
  /** When slurmctld answered the submission (or, adopted, when schedflow found the job). */
  submittedAt: number | null;
  /** When the controller's record under the id was seen carrying the request's marker. */
  jobConfirmedAt: number | null;
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

/**
 * The request's own record among accounting's records under its job id:
 * - `ours`: one carrying its marker, else the newest that may be its job;
 * - `suspect`: its record, not ended, has another job's beside it, submitted since (the controller
 *   lost its job in a crash and gave the id again: see givenAgain); or the newest that may be its
 *   job was submitted well after the request's submission:
 *   a requeue of its job (Slurm stamps a new submit time) or, after a slurmctld crash, another
 *   job of the same name given its id. Or a submission of the same name is in flight (`inFlight`,
 *   name → its attempt's start in ms), and the record may be the job it has just made, under an id
 *   the controller lost and gave again, before that submission's answer is recorded. Only the
 *   controller's record (which keeps the marker) can say which: the poller asks for it, for these
 *   few, instead of for every new job;
 * - `reused`: none may be its job, and one was submitted after the request was made: the
 *   controller lost its job and gave the id again;
 * - `none`: no record of it (yet).
 */
export type OwnRecord =
  | { kind: 'ours'; record: SchedJob }
  | { kind: 'suspect'; record: SchedJob }
  | { kind: 'reused'; by: SchedJob }
  | { kind: 'none' };

export function ownRecord(
  records: SchedJob[],
  request: RequestOfRecords,
  inFlight: ReadonlyMap<string, number> = new Map(),
): OwnRecord {
  const identities = records.map((job) => ({ job, identity: jobIdentity(job, request) }));
  const others = identities.filter((x) => x.identity === 'other').map((x) => x.job);
  const marked = identities.find((x) => x.identity === 'ours');
  if (marked) return { kind: givenAgain(marked.job, others, request) ? 'suspect' : 'ours', record: marked.job };
  const maybe = identities.filter((x) => x.identity === 'unsure').map((x) => x.job);
  if (maybe.length > 0) {
    const newest = maybe.reduce((a, b) => ((b.submit_time ?? 0) >= (a.submit_time ?? 0) ? b : a));
    if (givenAgain(newest, others, request)) return { kind: 'suspect', record: newest };
    const submittedSec = request.submittedAt === null ? null : Math.floor(request.submittedAt / 1000);
    const late =
      request.jobConfirmedAt === null &&
      submittedSec !== null &&
      newest.submit_time !== null &&
      newest.submit_time > submittedSec + CLOCK_LEEWAY_SEC;
    const racingSince = inFlight.get(newest.name);
    const racing =
      racingSince !== undefined &&
      (newest.submit_time === null || newest.submit_time >= Math.floor(racingSince / 1000) - CLOCK_LEEWAY_SEC);
    return { kind: late || racing ? 'suspect' : 'ours', record: newest };
  }
  const createdSec = Math.floor(request.createdAt / 1000);
  const by = records.find((job) => (job.submit_time ?? 0) >= createdSec);
  return by ? { kind: 'reused', by } : { kind: 'none' };
}

/**
 * Whether another job's record under the id was submitted since `own`, which has not ended: the
 * controller lost this job and gave the id again (slurmdbd keeps the lost one, pending for
 * ever), so the controller's state under the id (a start, say) may be the other job's. Only
 * the controller's record, which keeps the marker, says whose job it has now. Not when the
 * controller showed this request's marker after the other was submitted: it held the id then.
 * An ended record is this job's whole life, whatever had the id since.
 */
function givenAgain(own: SchedJob, others: readonly SchedJob[], request: RequestOfRecords): boolean {
  if (own.submit_time === null || isTerminalState(own.state)) return false;
  const since = own.submit_time;
  const confirmedSec = request.jobConfirmedAt === null ? null : Math.floor(request.jobConfirmedAt / 1000);
  return others.some(
    (job) =>
      job.submit_time !== null &&
      job.submit_time >= since &&
      !(confirmedSec !== null && job.submit_time + CLOCK_LEEWAY_SEC < confirmedSec),
  );
}

/** Why a request's job is taken to be lost: what now has its id. */
export function describeOtherJob(job: SchedJob, where: string): string {
  const when = job.submit_time === null ? 'at an unknown time' : new Date(job.submit_time * 1000).toISOString();
  return `${where} record of job ${job.job_id} is another job ("${job.name}"${job.comment ? `, comment "${job.comment}"` : ''}, submitted ${when})`;
}
