import type { BackoffStrategy } from 'bullmq';
import { backoffDelayMs } from '../lib/retry-policy.js';
import { LlmRateLimitedError } from '../llm/llm-errors.js';
import { MAX_RETRY_AFTER_MS, webhookRetryDelayMs } from '../notify/retry-policy.js';
import { WebhookDeliveryError } from '../notify/sender.js';

/**
 * The backoff strategies of schedflow's queues, by name, from one table (as BullMQ looks its own
 * up): a job's `backoff.type` names one, its `backoff.delay` is the first step (from the queue's
 * definition, which takes it from the settings). Every worker is given the whole table.
 */
export const BACKOFFS = {
  /** Webhook deliveries: exponential with half jitter, never sooner than the receiver's Retry-After. */
  webhook: 'webhook',
  /** Summaries: exponential with full jitter up to 64 steps, never sooner than the LLM's Retry-After. */
  summary: 'summary',
} as const;

/** The step of a job's backoff: always set by its queue's default job options. */
function baseDelayOf(type: string, backoff: unknown): number {
  if (typeof backoff === 'object' && backoff !== null && 'delay' in backoff && typeof backoff.delay === 'number') {
    return backoff.delay;
  }
  throw new Error(`a "${type}" backoff without a delay`);
}

export const backoffStrategy: BackoffStrategy = (attemptsMade, type, error, job) => {
  switch (type) {
    case BACKOFFS.webhook: {
      const retryAfterMs = error instanceof WebhookDeliveryError ? error.retryAfterMs : null;
      return webhookRetryDelayMs(attemptsMade, baseDelayOf(type, job?.opts.backoff), retryAfterMs);
    }
    case BACKOFFS.summary: {
      const baseDelayMs = baseDelayOf(type, job?.opts.backoff);
      const retryAfterMs = error instanceof LlmRateLimitedError ? error.retryAfterMs : null;
      // attemptsMade is 1 after the first failure: the first retry waits up to baseDelayMs.
      return backoffDelayMs(
        attemptsMade - 1,
        { baseDelayMs, maxDelayMs: baseDelayMs * 64, maxRetryAfterMs: MAX_RETRY_AFTER_MS },
        retryAfterMs,
      );
    }
    default:
      throw new Error(`unknown backoff type "${type}"`);
  }
};
