import type { History } from '../db/history.js';
import type { JobRequestRow, PipelineRunRow } from '../db/schema.js';
import { endedRequestsToCheck, endedRunsToCheck, takeUp } from '../db/summaries.js';
import type { RunPlan } from '../pipelines/run-plan.js';

/**
 * Whether an ended request wants a summary of its own: its own setting, else
 * the global one. A pipeline step's is its run's one summary across the
 * steps (the `summarize` of the pipeline and its steps decides that one). Of a request retried
 * by its policy, only the last attempt is summarized.
 */
export function requestWantsSummary(
  row: Pick<JobRequestRow, 'summarize' | 'runId'> & Partial<Pick<JobRequestRow, 'nextAttemptId'>>,
  enabled: boolean,
): boolean {
  // An attempt its retry policy followed with another: the request's summary is its last attempt's.
  if (row.nextAttemptId) return false;
  if (row.summarize !== null) return row.summarize;
  return row.runId ? false : enabled;
}

/**
 * Whether an ended run wants its one summary: a step (or the pipeline) asked
 * for it, or the global setting is on and the pipeline did not turn it off.
 * A skipped run never ran anything and gets none.
 */
export function runWantsSummary(run: PipelineRunRow, enabled: boolean): boolean {
  if (run.state === 'skipped') return false;
  const steps = (run.definition as RunPlan).steps;
  if (steps.some((s) => s.summarize === true)) return true;
  if (steps.length > 0 && steps.every((s) => s.summarize === false)) return false;
  return enabled;
}

/**
 * The first half of the summarize queue's dispatch tick: takes up ended requests and runs (one
 * indexed query each when nothing ended) and makes their summaries, pending. `transition()`
 * knows nothing of summaries: this scan is how they start. The second half, the relay of pending
 * summaries to the queue, is the queue's (workers/summarize.ts).
 */
export class SummaryTakeUp {
  constructor(
    private readonly deps: {
      store: History;
      /** The global setting: summarize what asks for nothing itself. */
      enabled: boolean;
    },
  ) {}

  /** How many summaries were made. */
  async run(now = Date.now()): Promise<number> {
    const { store, enabled } = this.deps;
    const requests = await endedRequestsToCheck(store);
    const runs = await endedRunsToCheck(store);
    if (!requests.length && !runs.length) return 0;
    return (
      await takeUp(store, {
        requests: requests.map((r) => ({ id: r.id, wanted: requestWantsSummary(r, enabled) })),
        runs: runs.map((r) => ({ id: r.id, wanted: runWantsSummary(r, enabled) })),
        at: now,
      })
    ).length;
  }
}
