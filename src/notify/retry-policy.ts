import { backoffDelayMs } from '../lib/retry-policy.js';

/**
 * When a failed webhook attempt is tried again: the shared backoff (src/lib/retry-policy.ts)
 * with half jitter (50–100 % of the step, so receivers coming back after an outage are not
 * hit by every delivery at once), never sooner than the receiver's Retry-After, within reason.
 */

/** Name of the BullMQ backoff type that uses this policy (the notify worker registers it). */
export const WEBHOOK_BACKOFF_TYPE = 'webhook';
/** A Retry-After beyond this is taken as this: a receiver cannot park a delivery for days. */
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
