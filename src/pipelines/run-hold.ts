import { type AuditContext, appendAudit, auditEntryOf } from '../db/audit.js';
import { activeRuns, getRun, type RunAccess, stepRequests } from '../db/runs.js';
import type { JobRequestRow, PipelineRunRow } from '../db/schema.js';
import { JobControlRefusedError, toError } from '../errors.js';
import { systemClock } from '../lib/clock.js';
import { type ControlBy, type ControlDeps, controlRequest } from '../requests/job-control.js';
import { isTerminalRequest } from '../requests/request-state.js';
import { isTerminalRun } from './run-transition.js';

/**
 * A run (or every active run of a pipeline) held or released as a whole: each of its steps
 * that is not running and has not ended, through the request's own hold (src/requests/
 * job-control.ts): a step submitted and pending is held in Slurm, one not submitted yet
 * (waiting for the steps it needs, say) is kept back until released. A running step is left
 * as it is and said so; so is one Slurm refuses (it started meanwhile). Each step's change has
 * its own timeline line and audit row; the run's action one more row.
 */

export type RunControlKind = 'hold' | 'release';

export interface StepControl {
  step: string;
  requestId: string;
  outcome: 'held' | 'released' | 'unchanged' | 'running' | 'submitting' | 'refused' | 'error';
  detail: string | null;
}

export type RunControlOutcome =
  | { kind: 'not_found' }
  | { kind: 'ended'; run: PipelineRunRow }
  | { kind: 'done'; run: PipelineRunRow; steps: StepControl[] };

export async function controlRun(
  deps: ControlDeps,
  runId: string,
  kind: RunControlKind,
  by: ControlBy,
  access: RunAccess | undefined,
): Promise<RunControlOutcome> {
  const run = await getRun(deps.store, runId, access);
  if (!run) return { kind: 'not_found' };
  if (isTerminalRun(run.state)) return { kind: 'ended', run };
  // Each step's own row says what happened to it; the run's says who asked.
  const steps = await controlSteps(deps, await stepRequests(deps.store, runId), kind, by);
  await auditRun(deps, by.audit, run, kind, steps);
  return { kind: 'done', run, steps };
}

/** Every active run of a pipeline (queued or running), held or released as {@link controlRun} does one. */
export async function controlPipelineRuns(
  deps: ControlDeps,
  pipeline: string,
  kind: RunControlKind,
  by: ControlBy,
): Promise<{ run: PipelineRunRow; steps: StepControl[] }[]> {
  const done: { run: PipelineRunRow; steps: StepControl[] }[] = [];
  for (const run of await activeRuns(deps.store, pipeline)) {
    const steps = await controlSteps(deps, await stepRequests(deps.store, run.id), kind, by);
    await auditRun(deps, by.audit, run, kind, steps);
    done.push({ run, steps });
  }
  return done;
}

async function controlSteps(
  deps: ControlDeps,
  rows: readonly JobRequestRow[],
  kind: RunControlKind,
  by: ControlBy,
): Promise<StepControl[]> {
  const steps: StepControl[] = [];
  for (const row of rows) {
    if (isTerminalRequest(row.state)) continue;
    const step = row.step ?? row.name;
    if (row.state === 'running') {
      steps.push({ step, requestId: row.id, outcome: 'running', detail: 'running: left as it is' });
      continue;
    }
    // A release touches what schedflow held only: a step held by hand in Slurm is someone's choice.
    if (kind === 'release' && row.heldAt === null) continue;
    try {
      const outcome = await controlOnceSubmitted(deps, row.id, kind, by);
      switch (outcome.kind) {
        case 'done':
          steps.push({
            step,
            requestId: row.id,
            outcome: kind === 'hold' ? 'held' : 'released',
            detail: outcome.message,
          });
          break;
        case 'unchanged':
          steps.push({ step, requestId: row.id, outcome: 'unchanged', detail: outcome.message });
          break;
        case 'submitting':
          steps.push({
            step,
            requestId: row.id,
            outcome: 'submitting',
            detail: 'being submitted right now: ask again',
          });
          break;
        case 'ended':
        case 'not_found':
          break;
      }
    } catch (error) {
      const refused = error instanceof JobControlRefusedError;
      steps.push({ step, requestId: row.id, outcome: refused ? 'refused' : 'error', detail: toError(error).message });
    }
  }
  return steps;
}

/**
 * How long a run's hold waits for a step being submitted right now: its submission ends in well
 * under a second, and a run held whole should not leave that one step to be asked again.
 */
const SUBMITTING_WAIT_MS = 10_000;
const SUBMITTING_LOOK_EVERY_MS = 250;

/** The step's hold or release; one being submitted is asked again once its submission has ended. */
async function controlOnceSubmitted(deps: ControlDeps, requestId: string, kind: RunControlKind, by: ControlBy) {
  const clock = deps.clock ?? systemClock;
  const giveUpAt = clock.now() + SUBMITTING_WAIT_MS;
  for (;;) {
    const outcome = await controlRequest(deps, requestId, { kind }, by);
    if (outcome.kind !== 'submitting' || clock.now() >= giveUpAt) return outcome;
    await clock.sleep(SUBMITTING_LOOK_EVERY_MS);
  }
}

async function auditRun(
  deps: ControlDeps,
  ctx: AuditContext | undefined,
  run: PipelineRunRow,
  kind: RunControlKind,
  steps: readonly StepControl[],
): Promise<void> {
  if (!ctx) return;
  const changed = steps.filter((s) => s.outcome === 'held' || s.outcome === 'released');
  try {
    await appendAudit(
      deps.store,
      auditEntryOf(ctx, {
        at: (deps.clock ?? systemClock).now(),
        owner: run.owner,
        action: `run.${kind}`,
        target: `run:${run.id}`,
        outcome: 'ok',
        detail: `${changed.length} step(s) ${kind === 'hold' ? 'held' : 'released'}${changed.length ? `: ${changed.map((s) => s.step).join(', ')}` : ''}`,
      }),
    );
  } catch (error) {
    deps.logger.error({ runId: run.id, err: toError(error) }, 'audit row of a run hold not written');
  }
}
