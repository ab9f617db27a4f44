import { type ErrorCode, errorSpec, SchedflowError } from '../../errors.js';

/**
 * Errors the local API answers with: the registry gives each its HTTP status,
 * and its code and message go into the body `{ error: { code, message, … } }`.
 * Other schedflow errors are answered by their code's status too; anything else
 * thrown by a route is a bug or an outage and becomes a 500 (see error-handler.ts).
 */
export abstract class ApiError extends SchedflowError {
  get status(): number {
    // Every code an ApiError is made with has a status; a null one would be a bug, answered 500.
    return errorSpec(this.code).status ?? 500;
  }
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
  constructor(readonly fields: FieldProblem[]) {
    super(`invalid request: ${fields.map((f) => `${f.path || f.in}: ${f.reason}`).join('; ')}`);
    this.extra.fields = fields;
  }
}

/**
 * 400: the webhook URL's host is the daemon's own host or network (src/notify/webhook-target.ts);
 * a code of its own, and the field named as a validation error names it.
 */
export class WebhookTargetApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_WEBHOOK_TARGET_REFUSED';
  constructor(reason: string) {
    super(`invalid request: webhook_url: ${reason}`);
    this.extra.fields = [{ in: 'body', path: 'webhook_url', reason } satisfies FieldProblem];
  }
}

/** 401: no token, a malformed header, an unknown or a revoked token. */
export class UnauthorizedApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_UNAUTHORIZED';
  constructor(message: string) {
    super(message);
    this.headers['www-authenticate'] = 'Bearer realm="schedflow"';
  }
}

/** 403: the token is valid but lacks the scope the route needs. */
export class ForbiddenApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_FORBIDDEN';
}

export class NotFoundApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_NOT_FOUND';
}

/** 409: the request conflicts with the resource's state (or an idempotency key's first use). */
export class ConflictApiError extends ApiError {
  constructor(
    readonly code: ErrorCode,
    message: string,
    options: { retryAfterSec?: number; extra?: Record<string, unknown> } = {},
  ) {
    super(message);
    Object.assign(this.extra, options.extra);
    if (options.retryAfterSec !== undefined) this.headers['retry-after'] = String(options.retryAfterSec);
  }
}

/** 429: the requests per minute of a token (of a UI session, of an address without either) are spent. */
export class RateLimitedApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_RATE_LIMITED';
  constructor(max: number, retryAfterSec: number, of: 'token' | 'UI session' | 'address' = 'token') {
    super(`rate limit of ${max} requests per minute reached for this ${of}; retry in ${retryAfterSec} s`);
    this.headers['retry-after'] = String(retryAfterSec);
  }
}

/**
 * 502/503: the scheduler answered a cancel with an error (502) or could not be
 * reached (503); its HTTP status and message are kept in `upstream`.
 */
export class UpstreamApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_UPSTREAM';
  readonly #retryable: boolean;
  constructor(
    message: string,
    retryable: boolean,
    upstream: { status: number | null; message: string | null; code: ErrorCode },
  ) {
    super(message);
    this.#retryable = retryable;
    this.extra.upstream = upstream;
  }

  /** The upstream error's: a refusal stays one, an outage may pass. */
  override get retryable(): boolean {
    return this.#retryable;
  }

  override get status(): number {
    const spec = errorSpec(this.code);
    return this.#retryable ? (spec.unreachableStatus ?? 503) : (spec.status ?? 502);
  }
}

/** 503: a part of the daemon the route needs is not there (pipelines not loaded, a scheduler not connected). */
export class UnavailableApiError extends ApiError {
  readonly code = 'SCHEDFLOW_ERR_UNAVAILABLE';
  constructor(message: string, retryAfterSec?: number) {
    super(message);
    if (retryAfterSec !== undefined) this.headers['retry-after'] = String(retryAfterSec);
  }
}
