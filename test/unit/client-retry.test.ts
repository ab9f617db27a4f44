import { describe, expect, it } from 'vitest';
import {
  DEFAULT_RETRY,
  parseRetryAfter,
  SchedflowApiError,
  SchedflowNetworkError,
  SchedflowTimeoutError,
  SchedflowUnexpectedAnswerError,
} from '../../src/client/index.js';
import { isRetryableAnswer, retryDelayMs } from '../../src/client/retry.js';

/** The client's retry arithmetic: what `Retry-After` it reads, how long it waits without one, what it retries. */

const NOW = Date.parse('2026-10-21T07:28:00Z');

describe('parseRetryAfter', () => {
  it('reads delay-seconds and an HTTP date naming its weekday', () => {
    expect(parseRetryAfter('5', NOW)).toBe(5000);
    expect(parseRetryAfter(' 0 ', NOW)).toBe(0);
    expect(parseRetryAfter('Wed, 21 Oct 2026 07:28:03 GMT', NOW)).toBe(3000);
    // RFC 850, obsolete but still an HTTP date.
    expect(parseRetryAfter('Wednesday, 21-Oct-26 07:28:04 GMT', NOW)).toBe(4000);
    // A date already past: now.
    expect(parseRetryAfter('Tue, 20 Oct 2026 07:28:00 GMT', NOW)).toBe(0);
    expect(parseRetryAfter(null, NOW)).toBeNull();
  });

  it('gives null for what Date.parse would read as a date long past (the backoff is used then)', () => {
    for (const header of ['5, 3', '1.5', '-1', '2026-10-21', 'soon', '', 'Wed']) {
      expect(parseRetryAfter(header, NOW), header).toBeNull();
    }
    expect(parseRetryAfter('Wed, 99 Nonsense', NOW)).toBeNull();
  });
});

describe('retryDelayMs', () => {
  const policy = { maxAttempts: 4, baseDelayMs: 400, maxDelayMs: 60_000 };

  it('waits a random half to all of the doubled base without a Retry-After', () => {
    expect(retryDelayMs(policy, 1, null, () => 0)).toBe(200);
    expect(retryDelayMs(policy, 1, null, () => 1)).toBe(400);
    expect(retryDelayMs(policy, 3, null, () => 0.5)).toBe(1200);
    const seen = new Set<number>();
    for (let i = 0; i < 50; i++) {
      const delay = retryDelayMs(policy, 2, null) ?? -1;
      expect(delay).toBeGreaterThanOrEqual(400);
      expect(delay).toBeLessThanOrEqual(800);
      seen.add(delay);
    }
    expect(seen.size).toBeGreaterThan(1);
  });

  it("waits what Retry-After asks, exactly, and not at all past the policy's longest wait", () => {
    expect(retryDelayMs(policy, 1, 2000)).toBe(2000);
    expect(retryDelayMs(policy, 1, 61_000)).toBeNull();
  });
});

describe('what is retried', () => {
  it('429, 503 and the 409 that says the job is being submitted; no other 4xx', () => {
    expect(isRetryableAnswer(429, 'SCHEDFLOW_ERR_RATE_LIMITED')).toBe(true);
    expect(isRetryableAnswer(503, null)).toBe(true);
    expect(isRetryableAnswer(409, 'SCHEDFLOW_ERR_JOB_SUBMITTING')).toBe(true);
    expect(isRetryableAnswer(409, 'SCHEDFLOW_ERR_JOB_ENDED')).toBe(false);
    expect(isRetryableAnswer(409, 'SCHEDFLOW_ERR_SUMMARY_PENDING')).toBe(false);
    expect(isRetryableAnswer(400, 'SCHEDFLOW_ERR_JOB_SUBMITTING')).toBe(false);
    expect(isRetryableAnswer(404, null)).toBe(false);
  });

  it('keeps DEFAULT_RETRY as it ships', () => {
    expect(Object.isFrozen(DEFAULT_RETRY)).toBe(true);
    expect(() => {
      (DEFAULT_RETRY as { maxAttempts: number }).maxAttempts = 1;
    }).toThrow(TypeError);
    expect(DEFAULT_RETRY.maxAttempts).toBe(4);
  });
});

describe('error names', () => {
  it('are literal, so a minified build keeps them', () => {
    const api = new SchedflowApiError({
      status: 409,
      detail: { code: 'SCHEDFLOW_ERR_JOB_ENDED', message: 'ended' },
      requestId: null,
      retryAfterMs: null,
      call: 'DELETE /api/v1/jobs/x',
      idempotencyKey: null,
    });
    expect(api.name).toBe('SchedflowApiError');
    expect(api.message).toBe('ended (SCHEDFLOW_ERR_JOB_ENDED, HTTP 409, DELETE /api/v1/jobs/x)');
    expect(new SchedflowNetworkError('GET /x', 1, null, { cause: new Error('x') }).name).toBe('SchedflowNetworkError');
    expect(new SchedflowTimeoutError('job', 1, null).name).toBe('SchedflowTimeoutError');
    expect(new SchedflowUnexpectedAnswerError(502, 'GET /x', '').name).toBe('SchedflowUnexpectedAnswerError');
    expect(String(api)).toMatch(/^SchedflowApiError: /);
  });
});
