import { randomUUID } from 'node:crypto';
import { type AuditContext, appendAudit, auditEntryOf } from '../db/audit.js';
import type { History } from '../db/history.js';
import {
  activeRuns,
  getRun,
  hasRunningRun,
  lockedRun,
  lockPipelineRuns,
  oldestQueuedRun,
  recordRunCancelRequested,
  recordRunStarted,
  runningRuns,
  runOfTick,
  runOfUpstream,
  stepRequests,
} from '../db/runs.js';
import type {
  AuditOutcome,
  JobRequestRow,
  PipelineRunRow,
  RunState,
  RunTransitionSource,
  RunTrigger,
} from '../db/schema.js';
import { addDelivery } from '../db/webhooks.js';
import { ConfigError, SchedflowError } from '../errors.js';
import { assertNever } from '../lib/assert-never.js';
import { type Clock, systemClock } from '../lib/clock.js';
import { runFinishedBody } from '../notify/events.js';
import { enqueueAccepted, recordRequest } from '../requests/accept.js';
import type { AttemptDeps } from '../requests/attempts.js';
import type { CancelOutcome } from '../requests/canceller.js';
import { OUTPUTS_ENV } from '../requests/outputs-file.js';
import { isTerminalRequest } from '../requests/request-state.js';
import type { DependencyResolution } from '../requests/submitter.js';
import { transition } from '../requests/transition.js';
import type { JobSpec } from '../sched/job-spec.js';
import type { CancelsInFlight, StepCancel } from './cancels-in-flight.js';
import { collectOutputs, type DeferredOutcome, deferredOutcome } from './deferred-steps.js';
import type { LoadedPipeline } from './pipeline-loader.js';
import { type PlanInput, planRun, type RunPlan, type StepPlan, type UpstreamRun } from './run-plan.js';
import { isTerminalRun, recordRun, transitionRun } from './run-transition.js';
import { latestAttempts, legacyRetryPending, resolveDependencies } from './step-dependencies.js';

/**
 * The life of a pipeline run: made from a plan (its steps become job
 * requests, submitted together with Slurm dependencies), then advanced as its
 * steps end: retries, steps re-made after a retried dependency, the run's end.
 */

/**
 * Step requests are accepted (`store`, `submitQueue`) through src/requests/accept.ts; their
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
  /** The cancels this engine has sent and not yet seen end: one per engine, made with it. */
  inFlight: CancelsInFlight;
  /** Folders a step's outputs file is never read from (schedflow's data and configuration). @defaultValue [] */
  protectedDirs?: readonly string[];
}

export interface NewRun {
  trigger: RunTrigger;
  /** Who asked for it, in words; none for the schedule's runs. */
  triggeredBy?: string | null;
  /** Who asked for it (src/access/principal.ts); the schedule's runs: `schedule:<pipeline>`. */
  actor: string;
  params: Record<string, string>;
  scheduledFor?: number | null;
  webhookUrl?: string | null;
  /** `queued`: made now, started when the active run of the pipeline ends (overlap: queue). */
  start?: 'now' | 'queued';
  /** `skipped`: recorded only, with the reason (overlap: skip). */
  skipReason?: string;
  /**
   * A scheduled tick's overlap policy, applied here rather than by the caller: whether another
   * run of the pipeline is active is read in the transaction that makes this one, so a run that
   * ends meanwhile, or another tick fired at the same time (by another host), cannot make both
   * start or leave this one queued behind a run that has already ended. Overrides `start`.
   */
  overlap?: 'skip' | 'queue' | 'allow';
  /**
   * Who asked, for the audit log: its `run.trigger` row is written in the transaction that makes
   * the run. None for the schedule's ticks (the daemon's own doing: docs/audit.md).
   */
  audit?: AuditContext;
  /**
   * The end of another run that starts this one (`trigger: upstream`): one run per end (its run
   * and attempt), however many hosts follow it; its values are `${upstream.…}`.
   */
  upstream?: UpstreamRun & { attempt: number };
}

/**
 * The plan of a run; for a run that an upstream end starts, a plan that cannot be made (an
 * output its steps use was not written) is a run recorded `skipped` with the reason, as a
 * scheduled one refused at the door is: nobody is there to be told otherwise.
 */
function planOrSkip(
  pipeline: LoadedPipeline,
  input: PlanInput,
): { plan: RunPlan; skipReason?: undefined } | { plan: RunPlan; skipReason: string } {
  try {
    return { plan: planRun(pipeline, input) };
  } catch (error) {
    if (!(input.upstream && error instanceof ConfigError)) throw error;
    const plan: RunPlan = {
      profile: pipeline.profile,
      steps: [],
      deadlines: null,
      webhookUrl: pipeline.def.webhook ?? null,
      schedule: null,
    };
    return { plan, skipReason: `not started: ${error.message}` };
  }
}

