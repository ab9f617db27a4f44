import type { JobsOptions, Queue } from 'bullmq';
import type { History } from '../db/history.js';
import type { JobRequestRow, PipelineRunRow } from '../db/schema.js';
import { endedRequestsToCheck, endedRunsToCheck, pendingSummaryIds, takeUp } from '../db/summaries.js';
import type { Logger } from '../logger.js';
import type { RunPlan } from '../pipelines/run-plan.js';
import { SUMMARIZE_JOB, SUMMARY_BACKOFF_TYPE } from '../queue/catalog.js';

export interface SummaryDispatchSettings {
  /** The global setting: summarize what asks for nothing itself. */
  enabled: boolean;
  attempts: number;
  backoffMs: number;
  /** How often a summary already seen queued is looked up in the queue again. @defaultValue 60000 */
  recheckMs?: number;
}

export function summarizeJobOptions(summaryId: string, settings: SummaryDispatchSettings): JobsOptions {
  return {
    jobId: summaryId,
    attempts: settings.attempts,
    backoff: { type: SUMMARY_BACKOFF_TYPE, delay: settings.backoffMs },
  };
}

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
 * The dispatch tick: takes up ended requests and runs (one indexed query each
 * when nothing ended), makes their summaries, and queues pending summaries
 * without a live queue job (also after a crash). `transition()` knows nothing
 * of summaries: this scan is how they start.
 */
export class SummaryDispatcher {
  private readonly checkedAt = new Map<string, number>();

  constructor(
    private readonly deps: {
      store: History;
      queue: Queue;
      logger: Logger;
      settings: SummaryDispatchSettings;
      /** Settles a pending summary whose queue job failed for good. */
      giveUp(summaryId: string, reason: string): Promise<unknown>;
    },
  ) {}

  async dispatch(now = Date.now()): Promise<{ made: number; queued: number }> {
    const { store, queue, logger, settings } = this.deps;
    const requests = await endedRequestsToCheck(store);
    const runs = await endedRunsToCheck(store);
    let made = 0;
    if (requests.length || runs.length) {
      made = (
        await takeUp(store, {
          requests: requests.map((r) => ({ id: r.id, wanted: requestWantsSummary(r, settings.enabled) })),
          runs: runs.map((r) => ({ id: r.id, wanted: runWantsSummary(r, settings.enabled) })),
          at: now,
        })
      ).length;
    }

    const pending = await pendingSummaryIds(store);
    const pendingSet = new Set(pending);
    for (const id of this.checkedAt.keys()) if (!pendingSet.has(id)) this.checkedAt.delete(id);
    const recheckMs = settings.recheckMs ?? 60_000;
    let queued = 0;
    for (const id of pending) {
      const checked = this.checkedAt.get(id);
      if (checked !== undefined && now - checked < recheckMs) continue;
      const job = await queue.getJob(id);
      const state = job ? await job.getState() : 'missing';
      switch (state) {
        case 'failed':
          // The queue gave up and its `failed` handler did not settle the summary (the process
          // died in between): settle it as the handler would have.
          await this.deps.giveUp(id, `the queue gave up: ${job?.failedReason ?? 'unknown reason'}`);
          continue;
        case 'completed':
        case 'unknown':
        case 'missing':
          // No live job for a pending summary: a crash between the history and the queue, or a
          // job that completed without settling it: queue a fresh one.
          await job?.remove();
          await queue.add(SUMMARIZE_JOB, { summaryId: id }, summarizeJobOptions(id, settings));
          queued++;
          break;
        default:
          // waiting, delayed (a backoff), active, prioritized: on its way.
          break;
      }
      this.checkedAt.set(id, now);
    }
    if (made || queued) logger.debug({ made, queued }, 'summaries dispatched');
    return { made, queued };
  }
}
