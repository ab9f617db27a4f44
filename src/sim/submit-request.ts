import { z } from 'zod';
import type { SubmitRequest } from './cluster.js';

/**
 * slurmrestd accepts a `{set, infinite, number}` object or a bare number for its
 * "no value" integers; `{set: false}` means "not given" and `infinite` means no limit.
 */
const noValInput = z.union([
  z.number(),
  z.object({
    set: z.boolean().optional(),
    infinite: z.boolean().optional(),
    number: z.number().optional(),
  }),
]);

type NoValInput = z.infer<typeof noValInput>;

function fromNoVal(value: NoValInput | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number') return value;
  if (value.infinite) return null;
  if (value.set === false || value.number === undefined) return undefined;
  return value.number;
}

const jobDescSchema = z
  .object({
    name: z.string().optional(),
    account: z.string().optional(),
    partition: z.string().optional(),
    comment: z.string().optional(),
    script: z.string().optional(),
    environment: z.array(z.string()).optional(),
    current_working_directory: z.string().optional(),
    tasks: z.number().int().optional(),
    cpus_per_task: z.number().int().optional(),
    memory_per_node: noValInput.optional(),
    time_limit: noValInput.optional(),
    dependency: z.string().optional(),
    standard_output: z.string().optional(),
    standard_error: z.string().optional(),
    array: z.string().optional(),
  })
  // Other job_desc_msg members are accepted and not simulated, as a cluster ignores what it does not use.
  .loose();

const submitBodySchema = z
  .object({
    script: z.string().optional(),
    job: jobDescSchema.optional(),
    jobs: z.array(jobDescSchema).optional(),
  })
  .loose();

/**
 * What the body parser hands on for a body that is not JSON: slurmrestd answers it itself
 * (400, `Failure during parsing`), and only after it has checked the credential.
 */
export const UNPARSABLE_BODY: unique symbol = Symbol('unparsable request body');

/**
 * What the body parser hands on for a body of a media type other than JSON: slurmrestd answers
 * it (415 text) after the credential and path checks, as it does an unparsable one.
 */
export const UNSUPPORTED_BODY: unique symbol = Symbol('request body of an unsupported media type');

export type DecodeResult =
  | { ok: true; request: SubmitRequest }
  | { ok: false; problem: 'invalid' | 'no-script' | 'empty-script' | 'hetjob'; message: string };

/** Decodes the body of `POST /job/submit` (`job_submit_req`), with slurmrestd's own checks of it. */
export function decodeSubmitBody(body: unknown): DecodeResult {
  const parsed = submitBodySchema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      ok: false,
      problem: 'invalid',
      message: `${issue?.path.join('.') || 'body'}: ${issue?.message ?? 'invalid'}`,
    };
  }
  if (parsed.data.jobs) {
    return { ok: false, problem: 'hetjob', message: 'heterogeneous jobs (jobs[]) are not simulated' };
  }
  const job = parsed.data.job;
  const script = job?.script ?? parsed.data.script;
  // slurmrestd's own words (openapi/slurmctld jobs.c): a missing script is a bad request, an empty one Slurm's 2009.
  if (!job || script === undefined) {
    return { ok: false, problem: 'no-script', message: 'Populated "script" field is required for job submission' };
  }
  if (script === '') return { ok: false, problem: 'empty-script', message: 'Batch job script empty or missing' };
  const memory = fromNoVal(job.memory_per_node);
  return {
    ok: true,
    request: {
      name: job.name,
      account: job.account,
      partition: job.partition,
      comment: job.comment,
      script,
      environment: job.environment,
      cwd: job.current_working_directory,
      tasks: job.tasks,
      cpusPerTask: job.cpus_per_task,
      memoryPerNodeMb: memory === null ? undefined : memory,
      timeLimitMin: fromNoVal(job.time_limit),
      dependency: job.dependency,
      standardOutput: job.standard_output,
      standardError: job.standard_error,
      array: job.array,
    },
  };
}
