import { describe, expect, it } from 'vitest';
import { backoffDelayMs, parseRetryAfterMs } from '../../src/lib/retry-policy.js';
import { freshnessOf } from '../../src/sched/freshness.js';
import { errorForResponse } from '../../src/sched/response-errors.js';
import {
  AuthenticationError,
  BadRequestError,
  ForbiddenError,
  JobNotFoundError,
  RateLimitedError,
  SlurmRefusedError,
  SubmitLimitError,
  UnsupportedVersionError,
  UpstreamUnavailableError,
} from '../../src/sched/sched-errors.js';

/** What each upstream answer means, and whether trying again can help. */

const failed = (status: number, body: unknown, extra: { retryAfter?: string; account?: string } = {}) =>
  errorForResponse({
    status,
    body,
    text: typeof body === 'string' ? body : JSON.stringify(body),
    request: 'POST /sched/v0.0.44/job/submit',
    ...extra,
  });

describe('errorForResponse', () => {
  it('400 naming the version: UnsupportedVersionError, fatal', () => {
    const e = failed(400, { error: 'unsupported version v0.0.40; supported: v0.0.42, v0.0.43, v0.0.44' });
    expect(e).toBeInstanceOf(UnsupportedVersionError);
    expect(e.retryable).toBe(false);
    expect(e.message).toMatch(/pin an API version/);
  });

  it('another 4xx (a 404 for a path plain slurmrestd lacks): BadRequestError, fatal', () => {
    const e = failed(404, 'Not Found');
    expect(e).toBeInstanceOf(BadRequestError);
    expect(e.retryable).toBe(false);
  });

  it('404 with Slurm error 2017: the job is unknown', () => {
    const e = failed(404, { errors: [{ error_number: 2017, error: 'Invalid job id specified' }] });
    expect(e).toBeInstanceOf(JobNotFoundError);
  });

  it('401: AuthenticationError, fatal, keeping the upstream message', () => {
    const e = failed(401, { error: 'token expired' });
    expect(e).toBeInstanceOf(AuthenticationError);
    expect(e.retryable).toBe(false);
    expect(e.message).toContain('token expired');
  });

  it('403 says whether a scope or the account restriction was hit, naming the account', () => {
    const scope = failed(403, { error: 'missing scope sched:jobs:manage' });
    expect(scope).toBeInstanceOf(ForbiddenError);
    expect((scope as ForbiddenError).reason).toBe('scope');
    const account = failed(403, { error: 'token may not act on account other' }, { account: 'lab' });
    expect((account as ForbiddenError).reason).toBe('account');
    expect(account.message).toMatch(/account "lab"/);
  });

  it('429: retryable, with Retry-After in seconds or as a date', () => {
    const e = failed(429, { error: 'rate limit exceeded' }, { retryAfter: '7' });
    expect(e).toBeInstanceOf(RateLimitedError);
    expect(e.retryable).toBe(true);
    expect((e as RateLimitedError).retryAfterMs).toBe(7000);
    expect(parseRetryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6_000);
    expect(parseRetryAfterMs('soon')).toBeNull();
  });

  it('500 with a Slurm error is a refusal (fatal, Slurm’s number and words); a bare 500 is an outage', () => {
    const refused = failed(500, {
      errors: [{ error_number: 2045, error: 'Invalid account or account/partition combination specified' }],
    });
    expect(refused).toBeInstanceOf(SlurmRefusedError);
    expect(refused.retryable).toBe(false);
    expect(refused.message).toMatch(/error 2045/);
    const outage = failed(500, { error: 'scheduler unreachable' });
    expect(outage).toBeInstanceOf(UpstreamUnavailableError);
    expect(outage.retryable).toBe(true);
  });
});

