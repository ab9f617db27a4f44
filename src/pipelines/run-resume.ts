import { type AuditContext, appendAudit, auditEntryOf } from '../db/audit.js';
import type { History } from '../db/history.js';
import { getRun, lockedRun, lockPipelineRuns, stepRequests } from '../db/runs.js';
import type { Deadlines, JobRequestRow, PipelineRunRow, RunState } from '../db/schema.js';
import { ConfigError, RunNotResumableError, SchedflowError } from '../errors.js';
import { assertNever } from '../lib/assert-never.js';
import { systemClock } from '../lib/clock.js';
import { addSteps, queueSteps, type RunEngineDeps } from './run-engine.js';
import type { RunPlan } from './run-plan.js';
import { transitionRun } from './run-transition.js';
import { latestAttempts } from './step-dependencies.js';

/**
 * Resuming a run that failed or was cancelled: a new attempt of the same run. Its steps that
 * completed keep their jobs and results; every other step (failed, cancelled, timed out, lost
 * with its node, never run because a step it needs failed) is made again as a new step request
 * of the run's new attempt (a step using other steps' outputs, and those behind it, once those
 * outputs are known: src/pipelines/deferred-steps.ts; one never made before is made then too, not
 * counted as pruned). The kept steps are ended and `completed`, so the submitter decides
 * a dependency on them as met (src/pipelines/step-dependencies.ts) and sends Slurm none: their
 * jobs may be gone from the controller. Only the steps made again depend on each other natively.
 *
 * What it decides:
 * - parameters: the run's own; an override re-renders the steps made again from the pipeline
 *   file as loaded now (the kept steps stay as they ran), and the run keeps the merged values;
 * - deadlines: the run's `start_by`/`finish_by` and its steps' are moved by the time between the
 *   run's base (its tick, or when it was made) and the resume, so the new attempt has the windows
 *   the first had, rather than ending at once past a deadline of its first try;
 * - overlap: a resume is asked for by a person, as a triggered run is, so it starts whatever else
 *   of the pipeline is active; once running it is an active run like any other, and the
 *   schedule's next tick applies its overlap policy to it (skip, queue behind it, or allow). The
 *   pipeline's runs are locked for the decision, as a tick's is, so a tick and a resume at the
 *   same moment are decided one after the other;
 * - two resumes at once (two hosts, two clicks): the run is locked and moved from the state read
 *   (failed or cancelled) to `running` by a conditional update: one wins, the other is refused;
 * - retention prunes only the steps of ended runs: once resumed the run is active and its kept
 *   steps stay; a run whose steps were pruned already is refused (their results are gone);
 * - its end: the run ends as any other (its webhook once more, at the new end, with its attempt);
 *   a run has one summary, so a summary made of its first end is not made again.
 */

/** Who resumes a run, and with which parameters changed. */
export interface RunResumeBy {
  source: 'api' | 'cli' | 'ui';
  /** In words, for the run's log (`API token "ci"`, `web UI (alice)`). */
  who: string;
  /** Parameters to change for the steps made again; absent or empty: the run's own. */
  params?: Record<string, string>;
  /** Who asked, for the audit log (absent: not written). */
  audit?: AuditContext;
}

export type RunResumeOutcome =
  | { kind: 'not_found' }
  /** Resumed: the run as it is now (running, one attempt more), the steps kept and those made again. */
  | {
      kind: 'resumed';
      run: PipelineRunRow;
      kept: string[];
      /** The steps made again now, each a new request. */
      again: { step: string; requestId: string }[];
      /** The steps to run again that use other steps' outputs (and those behind them): made once those are known. */
      later: string[];
    };

/**
 * Re-renders a run's steps with other parameters, from its pipeline as loaded now (the pipeline
 * registry's); throws ConfigError for an unknown pipeline or parameter.
 */
export type Replan = (tx: History, run: PipelineRunRow, params: Record<string, string>) => Promise<RunPlan>;

