import { type Shape, shapeOf } from './shape.js';

type Json = Record<string, unknown>;

/** The jobs the sequence submitted, by the part they play; `step` requests name them so. */
export type Role = 'ok' | 'failed' | 'cancelled' | 'noexec' | 'nomem' | 'limited' | 'held';
const ROLES: readonly Role[] = ['ok', 'failed', 'cancelled', 'noexec', 'nomem', 'limited', 'held'];

/** An HTTP answer as received. */
export interface RawAnswer {
  status: number;
  contentType: string;
  text: string;
}

/** What a step keeps of one job of its answer: states and exit codes, by role. */
export interface JobSummary {
  state?: unknown;
  reason?: unknown;
  exit_code?: unknown;
  derived_exit_code?: unknown;
  steps?: unknown;
}

/**
 * The comparable form of one answer: everything a client could tell apart, nothing that
 * changes from run to run (ids, times, hosts, user names, ports).
 */
export interface StepRecord {
  /** What the step does, e.g. `jobs/state: several ids as repeated job_id`. */
  step: string;
  /** Method and path with placeholders for what changes: `{v}`, `{ok}`, `{now}`. */
  request: string;
  status: number;
  contentType: string;
  /** A body that is not JSON (slurmrestd's 401, 404 and parse failures are short texts). */
  text?: string;
  /** `meta.plugin`: which slurmrestd plugin and data parser answered. */
  plugin?: string;
  errors?: { error_number: unknown; error: unknown; source: unknown }[];
  /** Warnings' descriptions, digits replaced by `N` (some name times or ids). */
  warnings?: { description: unknown; source: unknown }[];
  /** `status[]` of a cancel (DELETE): Slurm's error per job, HTTP 200 all the same. */
  signal?: { code: unknown; string: unknown; message: unknown }[];
  /** The sequence's own jobs in the answer, by role, with their states. */
  jobs?: Partial<Record<Role, JobSummary>>;
  body?: Shape;
}

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function exitCode(value: unknown): unknown {
  if (!isObject(value)) return value;
  const rc = value.return_code;
  const signal = value.signal;
  return {
    status: value.status,
    return_code: isObject(rc) ? (rc.set ? rc.number : null) : rc,
    signal: isObject(signal) ? signal.name : signal,
  };
}

/** Which of the sequence's jobs an element of `jobs[]` is, if any. */
function roleOf(job: Json, roles: ReadonlyMap<number, Role>): Role | undefined {
  const id = typeof job.job_id === 'string' ? Number(job.job_id) : job.job_id;
  return typeof id === 'number' ? roles.get(id) : undefined;
}

function summarize(job: Json): JobSummary {
  // The controller's job (job_state), the light jobs/state element (state) and accounting's record (state.current).
  if ('job_state' in job) {
    return {
      state: job.job_state,
      reason: job.state_reason,
      exit_code: exitCode(job.exit_code),
      derived_exit_code: exitCode(job.derived_exit_code),
    };
  }
  if (isObject(job.state)) {
    const steps = Array.isArray(job.steps)
      ? job.steps.filter(isObject).map((s) => ({
          name: isObject(s.step) ? s.step.name : undefined,
          state: s.state,
          exit_code: exitCode(s.exit_code),
        }))
      : undefined;
    return {
      state: job.state.current,
      reason: job.state.reason,
      exit_code: exitCode(job.exit_code),
      derived_exit_code: exitCode(job.derived_exit_code),
      steps,
    };
  }
  return { state: job.state };
}

/**
 * Reduces an answer to its record. `jobs[]` is first narrowed to the sequence's own jobs, so
 * jobs of earlier runs or other users on a shared cluster change neither the shape nor the states.
 */
export function reduceAnswer(
  step: string,
  request: string,
  answer: RawAnswer,
  roles: ReadonlyMap<number, Role>,
): StepRecord {
  const record: StepRecord = { step, request, status: answer.status, contentType: answer.contentType };
  let body: unknown;
  try {
    body = answer.contentType.startsWith('application/json') ? JSON.parse(answer.text) : undefined;
  } catch {
    body = undefined;
  }
  if (!isObject(body)) {
    record.text = answer.text.trim();
    return record;
  }
  const meta = body.meta;
  if (isObject(meta) && isObject(meta.plugin)) {
    const p = meta.plugin;
    record.plugin = [p.type, p.data_parser, p.accounting_storage].filter((x) => typeof x === 'string').join(' ');
  }
  if (Array.isArray(body.errors)) {
    record.errors = body.errors
      .filter(isObject)
      .map((e) => ({ error_number: e.error_number, error: e.error, source: e.source }));
  }
  if (Array.isArray(body.warnings)) {
    record.warnings = body.warnings.filter(isObject).map((w) => ({
      description: typeof w.description === 'string' ? w.description.replace(/\d+/g, 'N') : w.description,
      source: w.source,
    }));
  }
  if (Array.isArray(body.status)) {
    record.signal = body.status
      .filter(isObject)
      .map((s) => (isObject(s.error) ? { code: s.error.code, string: s.error.string, message: s.error.message } : s))
      .map((s) => s as { code: unknown; string: unknown; message: unknown });
  }
  const narrowed: Json = { ...body };
  if (Array.isArray(body.jobs)) {
    const own = body.jobs.filter((j): j is Json => isObject(j) && roleOf(j, roles) !== undefined);
    narrowed.jobs = own;
    // In role order, not the answer's: the record must not depend on how a side sorts its jobs.
    const jobs: Partial<Record<Role, JobSummary>> = {};
    for (const role of ROLES) {
      const job = own.find((j) => roleOf(j, roles) === role);
      if (job) jobs[role] = summarize(job);
    }
    record.jobs = jobs;
  }
  record.body = shapeOf(narrowed);
  return record;
}