describe('freshnessOf', () => {
  const now = Date.parse('2026-11-22T12:00:10Z');

  it('a fresh cached answer: age from Age, lifetime from max-age, expiry by our clock', () => {
    const f = freshnessOf(
      { 'cache-control': 'private, max-age=5', age: '3', date: 'Sun, 22 Nov 2026 12:00:07 GMT' },
      now,
    );
    expect(f).toMatchObject({ ageSec: 3, maxAgeSec: 5, stale: false });
    expect(f.producedAt.getTime()).toBe(now - 3000);
    expect(f.expiresAt?.getTime()).toBe(now + 2000);
  });

  it('an answer older than its lifetime (stale-if-error during an outage) is stale', () => {
    const f = freshnessOf({ 'cache-control': 'max-age=5', age: '40' }, now);
    expect(f.stale).toBe(true);
  });

  it('without Cache-Control, the lifetime is Expires minus Date; without Age, Date against our clock', () => {
    const f = freshnessOf({ date: 'Sun, 22 Nov 2026 12:00:00 GMT', expires: 'Sun, 22 Nov 2026 12:00:30 GMT' }, now);
    expect(f).toMatchObject({ ageSec: 10, maxAgeSec: 30, stale: false });
  });

  it('no caching headers at all: age 0, no lifetime, never stale', () => {
    expect(freshnessOf({}, now)).toMatchObject({ ageSec: 0, maxAgeSec: null, expiresAt: null, stale: false });
  });
});

describe('backoffDelayMs: exponential with full jitter, never before Retry-After', () => {
  const options = { baseDelayMs: 500, maxDelayMs: 30_000 };

  it('the cap doubles per attempt up to the maximum; the delay is anywhere below it', () => {
    expect(backoffDelayMs(0, options, null, () => 0.999)).toBe(499);
    expect(backoffDelayMs(3, options, null, () => 0.999)).toBe(3996);
    expect(backoffDelayMs(20, options, null, () => 0.999)).toBe(29_970);
    expect(backoffDelayMs(3, options, null, () => 0)).toBe(0);
  });

  it('Retry-After is a floor', () => {
    expect(backoffDelayMs(0, options, 5000, () => 0.5)).toBe(5000);
    expect(backoffDelayMs(10, options, 1000, () => 0.5)).toBe(15_000);
  });
});

/** What real slurmrestd 25.11 answers that its documents do not say (seen on the test cluster). */
describe('errorForResponse on real slurmrestd answers', () => {
  const slurm = (status: number, error_number: number, error: string, request = 'POST /slurm/v0.0.44/job/submit') =>
    errorForResponse({
      status,
      body: { errors: [{ error_number, error, description: 'x', source: 'y' }] },
      text: '',
      request,
    });

  it('slurmctld unreachable (1800, as 502 or 500) is an outage to retry, not a refusal', () => {
    for (const status of [500, 502]) {
      const e = slurm(status, 1800, 'Unable to contact slurm controller (connect failure)');
      expect(e).toBeInstanceOf(UpstreamUnavailableError);
      expect(e.retryable).toBe(true);
    }
    expect(slurm(502, 7000, 'Unable to connect to database', 'GET /slurmdb/v0.0.44/jobs')).toBeInstanceOf(
      UpstreamUnavailableError,
    );
  });

  it('"Unspecified error" (-1) to a read is an outage (jobs/state while slurmctld is down); to a submission, a refusal', () => {
    expect(slurm(500, -1, 'Unspecified error', 'GET /slurm/v0.0.44/jobs/state')).toBeInstanceOf(
      UpstreamUnavailableError,
    );
    expect(slurm(500, -1, 'Unspecified error')).toBeInstanceOf(SlurmRefusedError);
  });

  it('a bad or expired JWT comes back from slurmctld as 511 / error 1007: a refused credential', () => {
    const e = slurm(511, 1007, 'Protocol authentication error', 'GET /slurm/v0.0.44/jobs');
    expect(e).toBeInstanceOf(AuthenticationError);
    expect(e.retryable).toBe(false);
    expect(e.message).toMatch(/JWT/);
  });

  it('a submit limit (2050) is its own error: the request waits', () => {
    const e = slurm(500, 2050, "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)");
    expect(e).toBeInstanceOf(SubmitLimitError);
    expect(e.code).toBe('SCHEDFLOW_ERR_SCHED_SUBMIT_LIMIT');
  });
});
