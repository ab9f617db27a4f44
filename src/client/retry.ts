/**
 * When the client tries a call again, and how long it waits first. Only what the API says may
 * pass: 429 (a rate limit or a quota), 503 (not available now) and 409
 * `SCHEDFLOW_ERR_JOB_SUBMITTING` (the job is being submitted right now), after their
 * `Retry-After`; never another 4xx, which says the request itself is wrong and would be refused
 * again. A call
 * that got no answer is tried again only when doing it twice cannot do it twice: an idempotent
 * call (a read, a cancel, a hold) or one carrying an Idempotency-Key.
 */
export interface RetryPolicy {
  /** Tries of one call, the first included (default 4). 1: never retried. */
  maxAttempts: number;
  /**
   * The wait before the first retry when the answer gives no `Retry-After`, doubled at each
   * (default 500 ms), of which a random half to all is waited, so clients that failed together
   * do not come back together.
   */
  baseDelayMs: number;
  /**
   * The longest wait the client makes (default 60 s). A `Retry-After` beyond it is not waited
   * for: the error is thrown, its `retryAfterMs` saying when to come back.
   */
  maxDelayMs: number;
  /** Told before each wait: for logs and metrics. */
  onRetry?: (retry: RetryEvent) => void;
}

export interface RetryEvent {
  /** `GET /api/v1/jobs/…` */
  call: string;
  /** The attempt that failed, from 1. */
  attempt: number;
  /** The wait before the next. */
  delayMs: number;
  /** The answer's status; null when there was none (a network error). */
  status: number | null;
  /** The answer's `Retry-After`, in ms; null when none. */
  retryAfterMs: number | null;
}

// Frozen: a caller's `DEFAULT_RETRY.maxAttempts = 1` would otherwise change every client made after.
export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 4,
  baseDelayMs: 500,
  maxDelayMs: 60_000,
});

/** Statuses that say "not now" rather than "not this". */
const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([429, 503]);

export function isRetryableStatus(status: number): boolean {
  return RETRYABLE_STATUSES.has(status);
}

/**
 * An error answer that asks to come back later: 429, 503, and the one 409 that says "not now"
 * (docs/errors.md: the job is being submitted right now, cancel or hold it after Retry-After).
 * Every other 409 is the request's own conflict and is answered the same the next time.
 */
export function isRetryableAnswer(status: number, code: string | null): boolean {
  return isRetryableStatus(status) || (status === 409 && code === 'SCHEDFLOW_ERR_JOB_SUBMITTING');
}

/**
 * `Retry-After` in milliseconds: delay-seconds (`3`) or an HTTP date (`Wed, 21 Oct 2026
 * 07:28:00 GMT`, counted from `now`, never below 0); null when absent or unreadable (the
 * backoff is used then). Only those two forms: `Date.parse` alone reads `5, 3`, `1.5` or `-1` as
 * dates long past, which would mean "now".
 */
export function parseRetryAfter(header: string | null, now: number = Date.now()): number | null {
  if (header === null) return null;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // An HTTP date names its weekday first (IMF-fixdate, and the obsolete RFC 850 and asctime forms).
  if (!/^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? /.test(text)) return null;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now);
}

/**
 * The wait before retry number `attempt` (1 after the first try): what `Retry-After` asked, else
 * the base doubled at each attempt, of which a random half to all; null when what `Retry-After`
 * asked is beyond the policy's longest wait.
 */
export function retryDelayMs(
  policy: RetryPolicy,
  attempt: number,
  retryAfterMs: number | null,
  random: () => number = Math.random,
): number | null {
  const delay = retryAfterMs ?? Math.round(policy.baseDelayMs * 2 ** (attempt - 1) * (0.5 + random() / 2));
  if (retryAfterMs !== null && retryAfterMs > policy.maxDelayMs) return null;
  return Math.min(delay, policy.maxDelayMs);
}
