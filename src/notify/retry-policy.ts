import { backoffDelayMs } from '../lib/retry-policy.js';

/**
 * When a failed webhook attempt is tried again: the shared backoff (src/lib/retry-policy.ts)
 * with half jitter (50–100 % of the step, so receivers coming back after an outage are not
 * hit by every delivery at once), never sooner than the receiver's Retry-After, within reason.
 * The queue's `webhook` backoff type (src/queue/backoffs.ts) uses it.
 */

/**
 * A Retry-After beyond this is taken as this: a receiver (or the LLM endpoint, whose summary
 * backoff bounds it the same) cannot park work for days.
 */
export const MAX_RETRY_AFTER_MS = 10 * 60_000;
/** The exponential step stops growing here (matters only with many attempts). */
export const MAX_BACKOFF_MS = 60 * 60_000;

/** Delay before the next attempt, after `attemptsMade` failed ones (1 after the first). */
export function webhookRetryDelayMs(
  attemptsMade: number,
  baseDelayMs: number,
  retryAfterMs: number | null = null,
  random: () => number = Math.random,
): number {
  return backoffDelayMs(
    attemptsMade - 1,
    { baseDelayMs, maxDelayMs: MAX_BACKOFF_MS, jitter: 'half', maxRetryAfterMs: MAX_RETRY_AFTER_MS },
    retryAfterMs,
    random,
  );
}
