import { type BackoffStrategy, DelayedError, type Job, UnrecoverableError } from 'bullmq';
import type { History } from '../src/db/history.js';
import { SchedflowError } from '../src/errors.js';
import { assertNever } from '../src/lib/assert-never.js';
import { backoffDelayMs } from '../src/lib/retry-policy.js';
import { LlmRateLimitedError } from '../src/llm/llm-errors.js';
import type { Logger } from '../src/logger.js';
import {
  APPLY_SUGGESTION_JOB,
  applySuggestionPayloadSchema,
  SUMMARY_BACKOFF_TYPE,
  SUMMARY_DISPATCH_JOB,
  summarizePayloadSchema,
} from '../src/queue/catalog.js';
import type { AcceptDeps } from '../src/requests/accept.js';
import { resubmitWithSuggestion } from '../src/summaries/resubmit.js';
import type { Summarizer } from '../src/summaries/summarizer.js';
import type { SummaryDispatcher } from '../src/summaries/summary-dispatcher.js';

export interface SummarizeWorkerDeps {
  store: History;
  summarizer: Summarizer;
  dispatcher: SummaryDispatcher;
  logger: Logger;
  /** Where re-submitted requests are accepted (src/requests/accept.ts). */
  requests: AcceptDeps;
  /** Aborted when shutdown's grace period is over: a running LLM call stops and is handed back. */
  shutdown: AbortSignal;
}

/** A summary cut short by shutdown is picked up again this soon. */
const HANDED_BACK_DELAY_MS = 1000;
/** The longest Retry-After honoured; a longer one is read as this. */
const MAX_RETRY_AFTER_MS = 10 * 60_000;

/**
 * The `summarize` queue: `dispatch` (the tick) takes up ended requests and
 * runs and queues their summaries; `summarize` writes one summary (one LLM
 * attempt); `apply-suggestion` re-submits a request with its summary's change.
 */
export function summarizeProcessor(deps: SummarizeWorkerDeps) {
  return async (job: Job, token?: string): Promise<unknown> => {
    if (job.name === SUMMARY_DISPATCH_JOB) return deps.dispatcher.dispatch();
    if (job.name === APPLY_SUGGESTION_JOB) return applySuggestionJob(deps, job);
    const { summaryId } = summarizePayloadSchema.parse(job.data);
    // attemptsMade counts the attempts that failed before this one.
    const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    const result = await deps.summarizer.run(summaryId, { finalAttempt, signal: deps.shutdown });
    switch (result.outcome) {
      case 'done':
        return { kind: result.kind, state: result.state };
      case 'skipped':
        return { skipped: result.why };
      case 'retry':
        // Thrown as it is: the backoff strategy reads the endpoint's Retry-After from it.
        throw result.error;
      case 'interrupted':
        await job.moveToDelayed(Date.now() + HANDED_BACK_DELAY_MS, token);
        throw new DelayedError();
      default:
        return assertNever(result);
    }
  };
}

async function applySuggestionJob(deps: SummarizeWorkerDeps, job: Job): Promise<unknown> {
  const payload = applySuggestionPayloadSchema.parse(job.data);
  let result: { requestId: string; created: boolean };
  try {
    // Asked for by the CLI (`jobs resubmit --apply-suggestion`), queued by this worker: the
    // transitions say so, as a CLI submission's say `accepted (cli)`, `queued (submit)`.
    // Queued also when an earlier attempt recorded the request but died before queueing it.
    result = await resubmitWithSuggestion(deps.requests, { ...payload, origin: 'cli', queuedBy: 'summarize' });
  } catch (error) {
    // Nothing to apply (no request, no suggestion, a pipeline step): trying again cannot help.
    // A summary still being written is retryable: the queue's next attempt may find it ready.
    if (error instanceof SchedflowError && !error.retryable) throw new UnrecoverableError(error.message);
    throw error;
  }
  deps.logger.info(
    { requestId: payload.requestId, newRequestId: result.requestId, created: result.created },
    'suggested change applied: request re-submitted',
  );
  return result;
}

/**
 * The `summary` backoff type: exponential from the job's `backoff.delay` with
 * full jitter, never sooner than the LLM's Retry-After (bounded).
 */
export const summaryBackoffStrategy: BackoffStrategy = (attemptsMade, type, error, job) => {
  if (type !== SUMMARY_BACKOFF_TYPE) throw new Error(`unknown backoff type "${type}"`);
  const backoff = job?.opts.backoff;
  const baseDelayMs = typeof backoff === 'object' && backoff.delay !== undefined ? backoff.delay : 10_000;
  const retryAfterMs = error instanceof LlmRateLimitedError ? error.retryAfterMs : null;
  // attemptsMade is 1 after the first failure: the first retry waits up to baseDelayMs.
  return backoffDelayMs(
    attemptsMade - 1,
    { baseDelayMs, maxDelayMs: baseDelayMs * 64, maxRetryAfterMs: MAX_RETRY_AFTER_MS },
    retryAfterMs,
  );
};

/**
 * A summarize job BullMQ gave up on outside an attempt's record (stalled too
 * often, or it threw gathering facts) fails its summary, keeping the
 * template when it can be made. Called from the worker's `failed` event.
 */
export async function recordSummaryGivenUp(summarizer: Summarizer, logger: Logger, job: Job, error: Error) {
  if (job.name !== 'summarize') return;
  const finalAttempt = error instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? 1);
  if (!finalAttempt) return;
  const parsed = summarizePayloadSchema.safeParse(job.data);
  if (!parsed.success) return;
  if (await summarizer.giveUp(parsed.data.summaryId, `the queue gave up: ${error.message}`)) {
    logger.error({ summaryId: parsed.data.summaryId, err: error }, 'summary given up by the queue');
  }
}
