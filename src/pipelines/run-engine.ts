import { randomUUID } from 'node:crypto';
import { and, asc, eq, inArray } from 'drizzle-orm';
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
import { runFinishedBody } from '../notify/events.js';
import { enqueueAccepted, recordRequest } from '../requests/accept.js';
import type { AttemptDeps } from '../requests/attempts.js';
import { isTerminalRequest } from '../requests/request-state.js';
import type { DependencyResolution } from '../requests/submitter.js';
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
  const state: RunState = input.skipReason ? 'skipped' : input.start === 'queued' ? 'queued' : 'running';
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
        detail: input.skipReason ?? null,
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
    const ended = tx
      .update(pipelineRuns)
      .set({ state: failed.length ? 'failed' : 'succeeded', detail, endedAt, updatedAt: now })
      .where(and(eq(pipelineRuns.id, run.id), eq(pipelineRuns.state, 'running')))
      .returning()
      .get();
    if (ended?.webhookUrl) {
      // In the transaction that ends the run: the webhook is never lost, never sent for a run that did not end.
      const payload = runFinishedBody(ended, stepRequests(tx, run.id));
      addDelivery(tx, { event: 'run.finished', url: ended.webhookUrl, runId: run.id, payload, at: endedAt });
    }
    return ended ?? null;
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
