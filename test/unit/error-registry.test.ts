import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { EXIT, exitCodeFor } from '../../src/cli/exit-codes.js';
import {
  ConfigError,
  ERROR_CODES,
  isErrorCode,
  NoSuggestionError,
  RedisStartError,
  RedisUnavailableError,
  RequestNotFoundError,
  SummaryPendingError,
  UpstreamError,
} from '../../src/errors.js';
import { ForbiddenApiError, NotFoundApiError, ValidationApiError } from '../../src/http/api/api-errors.js';
import { errorAnswer } from '../../src/http/api/error-handler.js';
import { LlmAuthError, LlmRateLimitedError, LlmUnavailableError } from '../../src/llm/llm-errors.js';
import { WebhookRefusedError, WebhookRetryableError, webhookDetail } from '../../src/notify/sender.js';
import { PipelineNotFoundError } from '../../src/pipelines/pipeline-registry.js';
import { MungeError, NetworkError, RateLimitedError, SlurmRefusedError } from '../../src/sched/sched-errors.js';

const root = join(import.meta.dirname, '..', '..');

function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name));
}

const request = { id: 'req-1' } as FastifyRequest;
const answer = (error: unknown) => {
  const { status, body } = errorAnswer(error, request);
  return { status, code: body.error.code };
};
const upstream = { status: null, message: null, slurmErrors: [], request: 'GET /x' };
const llm = { status: 503, message: null, request: 'POST /v1/chat/completions' };

describe('the error registry', () => {
  it('holds every code the code emits: no free strings', () => {
    const used = new Set<string>();
    for (const file of [...sources('src'), ...sources('workers')]) {
      for (const [code] of readFileSync(file, 'utf8').matchAll(/SCHEDFLOW_ERR_[A-Z0-9_]*[A-Z0-9]/g)) used.add(code);
    }
    expect([...used].filter((code) => !isErrorCode(code))).toEqual([]);
  });

  it('gives each code a one-line what-to-do and a plausible status', () => {
    for (const [code, spec] of Object.entries(ERROR_CODES)) {
      expect(spec.what, code).toMatch(/^\S.*[.)]$/);
      expect(spec.what, code).not.toContain('\n');
      if (spec.status !== null) expect(spec.status, code).toBeGreaterThanOrEqual(400);
    }
  });
});

describe('the upstream errors', () => {
  it('share one base for the scheduler, the LLM and webhooks: upstream, status, message, retryable, Retry-After', () => {
    const errors = [
      new RateLimitedError('slow down', { ...upstream, status: 429 }, { retryAfterMs: 7000 }),
      new LlmRateLimitedError('slow down', { ...llm, status: 429 }, { retryAfterMs: 7000 }),
      new WebhookRetryableError('slow down', webhookDetail('https://u:p@r.example/h?t=1', 429, 'busy'), {
        retryAfterMs: 7000,
      }),
    ];
    expect(errors.map((e) => [e instanceof UpstreamError, e.upstream, e.status, e.retryable, e.retryAfterMs])).toEqual([
      [true, 'scheduler', 429, true, 7000],
      [true, 'llm', 429, true, 7000],
      [true, 'webhook', 429, true, 7000],
    ]);
    // A receiver is named by its origin alone: its URL may carry a token.
    expect(errors[2]?.detail).toEqual({ status: 429, message: 'busy', request: 'POST https://r.example' });
    const refused = new WebhookRefusedError('no', webhookDetail('https://r.example/h', 404));
    expect([refused.retryable, refused.retryAfterMs, refused.detail.message]).toEqual([false, null, null]);
    expect(new NetworkError('down', upstream).retryAfterMs).toBeNull();
  });
});

describe('API answers from the registry', () => {
  it('a missing request is 404, a summary still being written its own 409, nothing to apply 409', () => {
    expect(answer(new RequestNotFoundError('no job request x'))).toEqual({
      status: 404,
      code: 'SCHEDFLOW_ERR_NOT_FOUND',
    });
    expect(answer(new SummaryPendingError('still being written'))).toEqual({
      status: 409,
      code: 'SCHEDFLOW_ERR_SUMMARY_PENDING',
    });
    expect(answer(new NoSuggestionError('nothing'))).toEqual({ status: 409, code: 'SCHEDFLOW_ERR_NO_SUGGESTION' });
  });

  it('keeps the answers the routes had: config 400, pipeline 404, outages 503, API errors their own', () => {
    expect(answer(new ConfigError('bad'))).toEqual({ status: 400, code: 'SCHEDFLOW_ERR_CONFIG' });
    expect(answer(new PipelineNotFoundError('no pipeline'))).toEqual({
      status: 404,
      code: 'SCHEDFLOW_ERR_PIPELINE_NOT_FOUND',
    });
    expect(answer(new RedisUnavailableError('down'))).toEqual({ status: 503, code: 'SCHEDFLOW_ERR_REDIS_UNAVAILABLE' });
    expect(answer(new LlmUnavailableError('down', llm))).toEqual({
      status: 503,
      code: 'SCHEDFLOW_ERR_LLM_UNAVAILABLE',
    });
    expect(answer(new NotFoundApiError('no run'))).toEqual({ status: 404, code: 'SCHEDFLOW_ERR_NOT_FOUND' });
    expect(answer(new ForbiddenApiError('scope'))).toEqual({ status: 403, code: 'SCHEDFLOW_ERR_FORBIDDEN' });
    expect(answer(new ValidationApiError([{ in: 'body', path: 'x', reason: 'bad' }])).status).toBe(400);
  });

  it('a scheduler error is SCHEDFLOW_ERR_UPSTREAM: 502 for a refusal, 503 for an outage', () => {
    const refused = errorAnswer(new SlurmRefusedError('refused', upstream), request);
    expect(refused.status).toBe(502);
    expect(refused.body.error).toMatchObject({
      code: 'SCHEDFLOW_ERR_UPSTREAM',
      upstream: { code: 'SCHEDFLOW_ERR_SCHED_SLURM_REFUSED' },
    });
    expect(answer(new NetworkError('no route', upstream))).toEqual({ status: 503, code: 'SCHEDFLOW_ERR_UPSTREAM' });
  });

  it('a code never answered, not retryable, is an internal error with the request id', () => {
    for (const error of [new MungeError('no munged'), new LlmAuthError('key', llm), new RedisStartError('no')]) {
      const { status, body } = errorAnswer(error, request);
      expect(status).toBe(500);
      expect(body.error).toMatchObject({ code: 'SCHEDFLOW_ERR_INTERNAL', request_id: 'req-1' });
    }
  });
});

describe('exit codes of commands', () => {
  it('a mistake to fix is 2, an outage 4, a refusal 3, anything else 1', () => {
    expect(exitCodeFor(new ConfigError('bad'))).toBe(EXIT.usage);
    expect(exitCodeFor(new RequestNotFoundError('no'))).toBe(EXIT.usage);
    expect(exitCodeFor(new NoSuggestionError('no'))).toBe(EXIT.usage);
    expect(exitCodeFor(new SummaryPendingError('wait'))).toBe(EXIT.usage);
    expect(exitCodeFor(new RedisStartError('see redis.log'))).toBe(EXIT.usage);
    expect(exitCodeFor(new NetworkError('down', upstream))).toBe(EXIT.unavailable);
    expect(exitCodeFor(new SlurmRefusedError('refused', upstream))).toBe(EXIT.refused);
    expect(exitCodeFor(new Error('bug'))).toBe(EXIT.internal);
  });
});