/** Makes a run. A scheduled tick that already has a run gets that run back, so a tick never fires twice. */
export async function createRun(deps: RunEngineDeps, pipeline: LoadedPipeline, input: NewRun): Promise<PipelineRunRow> {
  const { store } = deps;
  const id = randomUUID();
  const now = (deps.clock ?? systemClock).now();
  const scheduledFor = input.scheduledFor ?? null;
  const upstream = input.upstream;
  const planned = planOrSkip(pipeline, {
    runId: id,
    trigger: input.trigger,
    createdAt: now,
    scheduledFor,
    params: input.params,
    ...(upstream && { upstream }),
  });
  const { plan } = planned;
  const unplanned = planned.skipReason;
  const refused =
    (input.skipReason ?? unplanned)
      ? null
      : (deps.refusal?.(
          plan.profile,
          plan.steps.map((s) => s.spec),
        ) ?? null);
  if (refused && !['schedule', 'catchup', 'upstream'].includes(input.trigger)) throw refused;
  const run = await store.transaction(async (tx) => {
    const overlap = input.overlap === 'allow' ? undefined : input.overlap;
    // One tick's overlap decision at a time per pipeline (hosts fire catch-up ticks at once).
    if (overlap) await lockPipelineRuns(tx, pipeline.name, now);
    const existing = await madeAlready(tx, pipeline.name, scheduledFor, upstream);
    if (existing) return { row: existing, created: false };
    let skipReason = input.skipReason ?? unplanned ?? refused?.message;
    let start = input.start ?? 'now';
    if (overlap) {
      // Locked: a run ending now ends before this reads it, or after this run is committed
      // (then startNextQueued finds this one queued behind it).
      const active = (await activeRuns(tx, pipeline.name, { lock: true })).filter(
        (r) => r.scheduledFor !== scheduledFor,
      );
      if (active.length > 0 && overlap === 'skip') {
        skipReason = `tick skipped: run ${active[0]?.id} is still active (overlap: skip)`;
      }
      start = active.length > 0 ? 'queued' : 'now';
    }
    const state: RunState = skipReason ? 'skipped' : start === 'queued' ? 'queued' : 'running';
    const row = await recordRun(
      tx,
      {
        id,
        pipeline: pipeline.name,
        owner: pipeline.def.owner,
        actor: input.actor,
        trigger: input.trigger,
        triggeredBy: input.triggeredBy ?? null,
        scheduledFor,
        params: input.params,
        definition: plan,
        state,
        detail: skipReason ?? null,
        webhookUrl: input.webhookUrl ?? plan.webhookUrl,
        createdAt: now,
        endedAt: state === 'skipped' ? now : null,
        updatedAt: now,
        upstreamRunId: upstream?.runId ?? null,
        upstreamAttempt: upstream?.attempt ?? null,
        // A skipped run never ran: it starts nothing.
        downstreamCheckedAt: state === 'skipped' ? now : null,
      },
      input.trigger,
    );
    if (!row) {
      // The tick (or upstream end) made by another host since the read above (its insert committed first).
      const existing = await madeAlready(tx, pipeline.name, scheduledFor, upstream);
      if (!existing) throw new Error(`pipeline run ${id} of ${pipeline.name} was not recorded`);
      return { row: existing, created: false };
    }
    if (state === 'running') await addSteps(tx, row, upFront(plan.steps), now);
    if (input.audit) {
      await appendAudit(
        tx,
        auditEntryOf(input.audit, {
          at: now,
          owner: row.owner,
          action: 'run.trigger',
          target: `run:${id}`,
          outcome: 'ok',
          detail: `pipeline ${pipeline.name}: ${state}${skipReason ? ` (${skipReason})` : ''}`,
        }),
      );
    }
    return { row, created: true };
  });
  const { state } = run.row;
  if (run.created && state === 'running') await queueSteps(deps, run.row.id);
  if (run.created) {
    deps.logger.info({ pipeline: pipeline.name, runId: id, trigger: input.trigger, state }, 'pipeline run made');
  } else {
    deps.logger.info({ pipeline: pipeline.name, runId: run.row.id, scheduledFor }, 'tick already has its run');
  }
  return run.row;
}

