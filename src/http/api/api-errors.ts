import { SchedflowError } from '../../errors.js';

/**
 * Errors the local API answers with: each knows its HTTP status, and its code
 * and message go into the body `{ error: { code, message, … } }`. Anything
 * else thrown by a route is a bug or an outage and becomes a 500 or 503 (see
 * error-handler.ts).
 */
export abstract class ApiError extends SchedflowError {
  abstract readonly status: number;
  /** Extra members of the error body (fields, upstream, state). */
  readonly extra: Record<string, unknown> = {};
  /** Extra response headers (WWW-Authenticate, Retry-After). */
  readonly headers: Record<string, string> = {};
}

export interface FieldProblem {
  /** Where the field is: the JSON body, the query string, the path or a header. */
  in: 'body' | 'query' | 'params' | 'headers';
  /** Dotted path inside it: `spec.script`, `deadlines.start_by`, `limit`. */
  path: string;
  reason: string;
}

/** 400: the request does not match the route's schema; `fields` names each problem. */
export class ValidationApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_VALIDATION';
  readonly retryable = false;
  readonly status = 400;
  constructor(readonly fields: FieldProblem[]) {
    super(`invalid request: ${fields.map((f) => `${f.path || f.in}: ${f.reason}`).join('; ')}`);
    this.extra.fields = fields;
  }
}

/** 401: no token, a malformed header, an unknown or a revoked token. */
export class UnauthorizedApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_UNAUTHORIZED';
  readonly retryable = false;
  readonly status = 401;
  constructor(message: string) {
    super(message);
    this.headers['www-authenticate'] = 'Bearer realm="schedflow"';
  }
}

/** 403: the token is valid but lacks the scope the route needs. */
export class ForbiddenApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_FORBIDDEN';
  readonly retryable = false;
  readonly status = 403;
}

export class NotFoundApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_NOT_FOUND';
  readonly retryable = false;
  readonly status = 404;
}

/** 409: the request conflicts with the resource's state (or an idempotency key's first use). */
export class ConflictApiError extends ApiError {
  readonly status = 409;
  constructor(
    readonly code: string,
    message: string,
    options: { retryAfterSec?: number; extra?: Record<string, unknown> } = {},
  ) {
    super(message);
    Object.assign(this.extra, options.extra);
    if (options.retryAfterSec !== undefined) this.headers['retry-after'] = String(options.retryAfterSec);
  }

  get retryable(): boolean {
    return this.headers['retry-after'] !== undefined;
  }
}

/** 429: the token's requests per minute are spent. */
export class RateLimitedApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_RATE_LIMITED';
  readonly retryable = true;
  readonly status = 429;
  constructor(max: number, retryAfterSec: number) {
    super(`rate limit of ${max} requests per minute reached for this token; retry in ${retryAfterSec} s`);
    this.headers['retry-after'] = String(retryAfterSec);
  }
}

/**
 * 502/503: the scheduler answered a cancel with an error (502) or could not be
 * reached (503); its HTTP status and message are kept in `upstream`.
 */
export class UpstreamApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_UPSTREAM';
  readonly status: number;
  constructor(
    message: string,
    readonly retryable: boolean,
    upstream: { status: number | null; message: string | null; code: string },
  ) {
    super(message);
    this.status = retryable ? 503 : 502;
    this.extra.upstream = upstream;
  }
}

/** 503: a part of the daemon the route needs is not there (pipelines not loaded, a scheduler not connected). */
export class UnavailableApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_UNAVAILABLE';
  readonly retryable = true;
  readonly status = 503;
  constructor(message: string, retryAfterSec?: number) {
    super(message);
    if (retryAfterSec !== undefined) this.headers['retry-after'] = String(retryAfterSec);
  }
}
