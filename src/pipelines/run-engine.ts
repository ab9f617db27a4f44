import { randomUUID } from 'node:crypto';
import { and, asc, eq, inArray, isNull } from 'drizzle-orm';
import type { Db } from '../db/database.js';
import { getRun, stepRequests } from '../db/runs.js';
import {
  type JobRequestRow,
  type PipelineRunRow,
  pipelineRuns,
  type RunState,
  type RunTrigger,
  TERMINAL_RUN_STATES,
} from '../db/schema.js';
import { addDelivery } from '../db/webhooks.js';
import { assertNever } from '../lib/assert-never.js';
import { runFinishedBody } from '../notify/events.js';
import { enqueueAccepted, recordRequest } from '../requests/accept.js';
import type { AttemptDeps } from '../requests/attempts.js';
import type { CancelOutcome } from '../requests/canceller.js';
import { isTerminalRequest } from '../requests/request-state.js';
import type { DependencyResolution } from '../requests/submitter.js';
import type { JobSpec } from '../sched/job-spec.js';
import type { LoadedPipeline } from './pipeline-loader.js';
import { planRun, type RunPlan, type StepPlan } from './run-plan.js';
import { latestAttempts, legacyRetryPending, resolveDependencies } from './step-dependencies.js';

/**
 * The life of a pipeline run: made from a plan (its steps become job
 * requests, submitted together with Slurm dependencies), then advanced as its
 * steps end: retries, steps re-made after a retried dependency, the run's end.
 */

/**
 * Step requests are accepted (`db`, `submitQueue`) through src/requests/accept.ts; their
 * retries are made by src/requests/attempts.ts (`partitionLimits` bounds their escalation).
 */
export interface RunEngineDeps extends AttemptDeps {
  /** Cancels a job upstream (a step stuck behind a dependency that can never be met). */
  cancelJob(profile: string, jobId: number): Promise<void>;
  /**
   * Cancels a step's request wherever it is in its life (src/requests/canceller.ts): withdrawn
   * before submission, cancelled upstream after. For the cancel of a whole run.
   */
  cancelStep(requestId: string, by: { source: 'api' | 'cli' | 'pipeline'; who: string }): Promise<CancelOutcome>;
  /**
   * Why the profile cannot take one of the run's steps now (its token lacks a scope, a step
   * charges an account the user has no association with: src/requests/door.ts): a run asked
   * for by someone is refused with it, a scheduled one is recorded `skipped` with it.
   */
  refusal?(profile: string, specs: readonly JobSpec[]): Error | null;
}

export interface NewRun {
  trigger: RunTrigger;
  params: Record<string, string>;
  scheduledFor?: number | null;
  webhookUrl?: string | null;
  /** `queued`: made now, started when the active run of the pipeline ends (overlap: queue). */
  start?: 'now' | 'queued';
  /** `skipped`: recorded only, with the reason (overlap: skip). */
  skipReason?: string;
}

/** Makes a run. A scheduled tick that already has a run gets that run back, so a tick never fires twice. */
export async function createRun(deps: RunEngineDeps, pipeline: LoadedPipeline, input: NewRun): Promise<PipelineRunRow> {
  const { db } = deps;
  const id = randomUUID();
  const now = Date.now();
  const scheduledFor = input.scheduledFor ?? null;
  const plan = planRun(pipeline, {
    runId: id,
    trigger: input.trigger,
    createdAt: now,
    scheduledFor,
    params: input.params,
  });
  const refused = input.skipReason
    ? null
    : (deps.refusal?.(
        plan.profile,
        plan.steps.map((s) => s.spec),
      ) ?? null);
  if (refused && input.trigger !== 'schedule' && input.trigger !== 'catchup') throw refused;
  const skipReason = input.skipReason ?? refused?.message;
  const state: RunState = skipReason ? 'skipped' : input.start === 'queued' ? 'queued' : 'running';
  const run = db.transaction((tx) => {
    if (scheduledFor !== null) {
      const existing = tx
        .select()
        .from(pipelineRuns)
        .where(and(eq(pipelineRuns.pipeline, pipeline.name), eq(pipelineRuns.scheduledFor, scheduledFor)))
        .get();
      if (existing) return { row: existing, created: false };
    }
    const row = tx
      .insert(pipelineRuns)
      .values({
        id,
        pipeline: pipeline.name,
        trigger: input.trigger,
        scheduledFor,
        params: input.params,
        definition: plan,
        state,
        detail: skipReason ?? null,
        webhookUrl: input.webhookUrl ?? plan.webhookUrl,
        createdAt: now,
        endedAt: state === 'skipped' ? now : null,
        updatedAt: now,
      })
      .returning()
      .get();
    if (state === 'running') addSteps(tx, row, plan.steps, now);
    return { row, created: true };
  });
  if (run.created && state === 'running') await queueSteps(deps, run.row.id);
  if (run.created) {
    deps.logger.info({ pipeline: pipeline.name, runId: id, trigger: input.trigger, state }, 'pipeline run made');
  } else {
    deps.logger.info({ pipeline: pipeline.name, runId: run.row.id, scheduledFor }, 'tick already has its run');
  }
  return run.row;
}

