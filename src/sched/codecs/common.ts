import { z } from 'zod';
import { InvalidJobSpecError } from '../../errors.js';
import { assertNever } from '../../lib/assert-never.js';
import {
  JOB_STATES,
  JobDecodeError,
  type JobState,
  type JobStateEntry,
  type SchedJob,
  type TimeLimit,
} from '../job-model.js';
import { DEFAULT_ENVIRONMENT, type JobSpec } from '../job-spec.js';
import { jobDescFields, withoutNulls } from '../spec-validator.js';
import type { ApiVersion } from '../versions.js';

/**
 * What the data parsers v0.0.42 to v0.0.44 share. Each schema lists only the members
 * a decoder reads, all optional except the ones a job cannot be known without, so a
 * member Slurm adds or drops elsewhere in a record never breaks decoding.
 */

// ---- Slurm's value wrappers -------------------------------------------------------

/** Slurm's `{set, infinite, number}` wrapper for integers that may be unset or unlimited. */
export const noValSchema = z.object({
  set: z.boolean().optional(),
  infinite: z.boolean().optional(),
  number: z.number().optional(),
});
export type NoVal = z.infer<typeof noValSchema>;

/** The number, when it is set and finite. */
export function noValNumber(value: NoVal | undefined): number | null {
  if (!value || value.infinite || value.set === false || value.number === undefined) return null;
  return value.number;
}

/** A Unix time or an id: Slurm writes 0 for "none" in both. */
export function nonZero(value: number | NoVal | undefined): number | null {
  const number = typeof value === 'number' ? value : noValNumber(value);
  return number === 0 ? null : number;
}

export function timeLimitOf(value: NoVal | undefined): TimeLimit {
  if (value?.infinite) return 'infinite';
  const minutes = noValNumber(value);
  return minutes === null ? null : { minutes };
}

/** The body's form of a limit: `{set: false, infinite: true}` is how slurmrestd spells "no limit". */
export function noValOf(value: number | 'infinite'): Required<NoVal> {
  if (value === 'infinite') return { set: false, infinite: true, number: 0 };
  return { set: true, infinite: false, number: value };
}

export const exitCodeSchema = z.object({
  status: z.array(z.string()).optional(),
  return_code: noValSchema.optional(),
  signal: z.object({ id: noValSchema.optional(), name: z.string().optional() }).optional(),
});
export type ExitCode = z.infer<typeof exitCodeSchema>;

type ExitFields = Pick<SchedJob, 'exit_code' | 'signal'>;

export function exitOf(value: ExitCode | undefined): ExitFields {
  const status = value?.status ?? [];
  // A signalled process has no return code; Slurm still sends `return_code` unset or 0.
  const signalled = status.includes('SIGNALED') || status.includes('CORE_DUMPED');
  const id = nonZero(value?.signal?.id);
  return {
    exit_code: signalled ? null : noValNumber(value?.return_code),
    signal: id === null ? null : { id, name: value?.signal?.name ?? '' },
  };
}

export const cpuTimeSchema = z.object({ seconds: z.number().optional(), microseconds: z.number().optional() });

export function cpuSeconds(value: z.infer<typeof cpuTimeSchema> | undefined): number {
  return (value?.seconds ?? 0) + (value?.microseconds ?? 0) / 1e6;
}

// ---- States -------------------------------------------------------------------------

/** Upstream sends a flag array; a lone string (as the proxy document's `state_current` may be) is one flag. */
export const stateFlagsSchema = z.union([z.array(z.string()), z.string().transform((flag) => [flag])]);

const BASE_STATES: ReadonlySet<string> = new Set(JOB_STATES);

function isJobState(flag: string): flag is JobState {
  return BASE_STATES.has(flag);
}

/** The first base state among the flags; a state this build does not know is UNKNOWN, never an error. */
export function stateOf(flags: readonly string[]): JobState {
  return flags.find(isJobState) ?? 'UNKNOWN';
}

