/**
 * Exponential backoff with full jitter (a random delay between 0 and the
 * exponential cap), so many clients retrying after one outage spread out.
 * When the upstream sent Retry-After, never retry sooner than that.
 */
export interface BackoffOptions {
  /** @defaultValue 500 */
  baseDelayMs: number;
  /** @defaultValue 30000 */
  maxDelayMs: number;
}

export function backoffDelayMs(
  attempt: number,
  options: BackoffOptions,
  retryAfterMs: number | null = null,
  random: () => number = Math.random,
): number {
  const cap = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** attempt);
  const jittered = Math.floor(random() * cap);
  return retryAfterMs === null ? jittered : Math.max(retryAfterMs, jittered);
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