function addSteps(db: Db, run: PipelineRunRow, steps: readonly StepPlan[], at: number, attempt = 1): string[] {
  return steps.map((plan) => {
    const id = randomUUID();
    // Recorded `accepted` with the run (or its retry); queued once that commit is in (queueSteps).
    recordRequest(db, {
      queued: null,
      id,
      profile: (run.definition as RunPlan).profile,
      name: plan.spec.name,
      spec: plan.spec,
      origin: 'pipeline',
      at,
      source: 'pipeline',
      runId: run.id,
      step: plan.step,
      attempt,
      needs: plan.needs,
      deadlines: plan.deadlines,
      retryPolicy: plan.retry,
    });
    return id;
  });
}

/** Queues the submission of every step request of a run not queued yet. */
async function queueSteps(deps: RunEngineDeps, runId: string): Promise<void> {
  for (const row of stepRequests(deps.db, runId)) {
    if (row.state !== 'accepted') continue;
    await enqueueAccepted(deps, row.id, 'pipeline');
  }
}

/** For the submitter: the dependency a step request is submitted with, from its run's other steps. */
export function stepDependencies(db: Db, row: JobRequestRow): DependencyResolution {
  const run = row.runId ? getRun(db, row.runId) : undefined;
  if (!run) return { kind: 'ready', dependency: null };
  const plans = plansOf(run);
  return resolveDependencies(row.needs ?? [], latestAttempts(stepRequests(db, run.id)), plans);
}

function plansOf(run: PipelineRunRow): Map<string, StepPlan> {
  return new Map((run.definition as RunPlan).steps.map((s) => [s.step, s]));
}

/** Advances every active run; runs queued behind an ended one start. Returns the runs that ended. */
export async function advanceActiveRuns(deps: RunEngineDeps): Promise<PipelineRunRow[]> {
  const active = deps.db
    .select()
    .from(pipelineRuns)
    .where(eq(pipelineRuns.state, 'running'))
    .orderBy(asc(pipelineRuns.createdAt))
    .all();
  const ended: PipelineRunRow[] = [];
  for (const run of active) {
    const after = await advanceRun(deps, run);
    if (after) {
      ended.push(after);
      await startNextQueued(deps, after.pipeline);
    }
  }
  return ended;
}

/**
 * One step of a run's life. A step that ended in a state its retry names gets
 * another attempt; a step cancelled because a dependency failed is made again
 * once that dependency is being retried; when every step has its last word the
 * run ends, succeeded only if every step completed. Returns the run if it ended.
 */