/** Where a job is in its life, which decides whether Slurm's times and exit code are facts yet. */
export type Phase = 'waiting' | 'active' | 'ended' | 'unknown';

export function phaseOf(state: JobState): Phase {
  switch (state) {
    case 'PENDING':
      return 'waiting';
    case 'RUNNING':
    case 'SUSPENDED':
      return 'active';
    case 'COMPLETED':
    case 'CANCELLED':
    case 'FAILED':
    case 'TIMEOUT':
    case 'NODE_FAIL':
    case 'PREEMPTED':
    case 'BOOT_FAIL':
    case 'DEADLINE':
    case 'OUT_OF_MEMORY':
      return 'ended';
    case 'UNKNOWN':
      return 'unknown';
    default:
      return assertNever(state);
  }
}

/**
 * Slurm reports `SUCCESS`, return code 0, for a script that has not exited yet or never ran
 * (a job ended while pending); the script has no exit status then.
 */
export function settledExit(phase: Phase, ran: boolean, exit: ExitFields): ExitFields {
  return !ran || phase === 'waiting' || phase === 'active' ? { exit_code: null, signal: null } : exit;
}

// ---- Text -----------------------------------------------------------------------------

/** `None` is Slurm's reason for "no reason". */
export function reasonOf(text: string | undefined): string | null {
  return !text || text === 'None' ? null : text;
}

/** slurmctld sends "" and slurmdbd "None assigned" for a job that has no nodes. */
export function nodesOf(text: string | undefined): string | null {
  return !text || text === 'None assigned' ? null : text;
}

export function pathOf(text: string | undefined): string | null {
  return text ? text : null;
}

export function memoryPerNodeMb(
  perNode: NoVal | undefined,
  perCpu: NoVal | undefined,
  cpus: number | null,
): number | null {
  // 0 per node is `--mem=0` ("all of the node"), which says nothing about the amount.
  const node = nonZero(perNode);
  if (node !== null) return node;
  const cpu = nonZero(perCpu);
  // Exact for single-node jobs; for several nodes it is the job's total.
  return cpu !== null && cpus !== null ? cpu * cpus : null;
}

// ---- Decoding ---------------------------------------------------------------------------

/** The expanded output paths; each version says where its records keep them. */
export interface OutputPaths {
  stdout_path: string | null;
  stderr_path: string | null;
}
export type PathsSchema = z.ZodType<OutputPaths>;

/** `stdout_expanded`/`stderr_expanded`: accounting in every version, the controller from v0.0.43. */
export const expandedPaths: PathsSchema = z
  .object({ stdout_expanded: z.string().optional(), stderr_expanded: z.string().optional() })
  .transform((job) => ({ stdout_path: pathOf(job.stdout_expanded), stderr_path: pathOf(job.stderr_expanded) }));

function pathText(path: readonly PropertyKey[]): string {
  let text = '';
  for (const key of path) text += typeof key === 'number' ? `[${key}]` : `${text ? '.' : ''}${String(key)}`;
  return text || 'job';
}

/** Parses a body whose `null`s are already gone; a failure names the member it is about. */
export function parseJob<T>(schema: z.ZodType<T>, clean: unknown): T {
  const result = schema.safeParse(clean);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  throw new JobDecodeError(pathText(issue?.path ?? []), issue?.message ?? 'invalid');
}

const optionalText = z.string().optional();

const controllerSchema = z.object({
  job_id: z.number().int(),
  job_state: stateFlagsSchema,
  name: optionalText,
  state_reason: optionalText,
  exit_code: exitCodeSchema.optional(),
  submit_time: noValSchema.optional(),
  start_time: noValSchema.optional(),
  end_time: noValSchema.optional(),
  time_limit: noValSchema.optional(),
  partition: optionalText,
  account: optionalText,
  user_name: optionalText,
  comment: optionalText,
  array_job_id: noValSchema.optional(),
  array_task_id: noValSchema.optional(),
  nodes: optionalText,
  cpus: noValSchema.optional(),
  memory_per_node: noValSchema.optional(),
  memory_per_cpu: noValSchema.optional(),
  current_working_directory: optionalText,
});
type ControllerRecord = z.infer<typeof controllerSchema>;

