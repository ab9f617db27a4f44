import type { ErrorDetail, FieldProblem } from './api-shapes.js';

/**
 * What the client throws. Every error has a `code`: the daemon's own `SCHEDFLOW_ERR_…` code for
 * an error answer (docs/errors.md), or one of the client's `SCHEDFLOW_CLIENT_…` codes for what
 * happened on this side (no answer, a wait that timed out, an answer that is not the API's).
 * An abort through an `AbortSignal` is not one of these: the signal's reason is thrown, as
 * `fetch` does.
 */
export abstract class SchedflowClientError extends Error {
  abstract readonly code: string;
  // Each class names itself in a literal, not by `constructor.name`, which a minifier renames.
  override readonly name: string = 'SchedflowClientError';
}

/** An error answer of the API, as its body `{ error: { code, message, … } }` says. */
export class SchedflowApiError extends SchedflowClientError {
  override readonly name = 'SchedflowApiError';
  /** The daemon's code, e.g. `SCHEDFLOW_ERR_VALIDATION`. */
  readonly code: string;
  readonly status: number;
  /** On a 400: each field in error, where it is and why. Empty otherwise. */
  readonly fields: readonly FieldProblem[];
  /** The answer's `X-Request-Id` (or the body's `request_id`): what to look for in the daemon's log. */
  readonly requestId: string | null;
  /** What `Retry-After` asked for, in milliseconds; null when the answer had none. */
  readonly retryAfterMs: number | null;
  /** The whole `error` member: `state` of a conflict, `upstream` of a scheduler's refusal, `output`, … */
  readonly detail: ErrorDetail;
  /** Which call it answered: `POST /api/v1/jobs`. */
  readonly call: string;
  /**
   * The `Idempotency-Key` the call was sent with (null when none): to try the same submission
   * again later without making a second, resend with `{ idempotencyKey: error.idempotencyKey }`.
   */
  readonly idempotencyKey: string | null;

  constructor(input: {
    status: number;
    detail: ErrorDetail;
    requestId: string | null;
    retryAfterMs: number | null;
    call: string;
    idempotencyKey: string | null;
  }) {
    super(`${input.detail.message} (${input.detail.code}, HTTP ${input.status}, ${input.call})`);
    this.code = input.detail.code;
    this.status = input.status;
    this.fields = input.detail.fields ?? [];
    this.requestId = input.detail.request_id ?? input.requestId;
    this.retryAfterMs = input.retryAfterMs;
    this.detail = input.detail;
    this.call = input.call;
    this.idempotencyKey = input.idempotencyKey;
  }
}

/**
 * An answer that is not what the API sends: an error whose body is not its error body (a proxy's
 * page in front of the daemon), or a success that is not JSON.
 */
export class SchedflowUnexpectedAnswerError extends SchedflowClientError {
  override readonly name = 'SchedflowUnexpectedAnswerError';
  readonly code = 'SCHEDFLOW_CLIENT_UNEXPECTED_ANSWER';
  constructor(
    readonly status: number,
    readonly call: string,
    /** The start of the body, for a message: at most 200 characters. */
    readonly excerpt: string,
  ) {
    super(`${call} answered HTTP ${status} with a body that is not the API's: ${excerpt}`);
  }
}

/** No answer: the connection failed or an attempt ran past `requestTimeoutMs`, and no retry was left (or allowed). */
export class SchedflowNetworkError extends SchedflowClientError {
  override readonly name = 'SchedflowNetworkError';
  readonly code = 'SCHEDFLOW_CLIENT_NETWORK';
  constructor(
    readonly call: string,
    readonly attempts: number,
    /**
     * The `Idempotency-Key` the call was sent with (null when none): the daemon may have made
     * what it asked for; resend with `{ idempotencyKey: error.idempotencyKey }` to be answered
     * with that rather than make a second.
     */
    readonly idempotencyKey: string | null,
    options: { cause: unknown },
  ) {
    super(`${call}: no answer after ${attempts} attempt(s): ${messageOf(options.cause)}`, options);
  }
}

/** A wait (`waitForJob`, `waitForRun`) that reached its `timeoutMs` before the job or run ended. */
export class SchedflowTimeoutError<T = unknown> extends SchedflowClientError {
  override readonly name = 'SchedflowTimeoutError';
  readonly code = 'SCHEDFLOW_CLIENT_TIMEOUT';
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
    /** The last state read before the time ran out (null when none was read). */
    readonly last: T | null,
  ) {
    super(`${what} had not ended after ${timeoutMs} ms`);
  }
}

function messageOf(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
    return `${error.message}${cause}`;
  }
  return String(error);
}
