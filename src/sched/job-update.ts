import { z } from 'zod';
import { InvalidJobUpdateError } from '../errors.js';
import { noValOf } from './codecs/common.js';
import type { ApiVersion } from './versions.js';

/**
 * What `POST {ctl}/job/{id}` may change of a job: the fields schedflow lets a user update.
 * `hold: true` holds the job as its user would (`scontrol hold`: priority 0, reason
 * JobHeldUser), `hold: false` releases it.
 */
export interface JobUpdate {
  timeLimitMin?: number;
  partition?: string;
  qos?: string;
  nice?: number;
  name?: string;
  comment?: string;
  /** true = hold (user hold), false = release. */
  hold?: boolean;
}

/** Slurm's bounds of a nice value (NICE_OFFSET − 3, as scontrol checks them). */
export const MAX_NICE = 2_147_483_645;

/** Slurm's largest time limit in minutes below INFINITE (a uint32 less its sentinels). */
const MAX_TIME_LIMIT_MIN = 4_294_967_293;

const name = (what: string) =>
  z
    .string()
    .min(1, `${what} must not be empty`)
    .refine((s) => !/[\n\r]/.test(s), `${what} must be one line`);

const jobUpdateSchema = z
  .object({
    timeLimitMin: z
      .number()
      .int('the time limit must be a whole number of minutes')
      .min(1, 'the time limit must be at least 1 minute')
      .max(MAX_TIME_LIMIT_MIN)
      .optional(),
    partition: name('the partition').optional(),
    qos: name('the QOS').optional(),
    nice: z.number().int('nice must be a whole number').min(-MAX_NICE).max(MAX_NICE).optional(),
    name: name('the job name').optional(),
    comment: z.string().optional(),
    hold: z.boolean().optional(),
  })
  .strict();

/** A job id as the controller's path takes it: `123`, or one array task `123_4`. */
const JOB_ID = /^[1-9][0-9]*(_[0-9]+)?$/;

/** The id's path form, or InvalidJobUpdateError (real slurmrestd answers 422, error 9000, to anything else). */
export function jobIdOfUpdate(jobId: number | string): string {
  const id = String(jobId).trim();
  if (!JOB_ID.test(id)) {
    throw new InvalidJobUpdateError(`"${id}" is not a job id (a number, or an array task as 123_4)`);
  }
  return id;
}

/** Checks an update: known fields, values Slurm takes, at least one change. */
export function parseJobUpdate(update: unknown): JobUpdate {
  const parsed = jobUpdateSchema.safeParse(update);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.join('.') ?? '';
    throw new InvalidJobUpdateError(`job update${field ? ` ${field}` : ''}: ${issue?.message ?? 'invalid'}`);
  }
  const data = Object.fromEntries(Object.entries(parsed.data).filter(([, v]) => v !== undefined)) as JobUpdate;
  // Slurm answers an empty update 200 and changes nothing: said here rather than taken for done.
  if (Object.keys(data).length === 0)
    throw new InvalidJobUpdateError('job update changes nothing: name a field to change');
  return data;
}

/**
 * The `job_desc_msg` body of an update in `version`. The three versions schedflow speaks take
 * the same members (checked on real Slurm 25.11.7): `hold` as a boolean holds or releases in
 * each, and `time_limit` must be the full number object `{set: true, number}` — slurmrestd
 * answers 200 to `{number: N}` without `set`, or to a bare number, and changes nothing.
 */
export function jobUpdateBody(_version: ApiVersion, update: JobUpdate): Record<string, unknown> {
  const u = parseJobUpdate(update);
  const body: Record<string, unknown> = {};
  if (u.timeLimitMin !== undefined) body.time_limit = noValOf(u.timeLimitMin);
  if (u.partition !== undefined) body.partition = u.partition;
  if (u.qos !== undefined) body.qos = u.qos;
  if (u.nice !== undefined) body.nice = u.nice;
  if (u.name !== undefined) body.name = u.name;
  if (u.comment !== undefined) body.comment = u.comment;
  if (u.hold !== undefined) body.hold = u.hold;
  return body;
}

/** The update in words, for logs and the CLI (`time limit 30 min, partition b`). */
export function describeJobUpdate(update: JobUpdate): string {
  const parts: string[] = [];
  if (update.hold === true) parts.push('hold');
  if (update.hold === false) parts.push('release');
  if (update.timeLimitMin !== undefined) parts.push(`time limit ${update.timeLimitMin} min`);
  if (update.partition !== undefined) parts.push(`partition ${update.partition}`);
  if (update.qos !== undefined) parts.push(`QOS ${update.qos}`);
  if (update.nice !== undefined) parts.push(`nice ${update.nice}`);
  if (update.name !== undefined) parts.push(`name ${update.name}`);
  if (update.comment !== undefined) parts.push('comment');
  return parts.join(', ');
}