/** One controller record: of `/jobs` or `/job/{id}`. */
export function decodeController(raw: unknown, paths: PathsSchema): SchedJob {
  const clean = withoutNulls(raw);
  const job = parseJob(controllerSchema, clean);
  return fromController(job, parseJob(paths, clean));
}

function fromController(job: ControllerRecord, paths: OutputPaths): SchedJob {
  const state = stateOf(job.job_state);
  const phase = phaseOf(state);
  const nodes = nodesOf(job.nodes);
  const cpus = noValNumber(job.cpus);
  // slurmctld forecasts the start of a pending job and the end of a running one, and stamps
  // start = end on a job that ended before it ran (it has no nodes then): none of those happened.
  const start = phase === 'waiting' || nodes === null ? null : nonZero(job.start_time);
  const end = phase === 'ended' ? nonZero(job.end_time) : null;
  return {
    source: 'controller',
    job_id: job.job_id,
    name: job.name ?? '',
    state,
    state_flags: job.job_state,
    reason: reasonOf(job.state_reason),
    ...settledExit(phase, nodes !== null, exitOf(job.exit_code)),
    submit_time: nonZero(job.submit_time),
    start_time: start,
    end_time: end,
    expected_start: phase === 'waiting' ? nonZero(job.start_time) : null,
    // Not start-to-now for a running job: decoding stays independent of the clock, and accounting has it.
    elapsed_sec: start !== null && end !== null ? end - start : null,
    time_limit: timeLimitOf(job.time_limit),
    partition: job.partition ?? '',
    account: job.account ?? '',
    user: job.user_name ?? '',
    comment: job.comment ?? '',
    array_job_id: nonZero(job.array_job_id),
    array_task_id: noValNumber(job.array_task_id),
    nodes,
    cpus,
    memory_per_node_mb: memoryPerNodeMb(job.memory_per_node, job.memory_per_cpu, cpus),
    cpu_time_sec: null,
    peak_memory_mb: null,
    working_directory: pathOf(job.current_working_directory),
    ...paths,
  };
}

// Real 25.11 sends the id as a decimal string (every data parser); a number is read as well. An
// array task is `<job id>_<task id>`, a pending task still in its array's record included ("1_4":
// the record of job 1, task 4; test/fixtures/real-slurm-25.11/array_jobs_state_*).
const jobStateSchema = z.object({
  job_id: z.union([
    z
      .number()
      .int()
      .transform((id) => ({ id, task: null })),
    z
      .string()
      .regex(/^\d+(_\d+)?$/, 'not a job id')
      .transform((text) => {
        const [id = '', task] = text.split('_');
        return { id: Number(id), task: task === undefined ? null : Number(task) };
      }),
  ]),
  state: stateFlagsSchema,
});

/** One element of `/jobs/state`, as real slurmrestd sends it (not as its document says). */
export function decodeJobState(raw: unknown): JobStateEntry {
  const job = parseJob(jobStateSchema, withoutNulls(raw));
  return {
    job_id: job.job_id.id,
    array_task_id: job.job_id.task,
    state: stateOf(job.state),
    state_flags: job.state,
  };
}

const tresListSchema = z.array(z.object({ type: optionalText, count: z.number().optional() }));

const stepSchema = z.object({
  step: z.object({ name: optionalText }).optional(),
  exit_code: exitCodeSchema.optional(),
  time: z.object({ total: cpuTimeSchema.optional() }).optional(),
  // `requested` holds slurmdbd's tres_usage_in: its `max` mem is the step's MaxRSS.
  tres: z.object({ requested: z.object({ max: tresListSchema.optional() }).optional() }).optional(),
});

