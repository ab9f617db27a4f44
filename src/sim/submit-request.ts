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
    // Read only when a boolean: anything else is left unread, as the members not simulated are.
    hold: z.unknown().optional(),
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

/** A `warnings[]` entry of slurmrestd's answer. */
export interface SubmitWarning {
  description: string;
  source: string;
}

export type DecodeResult =
  | { ok: true; request: SubmitRequest; warnings: SubmitWarning[] }
  | { ok: false; problem: 'invalid' | 'no-script' | 'empty-script' | 'hetjob'; message: string }
  /** A member slurmrestd could not read: it says so in a warning, makes no job and answers 200 without error. */
  | { ok: false; problem: 'dropped'; message: string; warnings: SubmitWarning[] };

/**
 * The members the simulator models, by the kind of data_parser field they are, in the order of
 * data_parser's job_desc_msg field list (v0.0.4x parsers.c): the order its warnings come in,
 * whatever the order of the body.
 */
const MODELLED_FIELDS: readonly (readonly [string, 'string' | 'int' | 'no-val' | 'env', number?])[] = [
  ['account', 'string'],
  ['array', 'string'],
  ['comment', 'string'],
  ['dependency', 'string'],
  ['environment', 'env'],
  ['name', 'string'],
  ['tasks', 'int', 0xffffffff],
  ['partition', 'string'],
  ['script', 'string'],
  ['time_limit', 'no-val'],
  ['current_working_directory', 'string'],
  ['cpus_per_task', 'int', 0xffff],
  ['memory_per_node', 'no-val'],
  ['standard_error', 'string'],
  ['standard_output', 'string'],
];

const EXPECTED_STRING = 'OpenAPI type=string (Slurm type=string)';
const EXPECTED_INT32 = 'OpenAPI type=integer format=int32 (Slurm type=64 bit integer)';

/**
 * A double as slurmrestd prints it in a warning: shortest digits, in exponent form (two-digit
 * exponent at least) from 1e17 on, as C's `%.17g` would switch. A NaN or infinity it has
 * already turned into an unsigned 64-bit integer by then: it prints 2^64 for all three.
 */
function formatDouble(value: number): string {
  if (!Number.isFinite(value)) return '1.8446744073709552e+19';
  const [digits = '', exponent = '0'] = value.toExponential().split('e');
  const exp = Number(exponent);
  if (exp >= -4 && exp < 17) return String(value);
  return `${digits}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
}

/** What the data_parser says it got, for the `but got …` part of its warning. */
function describeGot(value: unknown): string | undefined {
  if (typeof value === 'number') {
    // Beyond 2^53 JSON.parse has lost whether the text was an integer: such a number is taken
    // as the exponent-form float a client would have sent.
    return Number.isSafeInteger(value)
      ? `OpenAPI type=integer (Slurm type=64 bit integer): ${value}`
      : `OpenAPI type=number (Slurm type=floating point number): ${formatDouble(value)}`;
  }
  if (typeof value === 'string') return `OpenAPI type=string (Slurm type=string): ${JSON.stringify(value)}`;
  if (typeof value === 'boolean') return `OpenAPI type=boolean (Slurm type=boolean): ${value}`;
  return undefined;
}

/**
 * Coerces the members of a `job_desc_msg` the simulator models as Slurm's data_parser does
 * (25.11, seen on all three API versions), with its warnings:
 * - a string member given a number or boolean takes its text (a fraction as `%f`: 5.5 is `5.500000`);
 * - an integer member given a fraction takes its whole part, a digit string its number, each with
 *   a warning; NaN, infinities, out-of-range and negative values leave it unset (Slurm's default);
 *   a word or a boolean there makes the whole submission void: a warning, no error, no job;
 * - `memory_per_node` and `time_limit` take a digit string silently, and NaN or an infinity as unset;
 * - `environment` takes numbers and booleans as their text, silently.
 * Anything else is left for the schema to refuse. `null` leaves any of them unset.
 */
function coerceJobDesc(job: Record<string, unknown>): {
  job: Record<string, unknown>;
  warnings: SubmitWarning[];
  dropped: boolean;
} {
  const out: Record<string, unknown> = { ...job };
  const warnings: SubmitWarning[] = [];
  let dropped = false;
  const warn = (field: string, expected: string, value: unknown): void => {
    warnings.push({ description: `Expected ${expected} but got ${describeGot(value)}`, source: `#/job/${field}/` });
  };
  for (const [field, kind, max = 0] of MODELLED_FIELDS) {
    const value = out[field];
    if (value === null) {
      delete out[field];
    } else if (kind === 'string') {
      if (typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))) {
        warn(field, EXPECTED_STRING, value);
        out[field] = typeof value === 'number' && !Number.isInteger(value) ? value.toFixed(6) : String(value);
      }
    } else if (kind === 'int') {
      if (typeof value === 'number' && !Number.isSafeInteger(value)) {
        warn(field, EXPECTED_INT32, value);
        const whole = Math.trunc(value);
        if (Number.isFinite(whole) && whole >= 0 && whole <= max) out[field] = whole;
        else delete out[field];
      } else if (typeof value === 'string' || typeof value === 'boolean') {
        warn(field, EXPECTED_INT32, value);
        if (typeof value === 'string' && /^\d+$/.test(value) && Number(value) <= max) out[field] = Number(value);
        else if (typeof value === 'string' && /^-\d+$/.test(value)) delete out[field];
        else dropped = true;
      }
    } else if (kind === 'no-val') {
      if (typeof value === 'number' && !Number.isFinite(value)) delete out[field];
      else if (typeof value === 'string' && /^\d+$/.test(value)) out[field] = Number(value);
    } else if (Array.isArray(value)) {
      out[field] = value.map((v) =>
        typeof v === 'boolean' || (typeof v === 'number' && Number.isInteger(v)) ? String(v) : v,
      );
    }
  }
  return { job: out, warnings, dropped };
}

/** Decodes the body of `POST /job/submit` (`job_submit_req`), with slurmrestd's own checks of it. */
export function decodeSubmitBody(body: unknown): DecodeResult {
  let warnings: SubmitWarning[] = [];
  if (isRecord(body) && isRecord(body.job)) {
    const coerced = coerceJobDesc(body.job);
    warnings = coerced.warnings;
    if (coerced.dropped) {
      return { ok: false, problem: 'dropped', message: 'a member of job could not be read', warnings };
    }
    body = { ...body, job: coerced.job };
  }
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
    warnings,
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
      hold: job.hold === true,
    },
  };
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