async function advanceRun(deps: RunEngineDeps, run: PipelineRunRow): Promise<PipelineRunRow | null> {
  const { db, logger } = deps;
  // A run being cancelled gets no retries and no steps made again: what is left is cancelled.
  if (run.cancelRequestedAt !== null) {
    await cancelStepsOnce(deps, run, { source: 'pipeline', who: run.cancelledBy ?? 'a cancel' });
    return finishCancelIfDone(db, run.id);
  }
  const plan = run.definition as RunPlan;
  const plans = plansOf(run);
  const now = Date.now();
  let latest = latestAttempts(stepRequests(db, run.id));
  let added = false;

  for (const stepPlan of plan.steps) {
    const row = latest.get(stepPlan.step);
    if (!row) continue;
    // Its next attempt is due: src/requests/attempts.ts makes it (before this pass, on the same tick).
    if (row.retryDueAt !== null) continue;
    if (legacyRetryPending(row, stepPlan)) {
      addSteps(db, run, [stepPlan], now, row.attempt + 1);
      logger.info({ runId: run.id, step: stepPlan.step, attempt: row.attempt + 1, after: row.state }, 'step retried');
      added = true;
      latest = latestAttempts(stepRequests(db, run.id));
      continue;
    }
    if (isTerminalRequest(row.state)) cancelling.delete(row.id);
    const resolution = resolveDependencies(stepPlan.needs, latest, plans);
    const blocked = row.jobId !== null && row.startedAt === null && !isTerminalRequest(row.state);
    if (resolution.kind === 'never') {
      // Submitted behind a step that has since ended the wrong way: Slurm (without
      // kill_invalid_depend, its default) holds it PENDING forever, so it is cancelled here.
      if (blocked) await cancelBlocked(deps, run, stepPlan.step, row);
      continue;
    }
    if (!madeAgainstOldAttempt(row, stepPlan, latest)) continue;
    if (isTerminalRequest(row.state)) {
      // A step it needs is being retried: this step gets another go behind the new attempt.
      addSteps(db, run, [stepPlan], now, row.attempt + 1);
      logger.info({ runId: run.id, step: stepPlan.step }, 'step made again behind a retried dependency');
      added = true;
      latest = latestAttempts(stepRequests(db, run.id));
    } else if (blocked) {
      // Still waiting on the failed attempt (Slurm without kill_invalid_depend holds it forever):
      // cancel it; once it is cancelled, a pass makes it again.
      await cancelBlocked(deps, run, stepPlan.step, row);
    }
  }
  if (added) {
    await queueSteps(deps, run.id);
    return null;
  }
  return finishIfDone(db, run, plan, latest, now);
}

/** Requests being cancelled because they wait on a dependency that cannot be met, so a pass does not cancel twice. */
const cancelling = new Set<string>();

async function cancelBlocked(
  deps: RunEngineDeps,
  run: PipelineRunRow,
  step: string,
  row: JobRequestRow,
): Promise<void> {
  if (row.jobId === null || cancelling.has(row.id)) return;
  cancelling.add(row.id);
  deps.logger.info({ runId: run.id, step, job_id: row.jobId }, 'cancelling a step whose dependency can never be met');
  await deps.cancelJob(row.profile, row.jobId).catch((error: Error) => {
    cancelling.delete(row.id);
    deps.logger.warn({ runId: run.id, step, err: error }, 'could not cancel a blocked step');
  });
}

/**
 * A step attempt that never started and was made while a step it needs was on
 * an older attempt: it waits on (or was cancelled for) a failed job that has
 * since been retried. One not yet submitted needs nothing: it is submitted
 * against the newest attempts.
 */
function madeAgainstOldAttempt(
  row: JobRequestRow,
  plan: StepPlan,
  latest: ReadonlyMap<string, JobRequestRow>,
): boolean {
  if (row.startedAt !== null || (row.jobId === null && !isTerminalRequest(row.state))) return false;
  if (row.state !== 'cancelled' && row.state !== 'pending' && row.state !== 'submitted') return false;
  return plan.needs.some((need) => {
    const current = latest.get(need.step);
    return current !== undefined && current.attempt > 1 && current.createdAt > row.createdAt;
  });
}

