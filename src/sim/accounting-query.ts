import type { SimJob } from './sim-job.js';

/**
 * slurmdbd's job query (`GET /slurmdb/{v}/jobs`, `sacct`), as Slurm 25.11.7 evaluates it:
 * src/common/slurmdb_defs.c slurmdb_job_cond_def_start_end() for the default window, and
 * accounting_storage/mysql as_mysql_jobacct_process.c for which jobs a window and states match.
 */
export interface AccountingFilter {
  startSec?: number | undefined;
  endSec?: number | undefined;
  accounts?: string[] | undefined;
  jobNames?: string[] | undefined;
  users?: string[] | undefined;
  partitions?: string[] | undefined;
  /** Upper-case base states (`FAILED`, `RUNNING`). */
  states?: string[] | undefined;
  /** slurmdbd's step list doubles as a job id filter (`sacct -j`). */
  jobIds?: number[] | undefined;
}

export interface UsageWindow {
  start: number;
  end: number;
}

function midnight(nowSec: number): number {
  const d = new Date(nowSec * 1000);
  d.setHours(0, 0, 0, 0);
  return Math.floor(d.getTime() / 1000);
}

/**
 * The window slurmdbd applies when the query leaves start or end out:
 * - with states and job ids: start 0, end = start if given, else now;
 * - with states only: start now, end = start (a state query without start_time finds what is
 *   in that state right now, and with start_time but no end_time, only at that instant);
 * - with job ids only: start 0, end now;
 * - with neither: start at local midnight, end now.
 */
export function defaultWindow(filter: AccountingFilter, nowSec: number): UsageWindow {
  const hasStates = (filter.states?.length ?? 0) > 0;
  const hasIds = (filter.jobIds?.length ?? 0) > 0;
  let start = filter.startSec ?? 0;
  let end = filter.endSec ?? 0;
  if (hasStates) {
    if (!start && !hasIds) start = nowSec;
    if (start && !end) end = start;
  } else if (!hasIds && !start) {
    start = midnight(nowSec);
  }
  if (!end) end = nowSec;
  return { start, end };
}

/** Whether a job was in `state` within the window, as the mysql plugin's per-state query asks. */
export function inStateDuring(job: SimJob, state: string, { start, end }: UsageWindow): boolean {
  switch (state) {
    case 'PENDING':
      // Eligible before the end, and still pending after the start (or ended without starting).
      return (
        job.eligibleTime > 0 &&
        ((job.startTime > 0 && start < job.startTime) ||
          (job.startTime === 0 && job.endTime > 0 && start < job.endTime) ||
          (job.startTime === 0 && job.endTime === 0 && job.state === 'PENDING')) &&
        end > job.eligibleTime
      );
    case 'RUNNING':
      // Started before the end, and still running after the start.
      return (
        job.startTime > 0 &&
        (start < job.endTime || (job.endTime === 0 && job.state === 'RUNNING')) &&
        end > job.startTime
      );
    default:
      // A final state: the job ended in it, within the window (both ends included).
      return job.state === state && job.endTime > 0 && job.endTime >= start && job.endTime <= end;
  }
}

/** Whether the job's usage falls in the window (no states asked for). */
function usedDuring(job: SimJob, filter: AccountingFilter, { start, end }: UsageWindow): boolean {
  const notEndedBefore = job.endTime === 0 || job.endTime >= start;
  // Asked for by id, a job counts from its submission: one never eligible is found too.
  if ((filter.jobIds?.length ?? 0) > 0) return job.submitTime < end && notEndedBefore;
  return job.eligibleTime > 0 && job.eligibleTime < end && notEndedBefore;
}

export function matchesFilter(job: SimJob, filter: AccountingFilter, nowSec: number): boolean {
  const lists: [readonly (string | number)[] | undefined, string | number][] = [
    [filter.accounts, job.account],
    [filter.jobNames, job.name],
    [filter.users, job.user],
    [filter.partitions, job.partition],
  ];
  for (const [wanted, value] of lists) if (wanted?.length && !wanted.includes(value)) return false;
  // As `sacct -j`: an array's id names every record of the array.
  if (filter.jobIds?.length && !filter.jobIds.includes(job.jobId)) {
    if (job.arrayJobId === undefined || !filter.jobIds.includes(job.arrayJobId)) return false;
  }
  const window = defaultWindow(filter, nowSec);
  if (filter.states?.length) return filter.states.some((state) => inStateDuring(job, state, window));
  return usedDuring(job, filter, window);
}
