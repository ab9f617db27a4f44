import { type UpstreamDetail, UpstreamError } from '../errors.js';

/** Any failure talking to the chat-completions endpoint: an {@link UpstreamError} of the LLM. */
export abstract class LlmError extends UpstreamError {
  readonly upstream = 'llm';
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
    detail: UpstreamDetail,
    readonly model: string,
    readonly available: readonly string[] | null,
  ) {
    super(message, detail);
  }
}

/** 429: too many requests. `retryAfterMs` is the endpoint's Retry-After, when it sent one. */
export class LlmRateLimitedError extends LlmError {
  readonly code = 'SCHEDFLOW_ERR_LLM_RATE_LIMITED';
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
