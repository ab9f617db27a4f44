/**
 * The one retry policy of schedflow's upstream clients (the scheduler, the LLM endpoint,
 * webhook receivers): which answers are worth another attempt, how long to wait before it,
 * and how to read the upstream's Retry-After.
 */

/**
 * Whether an upstream's HTTP status may pass on its own: 408 (it timed the request out),
 * 429 (rate limited) and any 5xx. Every other 4xx is the request's fault and fatal; a
 * client may still know better from the body (Slurm's errors[] in a 500 is a refusal).
 */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/**
 * The one list of Node's errno codes that mean "no connection, or it was lost": an outage
 * worth another attempt, not a fault of the request. The scheduler client, the LLM client and
 * the Redis watch read it; the webhook sender retries every network failure, so needs no list.
 * Why each is here:
 */
const NETWORK_ERROR_CODES: ReadonlyMap<string, string> = new Map([
  ['ECONNREFUSED', 'nothing listens at the address (the service is down or restarting)'],
  ['ECONNRESET', 'the peer closed the connection mid-exchange (a restart, a proxy dropping it)'],
  ['EPIPE', 'written to a connection the peer had already closed'],
  ['ETIMEDOUT', 'the operating system gave up connecting or waiting for an acknowledgement'],
  ['EHOSTUNREACH', 'no route to the host (it is down, or a VPN is not connected)'],
  ['ENETUNREACH', 'no route to its network (the VPN or the interface is down)'],
  ['ENOTFOUND', 'the name does not resolve now: DNS down or a name served only on the VPN'],
  ['EAI_AGAIN', 'the resolver failed for the moment (a DNS time-out)'],
  ['ENOTCONN', 'a socket used after it was disconnected (ioredis while Redis restarts)'],
  ['ENOENT', 'a unix socket that is not there yet (the private redis-server restarting)'],
]);

/** True when an errno `code` is one of the list above: a network outage, retried like a 5xx. */
export function isNetworkErrorCode(code: string | undefined): boolean {
  return code !== undefined && NETWORK_ERROR_CODES.has(code);
}

export interface BackoffOptions {
  /** The first retry's step; each later one doubles it. */
  baseDelayMs: number;
  /** The step stops growing here. */
  maxDelayMs: number;
  /**
   * `full`: anywhere between 0 and the step (in-process retries of one client, spread
   * widest); `half`: between half the step and all of it (queued retries, which should
   * not come back at once). @defaultValue 'full'
   */
  jitter?: 'full' | 'half';
  /** A Retry-After beyond this is taken as this: an upstream cannot park work for days. */
  maxRetryAfterMs?: number;
}

/**
 * Exponential backoff with jitter, so many clients retrying after one outage spread out,
 * never sooner than the upstream's Retry-After (bounded by `maxRetryAfterMs`).
 * `retry` counts from 0 for the first retry.
 */
export function backoffDelayMs(
  retry: number,
  options: BackoffOptions,
  retryAfterMs: number | null = null,
  random: () => number = Math.random,
): number {
  const step = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** Math.max(0, retry));
  const jittered = options.jitter === 'half' ? Math.round(step * (0.5 + random() * 0.5)) : Math.floor(random() * step);
  if (retryAfterMs === null) return jittered;
  return Math.max(jittered, Math.min(retryAfterMs, options.maxRetryAfterMs ?? Number.POSITIVE_INFINITY));
}

/**
 * Reads Retry-After: delay seconds or an HTTP date (RFC 9110 §10.2.3); null when absent or
 * unreadable. Node gives a repeated header as an array: the first one counts.
 */
export function parseRetryAfterMs(value: string | readonly string[] | undefined, nowMs = Date.now()): number | null {
  const text = (typeof value === 'string' ? value : value?.[0])?.trim();
  if (!text) return null;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}
