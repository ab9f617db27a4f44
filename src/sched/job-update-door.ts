import type { SchedClient } from './client.js';
import type { JobUpdate } from './job-update.js';
import { JobUpdateRefusedError } from './sched-errors.js';

/** slurm_strerror(ESLURM_JOB_NOT_PENDING), as slurmctld refuses a running job's new partition. */
const JOB_NOT_PENDING = { code: 2073, words: 'Job is no longer pending execution' } as const;

/**
 * What can be known to fail before the update is sent, refused with Slurm's own number and
 * words: a new partition for a job that is no longer pending (slurmctld refuses it to anyone,
 * operators too). A time limit above the partition's MaxTime is not refused here: Slurm lets an
 * operator or administrator set it, and the client does not know who the caller is to Slurm
 * (for anyone else Slurm answers 2002, "Access/permission denied", which the client passes on).
 * A job the controller does not know is left for the update itself to find (JobNotFoundError).
 */
export async function checkJobUpdateAtDoor(
  client: Pick<SchedClient, 'getJob'>,
  jobId: number | string,
  update: JobUpdate,
  options: { signal?: AbortSignal } = {},
): Promise<void> {
  if (update.partition === undefined) return;
  const id = String(jobId);
  // One array task's record is not read by its `123_4` id here: the update itself finds out.
  if (!/^\d+$/.test(id)) return;
  let job: Awaited<ReturnType<SchedClient['getJob']>>['data'];
  try {
    job = (await client.getJob(Number(id), { signal: options.signal })).data;
  } catch {
    return; // Not known, or not readable now: the update's own answer says what is wrong.
  }
  if (job.state !== 'PENDING' && job.partition !== update.partition) {
    throw new JobUpdateRefusedError(
      `job ${id} is ${job.state}, so its partition stays ${job.partition}: ${JOB_NOT_PENDING.words} (Slurm error ${JOB_NOT_PENDING.code})`,
      { status: null, message: JOB_NOT_PENDING.words, slurmErrors: [], request: `POST job/${id}` },
      JOB_NOT_PENDING.code,
      JOB_NOT_PENDING.words,
    );
  }
}