const accountingSchema = z.object({
  job_id: z.number().int(),
  name: optionalText,
  state: z.object({ current: stateFlagsSchema.optional(), reason: optionalText }).optional(),
  // The proxy document's table names a flat key; upstream nests it (UPSTREAM-NOTES.md). Either will do.
  state_current: stateFlagsSchema.optional(),
  exit_code: exitCodeSchema.optional(),
  steps: z.array(stepSchema).optional(),
  time: z
    .object({
      submission: z.number().optional(),
      start: z.number().optional(),
      end: z.number().optional(),
      elapsed: z.number().optional(),
      limit: noValSchema.optional(),
      total: cpuTimeSchema.optional(),
    })
    .optional(),
  partition: optionalText,
  account: optionalText,
  user: optionalText,
  comment: z.object({ job: optionalText }).optional(),
  array: z.object({ job_id: z.number().optional(), task_id: noValSchema.optional() }).optional(),
  nodes: optionalText,
  required: z
    .object({
      CPUs: z.number().optional(),
      memory_per_cpu: noValSchema.optional(),
      memory_per_node: noValSchema.optional(),
    })
    .optional(),
  tres: z.object({ allocated: tresListSchema.optional() }).optional(),
  working_directory: optionalText,
});
type AccountingRecord = z.infer<typeof accountingSchema>;

/** One slurmdbd record of `/slurmdb/{v}/jobs` or `/job/{id}`. */
export function decodeAccounting(raw: unknown, paths: PathsSchema): SchedJob {
  const clean = withoutNulls(raw);
  const job = parseJob(accountingSchema, clean);
  return fromAccounting(job, parseJob(paths, clean));
}

function fromAccounting(job: AccountingRecord, paths: OutputPaths): SchedJob {
  const flags = job.state?.current ?? job.state_current;
  if (!flags) throw new JobDecodeError('state.current', 'missing, and there is no flat state_current either');
  const state = stateOf(flags);
  const time = job.time ?? {};
  const nodes = nodesOf(job.nodes);
  // As with the controller: a job that ended before it ran has no nodes and did not really start.
  const start = nodes === null ? null : nonZero(time.start);
  const cpus = allocatedCpus(job) ?? job.required?.CPUs ?? null;
  const exit = settledExit(phaseOf(state), nodes !== null, exitOf(batchStep(job)?.exit_code ?? job.exit_code));
  return {
    source: 'accounting',
    job_id: job.job_id,
    name: job.name ?? '',
    state,
    state_flags: flags,
    ...exit,
    reason: reasonOf(job.state?.reason) ?? endReason(state, exit),
    submit_time: nonZero(time.submission),
    start_time: start,
    end_time: nonZero(time.end),
    // slurmdbd keeps no forecast of a pending job's start: only the controller has it.
    expected_start: null,
    elapsed_sec: start === null ? null : (time.elapsed ?? null),
    time_limit: timeLimitOf(time.limit),
    partition: job.partition ?? '',
    account: job.account ?? '',
    user: job.user ?? '',
    comment: job.comment?.job ?? '',
    array_job_id: nonZero(job.array?.job_id),
    array_task_id: noValNumber(job.array?.task_id),
    nodes,
    cpus,
    memory_per_node_mb: memoryPerNodeMb(job.required?.memory_per_node, job.required?.memory_per_cpu, cpus),
    cpu_time_sec: start === null ? null : cpuTimeOf(job),
    peak_memory_mb: peakMemoryMb(job),
    working_directory: pathOf(job.working_directory),
    ...paths,
  };
}

/**
 * slurmdbd keeps only the reason a job waited (`None` once it ran); slurmctld gives a failed job
 * the reason of its failure. Accounting's record of the same end gets what slurmctld says of it.
 */