/** The run made already for a scheduled tick, or for an upstream run's end: each has one. */
async function madeAlready(
  tx: History,
  pipeline: string,
  scheduledFor: number | null,
  upstream: NewRun['upstream'],
): Promise<PipelineRunRow | undefined> {
  if (scheduledFor !== null) return runOfTick(tx, pipeline, scheduledFor);
  if (upstream) return runOfUpstream(tx, pipeline, { runId: upstream.runId, attempt: upstream.attempt });
  return undefined;
}

/** The steps made with the run: all but those waiting for other steps' outputs (src/pipelines/deferred-steps.ts). */
function upFront(steps: readonly StepPlan[]): StepPlan[] {
  return steps.filter((s) => !s.deferred);
}

/**
 * A deferred step's spec is known only now (its array sized by an output, say): the door that
 * refuses a run whose steps the profile cannot take (src/requests/door.ts) is asked for it here,
 * and a refusal ends the step unsubmitted with it, as the run's refusal would have.
 */
function doorChecked(
  deps: RunEngineDeps,
  profile: string,
  outcome: Exclude<DeferredOutcome, { kind: 'wait' }>,
): Exclude<DeferredOutcome, { kind: 'wait' }> {
  if (outcome.kind !== 'submit') return outcome;
  const refused = deps.refusal?.(profile, [outcome.spec]) ?? null;
  if (!refused) return outcome;
  return {
    kind: 'end',
    spec: outcome.spec,
    state: 'submit_failed',
    reason: 'Refused',
    detail: `not submitted: ${refused.message}`,
    errorCode: refused instanceof SchedflowError ? refused.code : null,
  };
}

/** Makes a deferred step's request: to be submitted, or ended at once (skipped, or a value it uses unknown). */
async function addDeferred(
  tx: History,
  run: PipelineRunRow,
  plan: StepPlan,
  outcome: Exclude<DeferredOutcome, { kind: 'wait' }>,
  at: number,
): Promise<void> {
  // A step a resume left to be made here is its next attempt (an earlier run attempt's request).
  const prior = latestAttempts(await stepRequests(tx, run.id)).get(plan.step);
  const [id] = await addSteps(tx, run, [{ ...plan, spec: outcome.spec }], at, (prior?.attempt ?? 0) + 1);
  if (id === undefined || outcome.kind === 'submit') return;
  await transition(tx, id, {
    to: outcome.state,
    source: 'pipeline',
    at,
    reason: outcome.reason,
    detail: outcome.detail,
    patch: {
      endedAt: at,
      ...(outcome.errorCode !== null && { errorCode: outcome.errorCode, errorMessage: outcome.detail }),
    },
  });
}

/**
 * Records step requests of the run (`accepted`), in the caller's transaction; `attempt` is the
 * steps' own attempt number, and they belong to the run's current attempt (a resume's steps:
 * src/pipelines/run-resume.ts). Queued by {@link queueSteps} once that commits.
 */
export async function addSteps(
  h: History,
  run: PipelineRunRow,
  steps: readonly StepPlan[],
  at: number,
  attempt = 1,
): Promise<string[]> {
  const ids: string[] = [];
  for (const plan of steps) {
    const id = randomUUID();
    // Recorded `accepted` with the run (or its retry); queued once that commit is in (queueSteps).
    // One after another: they share the caller's transaction.
    await recordRequest(h, {
      queued: null,
      id,
      profile: (run.definition as RunPlan).profile,
      name: plan.spec.name,
      spec: plan.spec,
      origin: 'pipeline',
      owner: run.owner,
      actor: run.actor,
      at,
      source: 'pipeline',
      runId: run.id,
      step: plan.step,
      attempt,
      runAttempt: run.attempt,
      needs: plan.needs,
      deadlines: plan.deadlines,
      retryPolicy: plan.retry,
    });
    ids.push(id);
  }
  return ids;
}

/** Queues the submission of every step request of a run not queued yet. */
export async function queueSteps(deps: RunEngineDeps, runId: string): Promise<void> {
  for (const row of await stepRequests(deps.store, runId)) {
    if (row.state !== 'accepted') continue;
    await enqueueAccepted(deps, row.id, 'pipeline');
  }
}

/** For the submitter: the dependency a step request is submitted with, from its run's other steps. */
export async function stepDependencies(h: History, row: JobRequestRow): Promise<DependencyResolution> {
  const run = row.runId ? await getRun(h, row.runId) : undefined;
  if (!run) return { kind: 'ready', dependency: null };
  const plans = plansOf(run);
  return resolveDependencies(row.needs ?? [], latestAttempts(await stepRequests(h, run.id)), plans);
}

