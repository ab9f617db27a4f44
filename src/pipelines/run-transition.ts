import type { History } from '../db/history.js';
import { insertRun, insertRunTransition, type NewRunRow, type RunPatch, updateRunFrom } from '../db/runs.js';
import { type PipelineRunRow, type RunState, type RunTransitionSource, TERMINAL_RUN_STATES } from '../db/schema.js';

/**
 * The one way a run changes state, as src/requests/transition.ts is a request's: the move
 * checked against the runs' state machine, written only from the state the caller decided on
 * (the guard is in the UPDATE's WHERE), and a row in run_transitions, in one transaction.
 * src/db/runs.ts holds the plain queries it is made of.
 */

const TERMINAL: ReadonlySet<RunState> = new Set(TERMINAL_RUN_STATES);

export const isTerminalRun = (state: RunState): boolean => TERMINAL.has(state);

/** The states a run is made in: started, queued behind an active run (overlap: queue), or only recorded. */
const INITIAL: ReadonlySet<RunState> = new Set(['queued', 'running', 'skipped']);

/**
 * Where a run may go from each state: forward only, except that a failed or cancelled run may be
 * resumed (a new attempt of it, src/pipelines/run-resume.ts); a succeeded or skipped one is over.
 */
const MOVES: Record<RunState, readonly RunState[]> = {
  queued: ['running', 'cancelled'],
  running: ['succeeded', 'failed', 'cancelled'],
  succeeded: [],
  failed: ['running'],
  cancelled: ['running'],
  skipped: [],
};

export function canMoveRun(from: RunState, to: RunState): boolean {
  return MOVES[from].includes(to);
}

export interface RunTransitionInput {
  /** The state the caller read and decided from: another process or host may have moved the run since. */
  from: RunState;
  to: RunState;
  /** When the move is recorded (the run's `updated_at`, the log row's `at`). */
  at: number;
  source: RunTransitionSource;
  /** Why, in words, for the log row (the run's own `detail` column is set through `patch`). */
  detail?: string | null;
  /** Other columns written with the move (its end time, its detail). */
  patch?: Omit<RunPatch, 'state' | 'updatedAt'>;
}

/**
 * Moves a run from `from` to `to` and logs the move, in one transaction. Null, and nothing
 * written, when the run is no longer in `from` (another writer moved it first: of two enders, one
 * ends it). A move the state machine does not allow is a bug of the caller's, and throws.
 */
export async function transitionRun(
  h: History,
  runId: string,
  input: RunTransitionInput,
): Promise<PipelineRunRow | null> {
  if (!canMoveRun(input.from, input.to)) {
    throw new Error(`pipeline run ${runId}: no move from ${input.from} to ${input.to}`);
  }
  return h.transaction(async (tx) => {
    const moved = await updateRunFrom(tx, runId, input.from, { ...input.patch, state: input.to, updatedAt: input.at });
    if (!moved) return null;
    await insertRunTransition(tx, {
      runId,
      fromState: input.from,
      toState: input.to,
      at: input.at,
      source: input.source,
      detail: input.detail ?? null,
    });
    return moved;
  });
}

/**
 * Records a new run and the first row of its log (from no state), in one transaction. Undefined
 * when its tick has a run already (see insertRun).
 */
export async function recordRun(
  h: History,
  run: NewRunRow,
  source: RunTransitionSource,
): Promise<PipelineRunRow | undefined> {
  if (!INITIAL.has(run.state)) throw new Error(`pipeline run ${run.id}: not made in state ${run.state}`);
  return h.transaction(async (tx) => {
    const row = await insertRun(tx, run);
    if (!row) return undefined;
    await insertRunTransition(tx, {
      runId: row.id,
      fromState: null,
      toState: row.state,
      at: row.createdAt,
      source,
      detail: row.detail,
    });
    return row;
  });
}
