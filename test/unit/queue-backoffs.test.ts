import type { MinimalJob } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { MAX_RETRY_AFTER_MS } from '../../src/notify/retry-policy.js';
import { WebhookRetryableError } from '../../src/notify/sender.js';
import { BACKOFFS, backoffStrategy } from '../../src/queue/backoffs.js';

/** The queues' backoff strategies by name: each takes its first step from the job's queue options, and nowhere else. */

const jobWith = (type: string, delay?: number) => ({ opts: { backoff: { type, delay } } }) as unknown as MinimalJob;

describe('backoff strategies by name', () => {
  it('webhook: half jitter from the delay of the queue options, never sooner than a bounded Retry-After', () => {
    const step = 3000;
    for (let i = 0; i < 50; i++) {
      const first = backoffStrategy(1, BACKOFFS.webhook, new Error('x'), jobWith(BACKOFFS.webhook, step)) as number;
      expect(first).toBeGreaterThanOrEqual(step / 2);
      expect(first).toBeLessThanOrEqual(step);
    }
    const parked = new WebhookRetryableError(
      'busy',
      { status: 503, message: null, request: 'POST https://receiver' },
      { retryAfterMs: 24 * 3600_000 },
    );
    expect(backoffStrategy(1, BACKOFFS.webhook, parked, jobWith(BACKOFFS.webhook, step))).toBe(MAX_RETRY_AFTER_MS);
  });

  it('summary: full jitter up to the delay of the queue options at the first retry', () => {
    for (let i = 0; i < 50; i++) {
      const first = backoffStrategy(1, BACKOFFS.summary, new Error('x'), jobWith(BACKOFFS.summary, 500)) as number;
      expect(first).toBeGreaterThanOrEqual(0);
      expect(first).toBeLessThan(500);
    }
  });

  it('has no default delay of its own, and knows no other name', () => {
    expect(() => backoffStrategy(1, BACKOFFS.webhook, new Error('x'), jobWith(BACKOFFS.webhook))).toThrow(
      'a "webhook" backoff without a delay',
    );
    expect(() => backoffStrategy(1, 'linear', new Error('x'), jobWith('linear', 10))).toThrow(
      'unknown backoff type "linear"',
    );
  });
});