function finishIfDone(
  db: Db,
  run: PipelineRunRow,
  plan: RunPlan,
  latest: ReadonlyMap<string, JobRequestRow>,
  now: number,
): PipelineRunRow | null {
  const rows = plan.steps.map((s) => latest.get(s.step)).filter((r): r is JobRequestRow => r !== undefined);
  const startedAt = Math.min(...rows.map((r) => r.startedAt ?? Number.POSITIVE_INFINITY));
  if (run.startedAt === null && Number.isFinite(startedAt)) {
    db.update(pipelineRuns).set({ startedAt, updatedAt: now }).where(eq(pipelineRuns.id, run.id)).run();
  }
  const over = (r: JobRequestRow) => isTerminalRequest(r.state) && r.retryDueAt === null;
  if (rows.length < plan.steps.length || !rows.every(over)) return null;
  const failed = rows.filter((r) => r.state !== 'completed');
  const detail = failed.length
    ? failed.map((r) => `${r.step}: ${r.state.toUpperCase()}${r.exitCode ? ` (exit ${r.exitCode})` : ''}`).join(', ')
    : null;
  const endedAt = Math.max(...rows.map((r) => r.endedAt ?? r.updatedAt));
  return db.transaction((tx) => {
    // A cancel asked for since this pass read the run: its steps have ended, the run is cancelled.
    const cancel = tx
      .select({ at: pipelineRuns.cancelRequestedAt, by: pipelineRuns.cancelledBy })
      .from(pipelineRuns)
      .where(eq(pipelineRuns.id, run.id))
      .get();
    if (cancel?.at != null && failed.length > 0) {
      return endRun(tx, run.id, 'running', 'cancelled', cancelDetail(cancel.by, failed), endedAt, now);
    }
    return endRun(tx, run.id, 'running', failed.length ? 'failed' : 'succeeded', detail, endedAt, now);
  });
}

/**
 * Ends a run that is still in `from`, and records its webhook in the same transaction: the
 * webhook is never lost, and never sent for a run that did not end, or twice for one that did
 * (the state condition lets one caller end it). Null when something else ended it first.
 */
function endRun(
  tx: Db,
  runId: string,
  from: 'running' | 'queued',
  state: RunState,
  detail: string | null,
  endedAt: number,
  now: number,
): PipelineRunRow | null {
  const ended = tx
    .update(pipelineRuns)
    .set({ state, detail, endedAt, updatedAt: now })
    .where(and(eq(pipelineRuns.id, runId), eq(pipelineRuns.state, from)))
    .returning()
    .get();
  if (ended?.webhookUrl) {
    const payload = runFinishedBody(ended, stepRequests(tx, runId));
    addDelivery(tx, { event: 'run.finished', url: ended.webhookUrl, runId, payload, at: endedAt });
  }
  return ended ?? null;
}

function cancelDetail(by: string | null, notCompleted: readonly JobRequestRow[]): string {
  const steps = notCompleted.map((r) => `${r.step}: ${r.state.toUpperCase()}`).join(', ');
  return `cancelled by ${by ?? 'someone'}${steps ? ` (${steps})` : ''}`;
}

/** What became of one step of a run being cancelled. */
export interface StepCancel {
  step: string;
  requestId: string;
  /**
   * `withdrawn`: never submitted, now cancelled here; `cancel_sent`: the scheduler was asked to
   * cancel its job (the next poll records CANCELLED); `submitting`: being submitted right now, its
   * cancel follows once it is (each pipeline tick tries again); `error`: the scheduler did not take
   * the cancel (`detail`), tried again at the next tick.
   */
  outcome: 'withdrawn' | 'cancel_sent' | 'submitting' | 'error';
  detail: string | null;
}

export type RunCancelOutcome =
  | { kind: 'not_found' }
  /** Ended before the cancel in another state (`run.state`): nothing to cancel. */
  | { kind: 'ended'; run: PipelineRunRow }
  /** The run is `cancelled`: just now, or earlier (`already`). */
  | { kind: 'cancelled'; run: PipelineRunRow; already: boolean; steps: StepCancel[] }
  /** Asked: steps are still ending upstream or being submitted; it ends `cancelled` once they have. */
  | { kind: 'cancelling'; run: PipelineRunRow; steps: StepCancel[] };

