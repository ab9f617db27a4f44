import { getAccountingJob } from '../db/accounting.js';
import type { History } from '../db/history.js';
import { patchRequest } from '../db/requests.js';
import type { JobRequestRow, RequestState, StepOutputs } from '../db/schema.js';
import type { ErrorCode } from '../errors.js';
import { jobUidOf } from '../lib/host-users.js';
import { CLOCK_SLACK_MS } from '../requests/job-output.js';
import { isTerminalRequest } from '../requests/request-state.js';
import { ArraySyntaxError, parseArrayExpression, taskCountOf } from '../sched/job-array.js';
import { type JobSpec, jobSpecSchema } from '../sched/job-spec.js';
import {
  isOneOutputRef,
  type OutputRef,
  outputRefsDeep,
  renderOutputsDeep,
  TemplateError,
} from './param-substitution.js';
import type { StepPlan } from './run-plan.js';
import { legacyRetryPending } from './step-dependencies.js';
import { readStepOutputs } from './step-outputs.js';

/**
 * Steps that use other steps' outputs (issue 36). The rest of a run is made and submitted up
 * front with Slurm dependencies; a step using `${steps.<step>.outputs.<name>}` is made only
 * once every step whose outputs it uses has ended, rendered with their values, and the steps
 * behind it wait with it (they have nothing to depend on until it is made). What it becomes:
 *
 * - submitted as any step, its other needs as Slurm dependencies;
 * - `cancelled` without a job when a step it uses did not complete (its outputs are unknown, as
 *   Slurm's kill_invalid_depend would for `afterok`);
 * - `submit_failed` without a job when a value it uses is unknown: the file was not visible or
 *   not trusted, the output was not written, or it does not fit (SCHEDFLOW_ERR_STEP_OUTPUTS_UNREADABLE, SCHEDFLOW_ERR_STEP_OUTPUT_MISSING);
 * - `completed` without a job, reason `Skipped`, when its `array:` is sized 0 by an output:
 *   nothing to run is not a failure, and the steps behind it go on as after a completed one.
 */

export type DeferredOutcome =
  | { kind: 'wait' }
  | { kind: 'submit'; spec: JobSpec }
  | {
      kind: 'end';
      spec: JobSpec;
      state: Extract<RequestState, 'cancelled' | 'submit_failed' | 'completed'>;
      reason: string;
      detail: string;
      errorCode: ErrorCode | null;
    };

/** Whether a deferred step without a request can be made now, and as what. */
export function deferredOutcome(
  plan: StepPlan,
  latest: ReadonlyMap<string, JobRequestRow>,
  plans: ReadonlyMap<string, StepPlan>,
): DeferredOutcome {
  const deferred = plan.deferred;
  if (!deferred) return { kind: 'wait' };
  // Every step it needs made first: their jobs are its Slurm dependencies.
  if (plan.needs.some((need) => !latest.has(need.step))) return { kind: 'wait' };
  const producers = new Map<string, JobRequestRow>();
  for (const { step } of deferred.uses) {
    const row = latest.get(step);
    if (!row || !isTerminalRequest(row.state) || row.retryDueAt !== null || legacyRetryPending(row, plans.get(step))) {
      return { kind: 'wait' };
    }
    // Completed, outputs not read yet: read on this pass, before the steps are decided.
    if (row.state === 'completed' && row.outputs === null) return { kind: 'wait' };
    producers.set(step, row);
  }
  const { template } = deferred;
  if (template === null) return { kind: 'submit', spec: plan.spec };

  // A step that ends unsubmitted keeps its spec as written (the values it needed unknown), or as
  // rendered when it is skipped: not the stand-in its plan was checked with. Less an `array:` that
  // still holds an output: a request's array is Slurm's expression, counted when it is recorded.
  const { array: writtenArray, ...rest } = template;
  const asWritten = typeof writtenArray === 'string' && outputRefsDeep(writtenArray).length > 0 ? rest : template;
  const ended = (
    state: 'cancelled' | 'submit_failed' | 'completed',
    reason: string,
    detail: string,
    errorCode: ErrorCode | null,
    spec: Record<string, unknown> = asWritten,
  ): DeferredOutcome => ({ kind: 'end', spec: spec as JobSpec, state, reason, detail, errorCode });

  for (const [step, row] of producers) {
    if (row.state !== 'completed') {
      return ended(
        'cancelled',
        'DependencyNeverSatisfied',
        `not submitted: step "${step}" ended ${row.state.toUpperCase()}, and this step uses its outputs`,
        null,
      );
    }
  }
  let rendered: Record<string, unknown>;
  try {
    rendered = renderOutputsDeep(template, (ref) => outputValue(ref, producers));
  } catch (error) {
    if (!(error instanceof OutputError)) throw error;
    return ended('submit_failed', 'StepOutputs', `not submitted: ${error.message}`, error.code);
  }
  const array = arrayOf(template.array, rendered.array);
  if (array.kind === 'bad') {
    return ended(
      'submit_failed',
      'StepOutputs',
      `not submitted: ${array.message}`,
      'SCHEDFLOW_ERR_STEP_OUTPUT_MISSING',
    );
  }
  if (array.kind === 'none') {
    const { array: _none, ...rest } = rendered;
    return ended('completed', 'Skipped', `skipped: ${array.why}: no tasks to run`, null, rest);
  }
  const parsed = jobSpecSchema.safeParse({ ...rendered, ...(array.kind === 'tasks' && { array: array.expression }) });
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    return ended(
      'submit_failed',
      'StepOutputs',
      `not submitted: with the outputs it uses, its spec is not valid: ${issues}`,
      'SCHEDFLOW_ERR_STEP_OUTPUT_MISSING',
    );
  }
  return { kind: 'submit', spec: parsed.data };
}

