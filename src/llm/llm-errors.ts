import { SchedflowError } from '../errors.js';

/** What the LLM endpoint said: HTTP status and its own message, kept as data. */
export interface LlmUpstreamDetail {
  status: number | null;
  /** The endpoint's message (from `error.message`, `message` or `detail`), verbatim. */
  message: string | null;
  /** `POST /v1/chat/completions`: what was asked (paths carry no secrets). */
  request: string;
}

/** Any failure talking to the chat-completions endpoint. */
export abstract class LlmError extends SchedflowError {
  constructor(
    message: string,
    readonly detail: LlmUpstreamDetail,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  get status(): number | null {
    return this.detail.status;
  }
}

/**
 * No connection (refused, reset, DNS, no route). The service answers only
 * inside the institution's network, so this is most often a missing VPN.
 */
export class LlmUnreachableError extends LlmError {
  readonly code = 'SCHEDFLOW_ERR_LLM_UNREACHABLE';
}

/** 401 or 403: the API key was refused (wrong, revoked, or no approved allocation). */
export class LlmAuthError extends LlmError {
  readonly code = 'SCHEDFLOW_ERR_LLM_UNAUTHORIZED';
}

/**
 * The configured model is not served: a 404 from chat completions, or missing
 * from `GET /v1/models` (then `available` lists what is).
 */
export class LlmModelError extends LlmError {
  readonly code = 'SCHEDFLOW_ERR_LLM_MODEL';
  constructor(
    message: string,
    detail: LlmUpstreamDetail,
    readonly model: string,
    readonly available: readonly string[] | null,
  ) {
    super(message, detail);
  }
}

/** 429: too many requests. `retryAfterMs` is the endpoint's Retry-After, when it sent one. */
export class LlmRateLimitedError extends LlmError {
  readonly code = 'SCHEDFLOW_ERR_LLM_RATE_LIMITED';
  constructor(
    message: string,
    detail: LlmUpstreamDetail,
    readonly retryAfterMs: number | null,
  ) {
    super(message, detail);
  }
}

/** 5xx: the service failed or is overloaded. Try again later. */
export class LlmUnavailableError extends LlmError {
  readonly code = 'SCHEDFLOW_ERR_LLM_UNAVAILABLE';
}

/** No complete answer in time. */
export class LlmTimeoutError extends LlmError {
  readonly code = 'SCHEDFLOW_ERR_LLM_TIMEOUT';
}

/** Another 4xx (a prompt too long for the model's context, a malformed request) or a redirect. */
export class LlmRequestRefusedError extends LlmError {
  readonly code = 'SCHEDFLOW_ERR_LLM_REFUSED';
}

/** A 2xx whose body is not a chat completion (not JSON, no message content). */
export class LlmUnexpectedResponseError extends LlmError {
  readonly code = 'SCHEDFLOW_ERR_LLM_UNEXPECTED_RESPONSE';
}
