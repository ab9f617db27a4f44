import type { JobStateEntry, SchedJob } from '../job-model.js';
import type { JobSpec } from '../job-spec.js';
import type { ApiVersion } from '../versions.js';

/**
 * Turns one data parser's job records into `SchedJob` and a `JobSpec` into its submit body.
 * Decoders throw `JobDecodeError` naming the member when a record lacks what identifies a job.
 */
export interface JobCodec {
  version: ApiVersion;
  /** One element of GET /slurm/{v}/jobs or /job/{id} */
  decodeControllerJob(raw: unknown): SchedJob;
  /** One element of GET /slurm/{v}/jobs/state: `{job_id: "1", state: [...]}` in every version */
  decodeJobState(raw: unknown): JobStateEntry;
  /** One element of GET /slurmdb/{v}/jobs */
  decodeAccountingJob(raw: unknown): SchedJob;
  /** The body of POST /slurm/{v}/job/submit: {job: job_desc_msg}; `comment` is the final comment to send */
  encodeSubmit(spec: JobSpec): { job: Record<string, unknown> };
}