class OutputError extends TemplateError {
  constructor(
    message: string,
    readonly code: ErrorCode,
  ) {
    super(message);
  }
}

function outputValue(ref: OutputRef, producers: ReadonlyMap<string, JobRequestRow>): string {
  const outputs = producers.get(ref.step)?.outputs;
  const written = `\${steps.${ref.step}.outputs.${ref.name}}`;
  if (!outputs)
    throw new OutputError(`${written}: step "${ref.step}" has no outputs`, 'SCHEDFLOW_ERR_STEP_OUTPUT_MISSING');
  if (outputs.error !== null) {
    throw new OutputError(`${written}: ${outputs.error}`, 'SCHEDFLOW_ERR_STEP_OUTPUTS_UNREADABLE');
  }
  const value = outputs.values[ref.name];
  if (value !== undefined) return value;
  const names = Object.keys(outputs.values);
  const where =
    outputs.path !== null
      ? `it wrote ${names.length ? names.join(', ') : 'none'} to ${outputs.path}`
      : producers.get(ref.step)?.jobId === null
        ? 'it ran no job: it was skipped'
        : 'it was given no outputs file (it has no absolute current_working_directory)';
  throw new OutputError(
    `${written}: step "${ref.step}" wrote no output "${ref.name}" (${where})`,
    'SCHEDFLOW_ERR_STEP_OUTPUT_MISSING',
  );
}

type ArraySize =
  | { kind: 'as-is' }
  | { kind: 'tasks'; expression: string }
  | { kind: 'none'; why: string }
  | { kind: 'bad'; message: string };

/**
 * An `array:` that is one output and nothing else is sized by it: a count N is tasks 0..N-1
 * (0: none), anything else an index list. Any other `array:` is Slurm's expression as rendered.
 */
function arrayOf(template: unknown, rendered: unknown): ArraySize {
  if (typeof template !== 'string' || typeof rendered !== 'string' || !isOneOutputRef(template))
    return { kind: 'as-is' };
  const written = template.trim();
  const value = rendered.trim();
  if (/^\d+$/.test(value)) {
    const count = Number(value);
    if (count === 0) return { kind: 'none', why: `array: ${written} is 0` };
    return checked(`0-${count - 1}`, written, value);
  }
  return checked(value, written, value);
}

function checked(expression: string, written: string, value: string): ArraySize {
  try {
    const parsed = parseArrayExpression(expression);
    if (taskCountOf(parsed) === 0) return { kind: 'none', why: `array: ${written} names no tasks` };
    return { kind: 'tasks', expression };
  } catch (error) {
    if (!(error instanceof ArraySyntaxError)) throw error;
    return {
      kind: 'bad',
      message: `array: ${written} is "${value}": not a count or an index list (${error.message})`,
    };
  }
}

/** How long a completed step's outputs wait for its job's user to be known (its accounting row). */
export const OWNER_WAIT_MS = 60_000;

export interface CollectOptions {
  /** Folders never read from (schedflow's data and configuration). */
  protectedDirs: readonly string[];
  /** The steps whose outputs are read: those another step uses, or declared (`outputs:`). */
  steps: ReadonlySet<string>;
  now: number;
}

/**
 * Reads the outputs of the run's completed step requests not read yet, of the steps in
 * `options.steps` only: a step whose outputs nothing uses is not read (a file read for every step
 * of every run would be I/O on a shared file system for nothing). Returns whether any were.
 */
export async function collectOutputs(
  h: History,
  rows: readonly JobRequestRow[],
  options: CollectOptions,
): Promise<boolean> {
  let read = false;
  for (const row of rows) {
    if (row.state !== 'completed' || row.outputs !== null || row.runId === null) continue;
    if (row.step === null || !options.steps.has(row.step)) continue;
    let outputs: StepOutputs;
    if (row.jobId === null) {
      outputs = { path: null, values: {}, error: null };
    } else {
      const user = (await getAccountingJob(h, row.profile, row.jobId))?.user || null;
      const ownerUid = await jobUidOf(user);
      // The file must be the job's user's: until the scheduler has said who that is (its
      // accounting row), the owner cannot be checked, so it is not read yet; a while after the
      // step ended, it is read as a job of a user with no account here is (src/lib/file-tail.ts).
      const endedAt = row.endedAt ?? row.updatedAt;
      if (user === null && ownerUid === null && options.now - endedAt < OWNER_WAIT_MS) continue;
      outputs = readStepOutputs(row, {
        protectedDirs: options.protectedDirs,
        ownerUid,
        // As a job's output is told from an older file's (src/requests/job-output.ts).
        notBeforeMs: (row.startedAt ?? row.createdAt) - CLOCK_SLACK_MS,
      });
    }
    await patchRequest(h, row.id, { outputs });
    read = true;
  }
  return read;
}
