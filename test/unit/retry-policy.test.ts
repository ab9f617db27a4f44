import { describe, expect, it } from 'vitest';
import {
  backoffDelayMs,
  isNetworkErrorCode,
  isRetryableStatus,
  parseRetryAfterMs,
} from '../../src/lib/retry-policy.js';
import { isConnectionError } from '../../src/redis/redis-watch.js';
import { errorForResponse } from '../../src/sched/response-errors.js';
import { RequestTimeoutError } from '../../src/sched/sched-errors.js';

describe('the retry policy', () => {
  it('retries 408, 429 and 5xx; every other 4xx (and a redirect) is fatal', () => {
    for (const status of [408, 429, 500, 502, 503, 504, 599]) expect(isRetryableStatus(status), `${status}`).toBe(true);
    for (const status of [301, 400, 401, 403, 404, 409, 413, 422])
      expect(isRetryableStatus(status), `${status}`).toBe(false);
  });

  it('the scheduler client follows it for 408, as the LLM and webhook clients do', () => {
    const e = errorForResponse({ status: 408, body: null, text: '', request: 'GET /slurm/v0.0.44/jobs' });
    expect(e).toBeInstanceOf(RequestTimeoutError);
    expect(e.retryable).toBe(true);
  });

  it('has one list of network error codes, read by the scheduler, the LLM and the Redis watch alike', () => {
    for (const code of [
      'ECONNREFUSED',
      'ECONNRESET',
      'EPIPE',
      'ETIMEDOUT',
      'EHOSTUNREACH',
      'ENETUNREACH',
      'ENOTFOUND',
    ]) {
      expect(isNetworkErrorCode(code), code).toBe(true);
      expect(isConnectionError(Object.assign(new Error('x'), { code })), code).toBe(true);
    }
    for (const code of [undefined, 'EACCES', 'ERR_INVALID_ARG_TYPE', 'UND_ERR_HEADERS_TIMEOUT']) {
      expect(isNetworkErrorCode(code), String(code)).toBe(false);
    }
  });

  it('reads Retry-After as seconds or an HTTP date, the first of a repeated header', () => {
    expect(parseRetryAfterMs('7')).toBe(7000);
    expect(parseRetryAfterMs(' 3 ')).toBe(3000);
    expect(parseRetryAfterMs(['2', '9'])).toBe(2000);
    expect(parseRetryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6_000);
    expect(parseRetryAfterMs(new Date(1_000).toUTCString(), 4_000)).toBe(0);
    expect(parseRetryAfterMs(undefined)).toBeNull();
    expect(parseRetryAfterMs('')).toBeNull();
    expect(parseRetryAfterMs('soon')).toBeNull();
  });

  it('half jitter keeps between half the step and all of it; Retry-After is a floor, bounded', () => {
    const options = { baseDelayMs: 1000, maxDelayMs: 8000, jitter: 'half' as const, maxRetryAfterMs: 60_000 };
    expect(backoffDelayMs(0, options, null, () => 0)).toBe(500);
    expect(backoffDelayMs(2, options, null, () => 1)).toBe(4000);
    expect(backoffDelayMs(10, options, null, () => 1)).toBe(8000);
    expect(backoffDelayMs(0, options, 30_000, () => 1)).toBe(30_000);
    expect(backoffDelayMs(0, options, 3_600_000, () => 1)).toBe(60_000);
  });
});