/** Resumes the run `runId` (see the module's comment). Throws RunNotResumableError or ConfigError when it cannot. */
export async function resumeRun(
  deps: RunEngineDeps,
  runId: string,
  by: RunResumeBy,
  replan?: Replan,
): Promise<RunResumeOutcome> {
  const { store, logger } = deps;
  const now = (deps.clock ?? systemClock).now();
  const audit = by.audit;
  const refuse = async (owner: string | null, error: SchedflowError) => {
    // A refusal changes nothing: its row is written alone.
    if (audit) {
      await appendAudit(
        store,
        auditEntryOf(audit, {
          at: now,
          owner,
          action: 'run.resume',
          target: `run:${runId}`,
          outcome: 'refused',
          detail: error.message,
        }),
      );
    }
    throw error;
  };
  const seen = await getRun(store, runId);
  if (!seen) {
    if (audit) {
      await appendAudit(
        store,
        auditEntryOf(audit, {
          at: now,
          owner: null,
          action: 'run.resume',
          target: `run:${runId}`,
          outcome: 'refused',
          detail: 'no such run',
        }),
      );
    }
    return { kind: 'not_found' };
  }
  const overrides = by.params ?? {};
  let doorRefusal: Error | null = null;
  let result: {
    run: PipelineRunRow;
    kept: string[];
    again: { step: string; requestId: string }[];
    later: string[];
  };
  try {
    result = await store.transaction(async (tx) => {
      // The pipeline's runs first, as a tick's overlap decision takes them, then the run itself.
      await lockPipelineRuns(tx, seen.pipeline, now);
      const run = await lockedRun(tx, runId);
      if (!run) throw new RunNotResumableError(`pipeline run ${runId} is gone from the history`, seen.state);
      const refusal = notResumable(run);
      if (refusal) throw new RunNotResumableError(refusal, run.state);
      // A resume starts a new end; this one's followers (other pipelines' `on:`) must have their
      // runs first, or they never would (the caller follows it just before: pipeline-registry.ts).
      if (run.downstreamCheckedAt === null) {
        throw new RunNotResumableError(
          `pipeline run ${runId} has just ended and the runs its end starts (other pipelines' on:) are still being made: try again in a few seconds`,
          run.state,
        );
      }
      const plan = run.definition as RunPlan;
      const latest = latestAttempts(await stepRequests(tx, run.id));
      // A step waiting on other steps' outputs may never have been made (the run ended first):
      // it is not missing, it is made by the run engine once those outputs are known.
      const missing = plan.steps.filter((s) => !latest.has(s.step) && !s.deferred).map((s) => s.step);
      if (missing.length) {
        throw new RunNotResumableError(
          `pipeline run ${runId} cannot be resumed: the history no longer holds its step${missing.length > 1 ? 's' : ''} ${missing.join(', ')} (pruned by retention); trigger a new run`,
          run.state,
        );
      }
      const kept = plan.steps.filter((s) => latest.get(s.step)?.state === 'completed');
      const again = plan.steps.filter((s) => latest.get(s.step)?.state !== 'completed');
      const params = { ...run.params, ...overrides };
      const rendered = Object.keys(overrides).length ? await rerendered(tx, run, plan, params, replan) : plan;
      const shiftMs = now - (run.scheduledFor ?? run.createdAt);
      const keptNames = new Set(kept.map((s) => s.step));
      const steps = rendered.steps.map((s) => {
        if (keptNames.has(s.step)) return plan.steps.find((p) => p.step === s.step) ?? s;
        return { ...s, deadlines: shifted(s.deadlines, shiftMs) };
      });
      const definition: RunPlan = { ...rendered, steps, deadlines: shifted(plan.deadlines, shiftMs) };
      const attempt = run.attempt + 1;
      const againNames = again.map((s) => s.step);
      const moved = await transitionRun(tx, run.id, {
        from: run.state,
        to: 'running',
        at: now,
        source: by.source,
        detail: `resumed by ${by.who} (attempt ${attempt}): ${againNames.join(', ')} again${kept.length ? `; kept ${[...keptNames].join(', ')}` : ''}`,
        patch: {
          attempt,
          params,
          definition,
          detail: null,
          endedAt: null,
          cancelRequestedAt: null,
          cancelledBy: null,
          // Taken up again at its new end; a summary made of the first end stays the run's one.
          summaryCheckedAt: null,
          // Its next end is followed too (other pipelines' on:), as an end of this attempt.
          downstreamCheckedAt: null,
        },
      });
      // Locked above and resumable: only a bug leaves it unmoved; said as the refusal it would be.
      if (!moved) throw new RunNotResumableError(`pipeline run ${runId} was resumed or changed meanwhile`, run.state);
      // A step using other steps' outputs is not made here: its spec is a stand-in until they are
      // known. The run engine makes it (and the steps behind it) once they are, as the next attempt
      // of the step (src/pipelines/run-engine.ts, a request of an earlier run attempt that did not
      // complete counting as not made).
      const made = definition.steps.filter((s) => !keptNames.has(s.step) && !s.deferred);
      // The door, as for a run asked for by someone (src/pipelines/run-engine.ts createRun): the
      // profile's token or the accounts may have changed since the run was made.
      const refused =
        deps.refusal?.(
          definition.profile,
          made.map((s) => s.spec),
        ) ?? null;
      if (refused) {
        doorRefusal = refused;
        throw refused;
      }
      const later = definition.steps.filter((s) => !keptNames.has(s.step) && s.deferred).map((s) => s.step);
      // Each step made again as the next attempt of that step: the newest attempt is the step's.
      const ids: string[] = [];
      for (const s of made) {
        const prior = latest.get(s.step) as JobRequestRow;
        ids.push(...(await addSteps(tx, moved, [s], now, prior.attempt + 1)));
      }
      if (audit) {
        await appendAudit(
          tx,
          auditEntryOf(audit, {
            at: now,
            owner: run.owner,
            action: 'run.resume',
            target: `run:${runId}`,
            outcome: 'ok',
            detail: `attempt ${attempt}: ${againNames.join(', ')} again${Object.keys(overrides).length ? ` with ${Object.keys(overrides).join(', ')} changed` : ''}`,
          }),
        );
      }
      return {
        run: moved,
        kept: [...keptNames],
        again: made.map((s, i) => ({ step: s.step, requestId: ids[i] as string })),
        later,
      };
    });
  } catch (error) {
    if (error instanceof RunNotResumableError || error instanceof ConfigError) return refuse(seen.owner, error);
    if (error instanceof SchedflowError && error === doorRefusal) return refuse(seen.owner, error);
    throw error;
  }
  await queueSteps(deps, runId);
  logger.info(
    { runId, pipeline: result.run.pipeline, attempt: result.run.attempt, again: result.again.length },
    'pipeline run resumed',
  );
  return { kind: 'resumed', ...result };
}