function plansOf(run: PipelineRunRow): Map<string, StepPlan> {
  return new Map((run.definition as RunPlan).steps.map((s) => [s.step, s]));
}

/**
 * Advances every active run; runs queued behind an ended one start. Returns the runs that ended.
 * `usedDownstream`: the steps of a pipeline whose outputs the pipelines that follow it use
 * (`${upstream.outputs.…}`), read as this run's own steps' uses are.
 */
export async function advanceActiveRuns(
  deps: RunEngineDeps,
  usedDownstream: (pipeline: string) => ReadonlySet<string> = () => new Set(),
): Promise<PipelineRunRow[]> {
  const active = await runningRuns(deps.store);
  const ended: PipelineRunRow[] = [];
  for (const run of active) {
    const after = await advanceRun(deps, run, usedDownstream(run.pipeline));
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
 *
 * What it writes (steps made, the run's start and end) is decided again and written in one
 * transaction on the locked run: two passes over one run (ticks on two hosts) would both make
 * the same step again, and a cancel recorded between the read and the write would be missed.
 * A look without the lock comes first: most passes find steps still under way and nothing to
 * write, and a transaction for every active run at every tick would take the write lock (and,
 * on PostgreSQL, write each run's row) for nothing.
 */
async function advanceRun(
  deps: RunEngineDeps,
  listed: PipelineRunRow,
  usedDownstream: ReadonlySet<string>,
): Promise<PipelineRunRow | null> {
  const { store, logger } = deps;
  const plan = listed.definition as RunPlan;
  const plans = plansOf(listed);
  const now = (deps.clock ?? systemClock).now();
  let pass: Pass;
  let rows = listed.cancelRequestedAt === null ? await stepRequests(store, listed.id) : [];
  // Outputs of steps that completed, read before anything is decided: the steps that use them
  // are made on this pass, and the run's webhook, if it ends now, carries them.
  const outputs = {
    protectedDirs: deps.protectedDirs ?? [],
    steps: new Set([...stepsWithOutputs(plan), ...usedDownstream]),
    now,
  };
  if (outputs.steps.size > 0 && (await collectOutputs(store, rows, outputs))) {
    rows = await stepRequests(store, listed.id);
  }
  const look = listed.cancelRequestedAt === null ? await decide(deps.inFlight, listed, plan, plans, rows) : null;
  if (look && !look.write) {
    pass = { kind: 'checked', run: listed, blocked: look.blocked, ended: null };
  } else {
    pass = await store.transaction(async (tx): Promise<Pass> => {
      const run = await lockedRun(tx, listed.id);
      if (run?.state !== 'running') return { kind: 'over' };
      if (run.cancelRequestedAt !== null) return { kind: 'cancelling', run };
      const decided = await decide(
        deps.inFlight,
        run,
        plan,
        plans,
        await stepRequests(tx, run.id),
        async (stepPlan, row, why) => {
          await addSteps(tx, run, [stepPlan], now, row.attempt + 1);
          if (why === 'retry') {
            logger.info(
              { runId: run.id, step: stepPlan.step, attempt: row.attempt + 1, after: row.state },
              'step retried',
            );
          } else {
            logger.info({ runId: run.id, step: stepPlan.step }, 'step made again behind a retried dependency');
          }
          return stepRequests(tx, run.id);
        },
        async (stepPlan, decided) => {
          const outcome = doorChecked(deps, plan.profile, decided);
          await addDeferred(tx, run, stepPlan, outcome, now);
          logger.info(
            { runId: run.id, step: stepPlan.step, made: outcome.kind === 'submit' ? 'submitted' : outcome.state },
            'step made with the outputs it uses',
          );
          return stepRequests(tx, run.id);
        },
      );
      if (decided.added) return { kind: 'added', run, blocked: decided.blocked };
      // A blocked step has not ended: the run does not end with it.
      return {
        kind: 'checked',
        run,
        blocked: decided.blocked,
        // A run ends with its outputs read (from the rows read here, under the lock: a step that
        // completed since the look is seen): its webhook and the runs that follow it carry them.
        ended: outputsUnread(decided.latest, outputs.steps)
          ? null
          : await finishIfDone(tx, run, plan, decided.latest, now),
      };
    });
  }
  if (pass.kind === 'over') return null;
  if (pass.kind === 'cancelling') {
    // A run being cancelled gets no retries and no steps made again: what is left is cancelled.
    await cancelStepsOnce(deps, pass.run, { source: 'pipeline', who: pass.run.cancelledBy ?? 'a cancel' });
    return finishCancelIfDone(store, pass.run.id, 'pipeline', deps.clock);
  }
  // Upstream, so after the transaction.
  for (const { step, row } of pass.blocked) await cancelBlocked(deps, pass.run, step, row);
  if (pass.kind === 'added') {
    await queueSteps(deps, pass.run.id);
    return null;
  }
  return pass.ended;
}

/** Whether a completed step whose outputs are wanted has not had them read yet (collectOutputs). */
function outputsUnread(latest: ReadonlyMap<string, JobRequestRow>, wanted: ReadonlySet<string>): boolean {
  for (const row of latest.values()) {
    if (row.state === 'completed' && row.outputs === null && row.step !== null && wanted.has(row.step)) return true;
  }
  return false;
}

/** The steps whose outputs are read for the run itself: used by another step, or declared (`outputs: { file }`). */
function stepsWithOutputs(plan: RunPlan): Set<string> {
  const steps = new Set<string>();
  for (const s of plan.steps) {
    for (const ref of s.deferred?.uses ?? []) steps.add(ref.step);
    if (s.spec.environment?.some((entry) => entry.startsWith(`${OUTPUTS_ENV}=`))) steps.add(s.step);
  }
  return steps;
}

interface Blocked {
  step: string;
  row: JobRequestRow;
}

/** What a pass over a run decided, for what follows its transaction. */
type Pass =
  /** Ended (or not running) by the time it was locked. */
  | { kind: 'over' }
  | { kind: 'cancelling'; run: PipelineRunRow }
  | { kind: 'added'; run: PipelineRunRow; blocked: Blocked[] }
  | { kind: 'checked'; run: PipelineRunRow; blocked: Blocked[]; ended: PipelineRunRow | null };

/**
 * What a pass does with a run's steps (`rows`, every attempt). With `add` (in the run's
 * transaction), steps are made there, each followed by the steps read again; without it, only
 * whether there is anything to write (`write`): a step to make, the run's start or its end.
 */
async function decide(
  inFlight: CancelsInFlight,
  run: PipelineRunRow,
  plan: RunPlan,
  plans: ReadonlyMap<string, StepPlan>,
  rows: readonly JobRequestRow[],
  add?: (stepPlan: StepPlan, row: JobRequestRow, why: 'retry' | 'behind_retry') => Promise<JobRequestRow[]>,
  /** With `add`: makes a deferred step whose outputs are known. */
  addDeferred?: (stepPlan: StepPlan, outcome: Exclude<DeferredOutcome, { kind: 'wait' }>) => Promise<JobRequestRow[]>,
): Promise<{ write: boolean; added: boolean; blocked: Blocked[]; latest: Map<string, JobRequestRow> }> {
  const current = (all: readonly JobRequestRow[]) => currentAttempts(latestAttempts(all), run.attempt);
  let latest = current(rows);
  let added = false;
  const blocked: Blocked[] = [];
  for (const stepPlan of plan.steps) {
    const row = latest.get(stepPlan.step);
    if (!row) continue;
    // Its next attempt is due: src/requests/attempts.ts makes it (before this pass, on the same tick).
    if (row.retryDueAt !== null) continue;
    if (legacyRetryPending(row, stepPlan)) {
      if (!add) return { write: true, added, blocked, latest };
      latest = current(await add(stepPlan, row, 'retry'));
      added = true;
      continue;
    }
    if (isTerminalRequest(row.state)) inFlight.blocked.delete(row.id);
    const resolution = resolveDependencies(stepPlan.needs, latest, plans);
    const isBlocked = row.jobId !== null && row.startedAt === null && !isTerminalRequest(row.state);
    if (resolution.kind === 'never') {
      // Submitted behind a step that has since ended the wrong way: Slurm (without
      // kill_invalid_depend, its default) holds it PENDING forever, so it is cancelled (after this).
      if (isBlocked) blocked.push({ step: stepPlan.step, row });
      continue;
    }
    if (!madeAgainstOldAttempt(row, stepPlan, latest)) continue;
    if (isTerminalRequest(row.state)) {
      // A step it needs is being retried: this step gets another go behind the new attempt.
      if (!add) return { write: true, added, blocked, latest };
      latest = current(await add(stepPlan, row, 'behind_retry'));
      added = true;
    } else if (isBlocked) {
      // Still waiting on the failed attempt (Slurm without kill_invalid_depend holds it forever):
      // cancel it; once it is cancelled, a pass makes it again.
      blocked.push({ step: stepPlan.step, row });
    }
  }
  // Deferred steps, in step order: one made here (even ended at once) lets those behind it be made.
  for (const stepPlan of plan.steps) {
    if (!stepPlan.deferred || latest.has(stepPlan.step)) continue;
    const outcome = deferredOutcome(stepPlan, latest, plans);
    if (outcome.kind === 'wait') continue;
    if (!addDeferred) return { write: true, added, blocked, latest };
    latest = current(await addDeferred(stepPlan, outcome));
    added = true;
  }
  const { startedAt, done } = progressOf(run, plan, latest);
  return { write: added || startedAt !== null || done, added, blocked, latest };
}

/**
 * The latest step attempts that count in the run's current attempt: a step that did not complete
 * in an earlier attempt of the run is one a resume left to be made again, and only a step waiting
 * on other steps' outputs is left so (src/pipelines/run-resume.ts makes the others at once). It is
 * not made yet: not ended, not a producer that failed, not a need met or broken.
 */
function currentAttempts(latest: Map<string, JobRequestRow>, runAttempt: number): Map<string, JobRequestRow> {
  for (const [step, row] of latest) {
    if (row.runAttempt < runAttempt && row.state !== 'completed') latest.delete(step);
  }
  return latest;
}

/**
 * Where a run's latest step attempts leave it: when it started, if that is not recorded yet
 * (null otherwise), and whether every step has its last word.
 */
function progressOf(
  run: PipelineRunRow,
  plan: RunPlan,
  latest: ReadonlyMap<string, JobRequestRow>,
): { rows: JobRequestRow[]; startedAt: number | null; done: boolean } {
  const rows = plan.steps.map((s) => latest.get(s.step)).filter((r): r is JobRequestRow => r !== undefined);
  const first = Math.min(...rows.map((r) => r.startedAt ?? Number.POSITIVE_INFINITY));
  const startedAt = run.startedAt === null && Number.isFinite(first) ? first : null;
  const over = (r: JobRequestRow) => isTerminalRequest(r.state) && r.retryDueAt === null;
  return { rows, startedAt, done: rows.length === plan.steps.length && rows.every(over) };
}

async function cancelBlocked(
  deps: RunEngineDeps,
  run: PipelineRunRow,
  step: string,
  row: JobRequestRow,
): Promise<void> {
  // Its cancel is on its way: a pass does not send it twice.
  const { blocked } = deps.inFlight;
  if (row.jobId === null || blocked.has(row.id)) return;
  blocked.add(row.id);
  deps.logger.info({ runId: run.id, step, job_id: row.jobId }, 'cancelling a step whose dependency can never be met');
  await deps.cancelJob(row.profile, row.jobId).catch((error: Error) => {
    blocked.delete(row.id);
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

/** Ends the run (in `tx`, where it is locked and not being cancelled) once every step has its last word. */
async function finishIfDone(
  tx: History,
  run: PipelineRunRow,
  plan: RunPlan,
  latest: ReadonlyMap<string, JobRequestRow>,
  now: number,
): Promise<PipelineRunRow | null> {
  const { rows, startedAt, done } = progressOf(run, plan, latest);
  if (startedAt !== null) await recordRunStarted(tx, run.id, startedAt, now);
  if (!done) return null;
  const failed = rows.filter((r) => r.state !== 'completed');
  const detail = failed.length
    ? failed.map((r) => `${r.step}: ${r.state.toUpperCase()}${r.exitCode ? ` (exit ${r.exitCode})` : ''}`).join(', ')
    : null;
  const endedAt = Math.max(...rows.map((r) => r.endedAt ?? r.updatedAt));
  // No cancel can be asked for meanwhile: the run was read locked, without one, in this
  // transaction (a cancel's write waits for it, and then finds the run ended).
  return endRun(tx, run.id, {
    from: 'running',
    to: failed.length ? 'failed' : 'succeeded',
    detail,
    endedAt,
    at: now,
    source: 'pipeline',
  });
}

interface RunEnd {
  from: 'running' | 'queued';
  to: RunState;
  detail: string | null;
  /** When it ended: its last step's end, or the cancel's time. */
  endedAt: number;
  /** When the end is recorded. */
  at: number;
  source: RunTransitionSource;
}

/**
 * Ends a run that is still in `from` (a guarded transition, logged), and records its webhook in
 * the same transaction: the webhook is never lost, and never sent for a run that did not end, or
 * twice for one that did (the guard lets one caller end it). Null when something else ended it first.
 */
async function endRun(tx: History, runId: string, end: RunEnd): Promise<PipelineRunRow | null> {
  const ended = await transitionRun(tx, runId, {
    from: end.from,
    to: end.to,
    at: end.at,
    source: end.source,
    detail: end.detail,
    patch: { detail: end.detail, endedAt: end.endedAt },
  });
  const { endedAt } = end;
  if (ended?.webhookUrl) {
    const payload = runFinishedBody(ended, await stepRequests(tx, runId));
    await addDelivery(tx, { event: 'run.finished', url: ended.webhookUrl, runId, payload, at: endedAt });
  }
  return ended ?? null;
}

function cancelDetail(by: string | null, notCompleted: readonly JobRequestRow[]): string {
  const steps = notCompleted.map((r) => `${r.step}: ${r.state.toUpperCase()}`).join(', ');
  return `cancelled by ${by ?? 'someone'}${steps ? ` (${steps})` : ''}`;
}

/** Who cancels a run: in words for the run's record, and for the audit log (absent: not written). */
export interface RunCancelBy {
  source: 'api' | 'cli';
  who: string;
  audit?: AuditContext;
}

export type RunCancelOutcome =
  | { kind: 'not_found' }
  /** Ended before the cancel in another state (`run.state`): nothing to cancel. */
  | { kind: 'ended'; run: PipelineRunRow }
  /** The run is `cancelled`: just now, or earlier (`already`). */
  | { kind: 'cancelled'; run: PipelineRunRow; already: boolean; steps: StepCancel[] }
  /** Asked: steps are still ending upstream or being submitted; it ends `cancelled` once they have. */
  | { kind: 'cancelling'; run: PipelineRunRow; steps: StepCancel[] };

/**
 * Cancels a run: every step not yet ended is withdrawn (not submitted yet, including steps
 * waiting on their dependencies) or cancelled upstream (submitted). The cancel is recorded on
 * the run first, so from then on no step is retried or made again, a step being submitted right
 * now is cancelled by the pipeline tick once it is, and a restart finishes what was begun. The
 * run ends `cancelled` (webhook once) when its last step has ended; asking again reports where
 * it stands. A run queued behind another ends at once.
 */
export async function cancelRun(deps: RunEngineDeps, runId: string, by: RunCancelBy): Promise<RunCancelOutcome> {
  const { store, logger } = deps;
  const now = (deps.clock ?? systemClock).now();
  const audit = (owner: string | null, outcome: AuditOutcome, detail: string | null) =>
    by.audit
      ? auditEntryOf(by.audit, { at: now, owner, action: 'run.cancel', target: `run:${runId}`, outcome, detail })
      : null;
  // A refusal changes nothing: its row is written alone.
  const refused = async (owner: string | null, detail: string) => {
    const entry = audit(owner, 'refused', detail);
    if (entry) await appendAudit(store, entry);
  };
  const run = await getRun(store, runId);
  if (!run) {
    await refused(null, 'no such run');
    return { kind: 'not_found' };
  }
  if (isTerminalRun(run.state)) {
    await refused(run.owner, run.state === 'cancelled' ? 'already cancelled' : `already ended: ${run.state}`);
    return run.state === 'cancelled' ? { kind: 'cancelled', run, already: true, steps: [] } : { kind: 'ended', run };
  }
  // The first to ask is the one recorded; asking again goes on with the same cancel. Not on a
  // run that has ended since it was read: that one is reported as it ended (below). The audit
  // row is written in the same transaction.
  await store.transaction(async (tx) => {
    const first = (await recordRunCancelRequested(tx, runId, by.who, now)) > 0;
    const entry = audit(run.owner, 'ok', first ? 'cancel asked' : 'asked again: the cancel asked before goes on');
    if (entry) await appendAudit(tx, entry);
  });
  if (run.state === 'queued') {
    // No step made yet: it ends here, unless it has just been started (then as a running one).
    const ended = await store.transaction((tx) =>
      endRun(tx, runId, {
        from: 'queued',
        to: 'cancelled',
        detail: cancelDetail(by.who, []),
        endedAt: now,
        at: now,
        source: by.source,
      }),
    );
    if (ended) {
      logger.info({ runId, pipeline: run.pipeline, by: by.who }, 'queued pipeline run cancelled');
      return { kind: 'cancelled', run: ended, already: false, steps: [] };
    }
  }
  const marked = (await getRun(store, runId)) ?? run;
  // The steps' cancels are the run's: recorded by its row alone, not one row per step.
  const steps = await cancelStepsOnce(deps, marked, { source: by.source, who: by.who });
  const ended = await finishCancelIfDone(store, runId, by.source, deps.clock);
  logger.info(
    { runId, pipeline: run.pipeline, by: by.who, steps: steps.length, ended: ended !== null },
    'pipeline run cancel',
  );
  if (ended) {
    await startNextQueued(deps, ended.pipeline);
    return { kind: 'cancelled', run: ended, already: false, steps };
  }
  const after = (await getRun(store, runId)) ?? marked;
  if (isTerminalRun(after.state)) {
    // The pipeline tick ended it meanwhile.
    return after.state === 'cancelled'
      ? { kind: 'cancelled', run: after, already: false, steps }
      : { kind: 'ended', run: after };
  }
  return { kind: 'cancelling', run: after, steps };
}

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
  const { passes } = deps.inFlight;
  const running = passes.get(run.id);
  if (running) return running;
  const pass = cancelSteps(deps, run, by).finally(() => passes.delete(run.id));
  passes.set(run.id, pass);
  return pass;
}

/** Cancels every step request of the run that has not ended; one the scheduler refuses is tried again later. */
async function cancelSteps(
  deps: RunEngineDeps,
  run: PipelineRunRow,
  by: { source: 'api' | 'cli' | 'pipeline'; who: string },
): Promise<StepCancel[]> {
  const results: StepCancel[] = [];
  const { sent } = deps.inFlight;
  for (const row of await stepRequests(deps.store, run.id)) {
    if (isTerminalRequest(row.state)) {
      sent.delete(row.id);
      continue;
    }
    const step = row.step ?? row.name;
    // Its cancel is on its way: the poll records CANCELLED. An explicit request (not the tick) sends it again.
    if (by.source === 'pipeline' && sent.has(row.id)) continue;
    try {
      const outcome = await deps.cancelStep(row.id, by);
      switch (outcome.kind) {
        case 'cancelled':
          results.push({ step, requestId: row.id, outcome: 'withdrawn', detail: null });
          break;
        case 'requested':
          sent.add(row.id);
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
          sent.add(row.id);
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

/**
 * Ends a run being cancelled once every one of its step requests has ended (read and ended in one
 * transaction). `source`: who is finishing it, the asker (`api`, `cli`) or the pipeline tick.
 */
function finishCancelIfDone(
  h: History,
  runId: string,
  source: RunTransitionSource,
  clock: Clock = systemClock,
): Promise<PipelineRunRow | null> {
  return h.transaction(async (tx) => {
    const run = await lockedRun(tx, runId);
    if (run?.state !== 'running') return null;
    const rows = await stepRequests(tx, runId);
    if (!rows.every((r) => isTerminalRequest(r.state))) return null;
    const latest = [...latestAttempts(rows).values()];
    const notCompleted = latest.filter((r) => r.state !== 'completed');
    const now = clock.now();
    const endedAt = rows.length ? Math.max(...rows.map((r) => r.endedAt ?? r.updatedAt)) : now;
    // Every step completed before the cancel could stop one: the run did succeed.
    if (notCompleted.length === 0 && latest.length === (run.definition as RunPlan).steps.length) {
      return endRun(tx, runId, { from: 'running', to: 'succeeded', detail: null, endedAt, at: now, source });
    }
    return endRun(tx, runId, {
      from: 'running',
      to: 'cancelled',
      detail: cancelDetail(run.cancelledBy, notCompleted),
      endedAt: Math.max(endedAt, run.cancelRequestedAt ?? 0),
      at: now,
      source,
    });
  });
}

/** Overlap `queue`: the oldest run waiting behind the pipeline's active one starts when none is active. */
export async function startNextQueued(deps: RunEngineDeps, pipeline: string): Promise<void> {
  const next = await deps.store.transaction(async (tx) => {
    // The queued run first, locked, then whether one is running: a second host starting the
    // pipeline's next run at the same time waits for this one's lock, then finds it running.
    const queued = await oldestQueuedRun(tx, pipeline);
    if (!queued) return null;
    if (await hasRunningRun(tx, pipeline)) return null;
    const now = (deps.clock ?? systemClock).now();
    // Still queued (not cancelled since): its steps are made once.
    const started = await transitionRun(tx, queued.id, { from: 'queued', to: 'running', at: now, source: 'pipeline' });
    if (!started) return null;
    await addSteps(tx, queued, upFront((queued.definition as RunPlan).steps), now);
    return queued;
  });
  if (next) {
    await queueSteps(deps, next.id);
    deps.logger.info({ pipeline, runId: next.id }, 'queued pipeline run started');
  }
}