function endReason(state: JobState, exit: ExitFields): string | null {
  // slurmctld's FAIL_OOM (test/fixtures/real-slurm-25.11/oom_*).
  if (state === 'OUT_OF_MEMORY') return 'OutOfMemory';
  if (state !== 'FAILED') return null;
  if (exit.signal) return `RaisedSignal:${exit.signal.id}(${exit.signal.name})`;
  return exit.exit_code !== null && exit.exit_code !== 0 ? 'NonZeroExitCode' : null;
}

function allocatedCpus(job: AccountingRecord): number | null {
  return job.tres?.allocated?.find((tres) => tres.type === 'cpu')?.count ?? null;
}

/**
 * The batch step's exit code is the script's. For a cancelled job, real slurmdbd 25.11 says
 * SUCCESS in the job's own record, while the batch step says SIGNALED (TERM), as the controller does.
 */
function batchStep(job: AccountingRecord): z.infer<typeof stepSchema> | undefined {
  return job.steps?.find((step) => step.step?.name === 'batch');
}

/** Real slurmdbd 25.11 leaves the job's own `time.total` at 0 and counts CPU time in its steps. */
function cpuTimeOf(job: AccountingRecord): number {
  const steps = (job.steps ?? []).reduce((sum, step) => sum + cpuSeconds(step.time?.total), 0);
  return Math.max(cpuSeconds(job.time?.total), steps);
}

const BYTES_PER_MB = 2 ** 20;

/**
 * The largest MaxRSS of the job's steps, in MB (rounded up). slurmdbd has it only where the
 * cluster gathers job accounting (jobacct_gather); without that, real 25.11 sends `max: []`,
 * which says nothing about the amount, so it is null and never 0.
 */
function peakMemoryMb(job: AccountingRecord): number | null {
  let peakBytes: number | null = null;
  for (const step of job.steps ?? []) {
    const mem = step.tres?.requested?.max?.find((tres) => tres.type === 'mem')?.count;
    // Slurm's 64-bit "no value" sentinels are not safe integers here: they are unknown too.
    if (mem !== undefined && Number.isSafeInteger(mem) && mem >= 0) peakBytes = Math.max(peakBytes ?? 0, mem);
  }
  return peakBytes === null ? null : Math.ceil(peakBytes / BYTES_PER_MB);
}

// ---- Encoding ---------------------------------------------------------------------------

/** Builds `job_submit_req` from a spec; every member must exist in the version's `job_desc_msg`. */
export function encodeSubmitFor(version: ApiVersion, spec: JobSpec): { job: Record<string, unknown> } {
  // on_pending is schedflow's own (the mover reads it from the history), no job_desc_msg member.
  const { environment, time_limit, memory_per_node, on_pending: _onPending, ...rest } = spec;
  const job: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(rest)) {
    if (value !== undefined) job[key] = value;
  }
  // sbatch would copy the caller's environment; a daemon has none worth passing on, and
  // slurmrestd refuses an empty one ("environment must be set", ESLURM_ENVIRONMENT_MISSING).
  // A job given some variables but no PATH would find no commands: it gets the default PATH too.
  const hasPath = environment?.some((entry) => entry.startsWith('PATH='));
  job.environment = environment?.length
    ? [...(hasPath ? [] : DEFAULT_ENVIRONMENT), ...environment]
    : [...DEFAULT_ENVIRONMENT];
  if (time_limit !== undefined) job.time_limit = noValOf(time_limit);
  if (memory_per_node !== undefined) job.memory_per_node = noValOf(memory_per_node);
  checkDescMembers(version, job);
  return { job };
}

function checkDescMembers(version: ApiVersion, job: Record<string, unknown>): void {
  const fields = jobDescFields(version);
  const unknown = Object.keys(job).filter((key) => !fields.has(key));
  if (unknown.length > 0) {
    const names = unknown.map((key) => `"${key}"`).join(', ');
    // Caught here, a misspelt member is an error naming it, not a job run without what was asked.
    throw new InvalidJobSpecError(`job spec member ${names} is not a job_desc_msg member in ${version}`);
  }
}