/** Requests of runs being cancelled whose cancel the scheduler took: a later pass does not send it again. */
const cancelSent = new Set<string>();

/**
 * Cancels a run: every step not yet ended is withdrawn (not submitted yet, including steps
 * waiting on their dependencies) or cancelled upstream (submitted). The cancel is recorded on
 * the run first, so from then on no step is retried or made again, a step being submitted right
 * now is cancelled by the pipeline tick once it is, and a restart finishes what was begun. The
 * run ends `cancelled` (webhook once) when its last step has ended; asking again reports where
 * it stands. A run queued behind another ends at once.
 */
export async function cancelRun(
  deps: RunEngineDeps,
  runId: string,
  by: { source: 'api' | 'cli'; who: string },
): Promise<RunCancelOutcome> {
  const { db, logger } = deps;
  const run = getRun(db, runId);
  if (!run) return { kind: 'not_found' };
  if (isTerminalRun(run.state)) {
    return run.state === 'cancelled' ? { kind: 'cancelled', run, already: true, steps: [] } : { kind: 'ended', run };
  }
  const now = Date.now();
  // The first to ask is the one recorded; asking again goes on with the same cancel.
  db.update(pipelineRuns)
    .set({ cancelRequestedAt: now, cancelledBy: by.who, updatedAt: now })
    .where(and(eq(pipelineRuns.id, runId), isNull(pipelineRuns.cancelRequestedAt)))
    .run();
  if (run.state === 'queued') {
    // No step made yet: it ends here, unless it has just been started (then as a running one).
    const ended = db.transaction((tx) => endRun(tx, runId, 'queued', 'cancelled', cancelDetail(by.who, []), now, now));
    if (ended) {
      logger.info({ runId, pipeline: run.pipeline, by: by.who }, 'queued pipeline run cancelled');
      return { kind: 'cancelled', run: ended, already: false, steps: [] };
    }
  }
  const marked = getRun(db, runId) ?? run;
  const steps = await cancelStepsOnce(deps, marked, by);
  const ended = finishCancelIfDone(db, runId);
  logger.info(
    { runId, pipeline: run.pipeline, by: by.who, steps: steps.length, ended: ended !== null },
    'pipeline run cancel',
  );
  if (ended) {
    await startNextQueued(deps, ended.pipeline);
    return { kind: 'cancelled', run: ended, already: false, steps };
  }
  const after = getRun(db, runId) ?? marked;
  if (isTerminalRun(after.state)) {
    // The pipeline tick ended it meanwhile.
    return after.state === 'cancelled'
      ? { kind: 'cancelled', run: after, already: false, steps }
      : { kind: 'ended', run: after };
  }
  return { kind: 'cancelling', run: after, steps };
}

/** The pass over a run's steps under way, by run id. */
const stepCancels = new Map<string, Promise<StepCancel[]>>();

/**
 * One pass over a run's steps at a time: the pipeline tick goes on with a cancel the API asked
 * for, and a pass that started while another ran would find the steps the other one handled
 * ended (withdrawn) or already sent, and leave them out of its answer. A second asker gets the
 * outcomes of the pass under way.
 */
function cancelStepsOnce(
  deps: RunEngineDeps,
  run: PipelineRunRow,
  by: { source: 'api' | 'cli' | 'pipeline'; who: string },
): Promise<StepCancel[]> {
  const running = stepCancels.get(run.id);
  if (running) return running;
  const pass = cancelSteps(deps, run, by).finally(() => stepCancels.delete(run.id));
  stepCancels.set(run.id, pass);
  return pass;
}

