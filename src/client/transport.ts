import type { ErrorDetail } from './api-shapes.js';
import {
  SchedflowApiError,
  type SchedflowClientError,
  SchedflowNetworkError,
  SchedflowUnexpectedAnswerError,
} from './client-errors.js';
import { isRetryableAnswer, parseRetryAfter, type RetryPolicy, retryDelayMs } from './retry.js';
import { sleep } from './sleep.js';

export type QueryValue = string | number | boolean | readonly string[] | undefined;

export interface CallInit {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** The path, its ids already encoded (see `segment`). */
  path: string;
  query?: Record<string, QueryValue>;
  body?: unknown;
  /** Doing it twice leaves what doing it once did: it may be sent again after no answer came. */
  idempotent: boolean;
  /** Sent as `Idempotency-Key`, the same on every attempt: the daemon answers a repeat with the first answer. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export interface Answer<T> {
  status: number;
  body: T;
  headers: Headers;
}

export interface TransportOptions {
  baseUrl: string;
  token: string;
  fetch: typeof fetch;
  retry: RetryPolicy;
  /** One attempt's bound: past it, the attempt counts as no answer (default 30 s). */
  requestTimeoutMs: number;
}

/**
 * A path segment (an id, a pipeline's name), percent-encoded. `''`, `.` and `..` (or `%2E`) are
 * refused: the URL would resolve them, and `getJob('..')` would read another route.
 */
export function segment(value: string): string {
  if (/^(?:\.|%2e){0,2}$/i.test(value)) {
    throw new TypeError(`an id or a name in a path cannot be empty, "." or "..": got ${JSON.stringify(value)}`);
  }
  return encodeURIComponent(value);
}

/** One call of the API: its attempts, retries and waits, and its answer read as JSON or as a typed error. */
export class Transport {
  readonly #options: TransportOptions;
  readonly #baseUrl: string;

  constructor(options: TransportOptions) {
    this.#options = options;
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
  }

  async call<T>(init: CallInit): Promise<Answer<T>> {
    const { retry } = this.#options;
    const call = `${init.method} ${init.path}`;
    const url = `${this.#baseUrl}${init.path}${queryString(init.query)}`;
    const headers: Record<string, string> = {
      accept: 'application/json',
      authorization: `Bearer ${this.#options.token}`,
    };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    if (init.idempotencyKey !== undefined) headers['idempotency-key'] = init.idempotencyKey;
    const body = init.body === undefined ? undefined : JSON.stringify(init.body);
    const mayRepeat = init.idempotent || init.idempotencyKey !== undefined;
    // Once an attempt went unanswered, the daemon may still be answering it.
    let unanswered = false;
    for (let attempt = 1; ; attempt++) {
      init.signal?.throwIfAborted();
      let response: { status: number; headers: Headers; text: string };
      try {
        response = await this.#attempt(url, { method: init.method, headers, body }, init.signal);
      } catch (error) {
        if (init.signal?.aborted) throw init.signal.reason;
        // A request `fetch` refused to make (a header or URL it cannot send) is a mistake here,
        // not a lost answer: the same request would be refused again.
        if (!isNoAnswer(error)) throw this.#scrubbed(error);
        const delay = retryDelayMs(retry, attempt, null);
        if (!mayRepeat || attempt >= retry.maxAttempts || delay === null) {
          throw this.#scrubbed(
            new SchedflowNetworkError(call, attempt, init.idempotencyKey ?? null, { cause: this.#scrubbed(error) }),
          );
        }
        unanswered = true;
        retry.onRetry?.({ call, attempt, delayMs: delay, status: null, retryAfterMs: null });
        await sleep(delay, init.signal);
        continue;
      }
      if (response.status >= 200 && response.status < 300) {
        return { status: response.status, headers: response.headers, body: parseSuccess<T>(response, call) };
      }
      const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
      // The body is the daemon's text, kept in the error (`detail`, `excerpt`): never the token.
      const text = response.text.replaceAll(this.#options.token, '***');
      const failure = this.#scrubbed(errorOf({ ...response, text }, call, retryAfterMs, init.idempotencyKey ?? null));
      const code = failure instanceof SchedflowApiError ? failure.code : null;
      // The key is held by this call's own unanswered attempt, still being answered: its answer
      // comes back once it is done. Any other 409 but "being submitted" is the request's own conflict.
      const ownKeyInUse = unanswered && code === 'SCHEDFLOW_ERR_IDEMPOTENCY_KEY_IN_USE';
      if ((isRetryableAnswer(response.status, code) || ownKeyInUse) && attempt < retry.maxAttempts) {
        const delay = retryDelayMs(retry, attempt, retryAfterMs);
        if (delay !== null) {
          retry.onRetry?.({ call, attempt, delayMs: delay, status: response.status, retryAfterMs });
          await sleep(delay, init.signal);
          continue;
        }
      }
      throw failure;
    }
  }

  /**
   * The error with the token taken out of its message and its causes' (`***`): `fetch` may quote
   * the header it could not send, and the daemon's text is not ours to trust. A cause that names
   * it is replaced by an Error of the same name and the scrubbed message.
   */
  #scrubbed<E>(error: E): E {
    const token = this.#options.token;
    if (!(error instanceof Error) || !mentions(error, token)) return error;
    try {
      if (error.message.includes(token)) error.message = error.message.replaceAll(token, '***');
      if (error.cause !== undefined && mentions(error.cause, token)) {
        const cause = new Error(textOf(error.cause).replaceAll(token, '***'));
        cause.name = error.cause instanceof Error ? error.cause.name : 'Error';
        Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true });
      }
      if (error.stack?.includes(token)) error.stack = error.stack.replaceAll(token, '***');
      if (!mentions(error, token)) return error;
    } catch {
      // A message that cannot be written (a DOMException's): replaced below.
    }
    const plain = new Error(textOf(error).replaceAll(token, '***'));
    plain.name = error.name;
    return plain as E;
  }

  /** One request and its whole body, within `requestTimeoutMs` and the caller's signal. */
  async #attempt(url: string, init: RequestInit, signal: AbortSignal | undefined) {
    const timeout = AbortSignal.timeout(this.#options.requestTimeoutMs);
    const response = await this.#options.fetch(url, {
      ...init,
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    return { status: response.status, headers: response.headers, text: await response.text() };
  }
}

