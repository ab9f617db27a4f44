import { SchedflowApiError, SchedflowNetworkError, SchedflowTimeoutError } from './client-errors.js';
import { isRetryableStatus } from './retry.js';
import { sleep } from './sleep.js';

export interface WaitOptions<T> {
  /** Give up after this long: a `SchedflowTimeoutError` carrying the last state read. Default: no bound. */
  timeoutMs?: number;
  /** Stops the wait (not the job): its reason is thrown. */
  signal?: AbortSignal;
  /** Called with what was read each time the state changes, the first read included. */
  onUpdate?: (value: T) => void;
  /** The first wait between reads (default 500 ms); it grows by half at each read that finds no change. */
  intervalMs?: number;
  /** The longest wait between reads (default 5 s). */
  maxIntervalMs?: number;
}

/**
 * Reads until `ended` says so. The API has no stream of a job's changes, so this polls, its
 * interval growing while nothing changes (a long job costs few reads) and back to the first
 * once something did (a state change is often followed by another). A read that fails for a
 * while (no answer, 429, 503, its own retries spent) does not end the wait: the job goes on
 * meanwhile, so it reads again until `timeoutMs` or the signal; any other error is thrown.
 */
export async function pollUntil<T extends { state: string }>(
  what: string,
  read: (signal: AbortSignal | undefined) => Promise<T>,
  ended: (value: T) => boolean,
  options: WaitOptions<T> = {},
): Promise<T> {
  const first = options.intervalMs ?? 500;
  const longest = Math.max(first, options.maxIntervalMs ?? 5_000);
  const timeout = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs);
  const signals = [options.signal, timeout].filter((s): s is AbortSignal => s !== undefined);
  const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
  let last: T | null = null;
  let interval = first;
  try {
    for (;;) {
      let value: T;
      try {
        value = await read(signal);
      } catch (error) {
        if (!passes(error)) throw error;
        const asked = error instanceof SchedflowApiError ? (error.retryAfterMs ?? 0) : 0;
        interval = Math.min(longest, interval * 1.5);
        await sleep(Math.max(interval, asked), signal);
        continue;
      }
      if (value.state !== last?.state) {
        options.onUpdate?.(value);
        interval = first;
      } else {
        interval = Math.min(longest, interval * 1.5);
      }
      last = value;
      if (ended(value)) return value;
      await sleep(interval, signal);
    }
  } catch (error) {
    // The caller's abort is the caller's; the time running out is this wait's own error.
    if (options.signal?.aborted) throw options.signal.reason;
    if (timeout?.aborted && options.timeoutMs !== undefined) {
      throw new SchedflowTimeoutError(what, options.timeoutMs, last);
    }
    throw error;
  }
}

/** A read's failure that says "not now": the daemon unreachable, or busy (429, 503). */
function passes(error: unknown): boolean {
  return (
    error instanceof SchedflowNetworkError || (error instanceof SchedflowApiError && isRetryableStatus(error.status))
  );
}