/** Cancels every step request of the run that has not ended; one the scheduler refuses is tried again later. */
async function cancelSteps(
  deps: RunEngineDeps,
  run: PipelineRunRow,
  by: { source: 'api' | 'cli' | 'pipeline'; who: string },
): Promise<StepCancel[]> {
  const results: StepCancel[] = [];
  for (const row of stepRequests(deps.db, run.id)) {
    if (isTerminalRequest(row.state)) {
      cancelSent.delete(row.id);
      continue;
    }
    const step = row.step ?? row.name;
    // Its cancel is on its way: the poll records CANCELLED. An explicit request (not the tick) sends it again.
    if (by.source === 'pipeline' && cancelSent.has(row.id)) continue;
    try {
      const outcome = await deps.cancelStep(row.id, by);
      switch (outcome.kind) {
        case 'cancelled':
          results.push({ step, requestId: row.id, outcome: 'withdrawn', detail: null });
          break;
        case 'requested':
          cancelSent.add(row.id);
          results.push({ step, requestId: row.id, outcome: 'cancel_sent', detail: `job ${outcome.row.jobId}` });
          break;
        case 'submitting':
          results.push({
            step,
            requestId: row.id,
            outcome: 'submitting',
            detail: 'being submitted right now: cancelled once it is',
          });
          break;
        case 'ended':
          // Ended upstream before the cancel reached it: the poll records how.
          cancelSent.add(row.id);
          break;
        case 'not_found':
          break;
        default:
          assertNever(outcome);
      }
    } catch (error) {
      const message = (error as Error).message;
      deps.logger.warn({ runId: run.id, step, err: error }, 'could not cancel a step of a run being cancelled');
      results.push({ step, requestId: row.id, outcome: 'error', detail: message });
    }
  }
  return results;
}

/** Ends a run being cancelled once every one of its step requests has ended. */
function finishCancelIfDone(db: Db, runId: string): PipelineRunRow | null {
  return db.transaction((tx) => {
    const run = getRun(tx, runId);
    if (run?.state !== 'running') return null;
    const rows = stepRequests(tx, runId);
    if (!rows.every((r) => isTerminalRequest(r.state))) return null;
    const latest = [...latestAttempts(rows).values()];
    const notCompleted = latest.filter((r) => r.state !== 'completed');
    const now = Date.now();
    const endedAt = rows.length ? Math.max(...rows.map((r) => r.endedAt ?? r.updatedAt)) : now;
    // Every step completed before the cancel could stop one: the run did succeed.
    if (notCompleted.length === 0 && latest.length === (run.definition as RunPlan).steps.length) {
      return endRun(tx, runId, 'running', 'succeeded', null, endedAt, now);
    }
    return endRun(
      tx,
      runId,
      'running',
      'cancelled',
      cancelDetail(run.cancelledBy, notCompleted),
      Math.max(endedAt, run.cancelRequestedAt ?? 0),
      now,
    );
  });
}

/** Overlap `queue`: the oldest run waiting behind the pipeline's active one starts when none is active. */
export async function startNextQueued(deps: RunEngineDeps, pipeline: string): Promise<void> {
  const { db } = deps;
  const next = db.transaction((tx) => {
    const active = tx
      .select({ id: pipelineRuns.id })
      .from(pipelineRuns)
      .where(and(eq(pipelineRuns.pipeline, pipeline), eq(pipelineRuns.state, 'running')))
      .get();
    if (active) return null;
    const queued = tx
      .select()
      .from(pipelineRuns)
      .where(and(eq(pipelineRuns.pipeline, pipeline), eq(pipelineRuns.state, 'queued')))
      .orderBy(asc(pipelineRuns.createdAt))
      .get();
    if (!queued) return null;
    const now = Date.now();
    tx.update(pipelineRuns).set({ state: 'running', updatedAt: now }).where(eq(pipelineRuns.id, queued.id)).run();
    addSteps(tx, queued, (queued.definition as RunPlan).steps, now);
    return queued;
  });
  if (next) {
    await queueSteps(deps, next.id);
    deps.logger.info({ pipeline, runId: next.id }, 'queued pipeline run started');
  }
}

/** The pipeline's runs that are not over (queued or running). */
export function activeRuns(db: Db, pipeline: string): PipelineRunRow[] {
  return db
    .select()
    .from(pipelineRuns)
    .where(and(eq(pipelineRuns.pipeline, pipeline), inArray(pipelineRuns.state, ['queued', 'running'])))
    .all();
}

export const isTerminalRun = (state: RunState): boolean => (TERMINAL_RUN_STATES as readonly RunState[]).includes(state);