/**
 * Whether a failed `fetch` may have reached the daemon, or not reached it for a reason that may
 * pass: anything but a `TypeError` (an attempt's timeout, a dispatcher's error), or a `TypeError`
 * that says the network failed (undici's `fetch failed` with its cause, a browser's `Failed to
 * fetch`). Any other `TypeError` is a request `fetch` would not make.
 */
function isNoAnswer(error: unknown): boolean {
  if (!(error instanceof TypeError)) return true;
  return (
    error.cause !== undefined || /fetch failed|failed to fetch|networkerror|load failed|network/i.test(error.message)
  );
}

/** Whether the token is anywhere in the error's text: its message, stack, or its causes'. */
function mentions(error: unknown, token: string, depth = 0): boolean {
  if (depth > 5 || error === undefined || error === null) return false;
  if (!(error instanceof Error)) return String(error).includes(token);
  return (
    error.message.includes(token) || (error.stack ?? '').includes(token) || mentions(error.cause, token, depth + 1)
  );
}

/** An error's message and its causes', as one line. */
function textOf(error: unknown, depth = 0): string {
  if (!(error instanceof Error)) return String(error);
  const cause = depth < 5 && error.cause !== undefined ? `: ${textOf(error.cause, depth + 1)}` : '';
  return `${error.message}${cause}`;
}

function queryString(query: Record<string, QueryValue> | undefined): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined) continue;
    params.set(name, Array.isArray(value) ? value.join(',') : String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

function parseSuccess<T>(response: { status: number; text: string }, call: string): T {
  try {
    return JSON.parse(response.text) as T;
  } catch {
    throw new SchedflowUnexpectedAnswerError(response.status, call, response.text.slice(0, 200));
  }
}

/** The API's error body as a typed error; anything else (a proxy's page) as an unexpected answer. */
function errorOf(
  response: { status: number; headers: Headers; text: string },
  call: string,
  retryAfterMs: number | null,
  idempotencyKey: string | null,
): SchedflowClientError {
  const detail = errorDetailOf(response.text);
  if (!detail) return new SchedflowUnexpectedAnswerError(response.status, call, response.text.slice(0, 200));
  return new SchedflowApiError({
    status: response.status,
    detail,
    requestId: response.headers.get('x-request-id'),
    retryAfterMs,
    call,
    idempotencyKey,
  });
}

function errorDetailOf(text: string): ErrorDetail | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  const error = (parsed as { error?: unknown } | null)?.error as Record<string, unknown> | undefined;
  if (typeof error?.code !== 'string' || typeof error.message !== 'string') return null;
  return error as ErrorDetail;
}