/** Why the run cannot be resumed, in words; null when it can. */
function notResumable(run: PipelineRunRow): string | null {
  const state: RunState = run.state;
  switch (state) {
    case 'failed':
    case 'cancelled':
      return null;
    case 'queued':
    case 'running':
      return `pipeline run ${run.id} is still ${state}${run.attempt > 1 ? ` (attempt ${run.attempt})` : ''}: only a run that failed or was cancelled can be resumed`;
    case 'succeeded':
      return `pipeline run ${run.id} succeeded: nothing to resume (trigger a new run to run it again)`;
    case 'skipped':
      return `pipeline run ${run.id} was skipped: none of its steps ran, so there is nothing to resume (trigger a new run)`;
    default:
      return assertNever(state);
  }
}

/** The run's plan rendered again with `params`; its steps must be the run's. */
async function rerendered(
  tx: History,
  run: PipelineRunRow,
  plan: RunPlan,
  params: Record<string, string>,
  replan?: Replan,
): Promise<RunPlan> {
  if (!replan) throw new ConfigError(`pipeline "${run.pipeline}" is not loaded: its parameters cannot be changed`);
  const fresh = await replan(tx, run, params);
  const names = (p: RunPlan) =>
    p.steps
      .map((s) => s.step)
      .sort()
      .join(',');
  if (names(fresh) !== names(plan)) {
    throw new ConfigError(
      `the steps of pipeline "${run.pipeline}" have changed since run ${run.id} was made: resume it without --param, or trigger a new run`,
    );
  }
  return fresh;
}

/** Absolute deadlines moved by `shiftMs`; `max_pending` is a duration and stays. */
function shifted(deadlines: Deadlines | null, shiftMs: number): Deadlines | null {
  if (!deadlines) return null;
  const out: Deadlines = { ...deadlines };
  if (out.startBy !== undefined) out.startBy += shiftMs;
  if (out.finishBy !== undefined) out.finishBy += shiftMs;
  return out;
}
