import { Pool, errors as undiciErrors } from 'undici';
import { type Clock, systemClock } from '../lib/clock.js';
import { backoffDelayMs, isNetworkErrorCode } from '../lib/retry-policy.js';
import type { Logger } from '../logger.js';
import {
  AnswerShapeError,
  type ItemsOf,
  itemsOfParsed,
  itemsOfStream,
  type ReadItems,
  STREAM_ABOVE_BYTES,
} from './answer-items.js';
import type { Credentials } from './credentials.js';
import { type Freshness, freshnessOf } from './freshness.js';
import type { Profile } from './profile.js';
import { type Budget, RequestBudget, type RequestPriority } from './request-budget.js';
import { errorForResponse } from './response-errors.js';
import {
  AuthenticationError,
  BudgetUnavailableError,
  NetworkError,
  RateLimitedError,
  RequestTimeoutError,
  type SchedApiError,
  UnexpectedResponseError,
} from './sched-errors.js';
import { endpointOf, UpstreamHealth } from './upstream-health.js';

export interface TransportRequest {
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  /** An array value is sent as the parameter repeated (`job_id=1&job_id=2`), which slurmrestd wants for lists. */
  query?: Record<string, string | number | readonly (string | number)[] | undefined>;
  body?: unknown;
  /** Polling is served first from the request budget. */
  priority?: RequestPriority;
  /** Send `Cache-Control: stale-if-error=N` (reads for polling). */
  staleIfErrorSec?: number;
  /** Retry retryable failures; only for requests that are safe to repeat. @defaultValue true for GET */
  retry?: boolean;
  /** No credentials (meta endpoints, /ping). */
  anonymous?: boolean;
  signal?: AbortSignal;
}

export interface TransportResponse {
  status: number;
  body: unknown;
  text: string;
  headers: Record<string, string | string[] | undefined>;
  freshness: Freshness;
}

/** A list answer: its records decoded one by one, and the rest of its body. */
export interface ItemsResponse<T> extends TransportResponse {
  items: T[];
  /** Records the answer held, kept or not. */
  seen: number;
}

function isJson(headers: Record<string, string | string[] | undefined>): boolean {
  return String(headers['content-type'] ?? '').includes('json');
}

/** Large, or of unknown length (chunked). */
function isLarge(headers: Record<string, string | string[] | undefined>): boolean {
  const length = Number(headers['content-length'] ?? Number.NaN);
  return !Number.isFinite(length) || length > STREAM_ABOVE_BYTES;
}

/**
 * The only place schedflow speaks HTTP to a scheduler: a keep-alive pool with
 * bounded connections and timeouts, the profile's request budget, typed errors,
 * and retries with backoff for what is safe to repeat.
 */
export class SchedTransport {
  private readonly pool: Pool;
  private readonly budget: Budget;
  private readonly basePath: string;

  constructor(
    readonly profile: Profile,
    private readonly credentials: Credentials,
    private readonly logger: Logger,
    /** Where requests and answers are counted; the client registry keeps one per profile across reconnects. */
    readonly health: UpstreamHealth = new UpstreamHealth(profile.name),
    /** The profile's request budget: the deployment's (shared in Redis) in a daemon, else this process's. */
    budget?: Budget,
    /** Time and timers (answers' fetch time, retry backoff, this process's own budget). */
    private readonly clock: Clock = systemClock,
  ) {
    const url = new URL(profile.url);
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.pool = new Pool(url.origin, {
      connections: profile.concurrency,
      keepAliveTimeout: 30_000,
      connect: { timeout: profile.timeouts.connectMs },
      headersTimeout: profile.timeouts.requestMs,
      bodyTimeout: profile.timeouts.requestMs,
    });
    this.budget = budget ?? new RequestBudget(profile.rateLimit.capacity, profile.rateLimit.refillPerSecond, clock);
  }

  describe(req: Pick<TransportRequest, 'method' | 'path'>): string {
    return `${req.method} ${req.path}`;
  }

  /** True while the proxy's rate limit holds this profile below its configured pace (a 429 lately). */
  isRateLimited(): boolean {
    return this.budget.isLimited();
  }

  /** Whether submissions or lookups had to wait for the request budget within `windowMs`. */
  contendedWithin(windowMs: number): boolean {
    return this.budget.contendedWithin(windowMs);
  }

  /** Resolves once no Retry-After holds the profile. */
  whenOpen(): Promise<void> {
    return this.budget.whenOpen();
  }

  /** The pace (requests a second) this profile sends at now: the configured one, or less after 429s. */
  currentRate(): number {
    return this.budget.currentRate();
  }

  /** Sends a request, retrying what may be retried; throws a typed SchedApiError on failure. */
  async send(req: TransportRequest): Promise<TransportResponse> {
    return this.withRetries(req, () => this.once(req));
  }

  /**
   * Sends a request whose answer lists records under `of.member`, each decoded as it is read
   * (a large answer is parsed as it arrives: see answer-items.ts); retries as `send`.
   */
  async sendForItems<T>(req: TransportRequest, of: ItemsOf<T>): Promise<ItemsResponse<T>> {
    return this.withRetries(req, () => this.once(req, of) as Promise<ItemsResponse<T>>);
  }

  private async withRetries<R>(req: TransportRequest, attemptOnce: () => Promise<R>): Promise<R> {
    const retry = req.retry ?? req.method === 'GET';
    const { attempts, baseDelayMs, maxDelayMs } = this.profile.retries;
    for (let attempt = 0; ; attempt++) {
      try {
        return await attemptOnce();
      } catch (error) {
        const e = error as SchedApiError;
        // A budget Redis does not answer is a Redis outage, said once by the daemon's Redis watch:
        // the job that asked is retried by its queue once Redis is back, not request by request here.
        if (!retry || !e.retryable || attempt + 1 >= attempts || e instanceof BudgetUnavailableError) throw e;
        const delay = backoffDelayMs(attempt, { baseDelayMs, maxDelayMs }, e.retryAfterMs ?? null);
        this.logger.warn(
          { request: this.describe(req), attempt: attempt + 1, delayMs: delay, code: e.code, status: e.status },
          'scheduler request failed; retrying',
        );
        await this.clock.sleep(delay, req.signal);
      }
    }
  }

  /**
   * One attempt, no retries; but a MUNGE credential can expire in flight, and a 401 means
   * Slurm never saw the request (not even a submission), so it is sent once more with a fresh one.
   */
  async once<T>(req: TransportRequest, of?: ItemsOf<T>): Promise<TransportResponse | ItemsResponse<T>> {
    try {
      return await this.sendOnce(req, of);
    } catch (error) {
      if (error instanceof AuthenticationError && this.credentials.type === 'munge')
        return await this.sendOnce(req, of);
      throw error;
    }
  }

  private async sendOnce<T>(req: TransportRequest, of?: ItemsOf<T>): Promise<TransportResponse | ItemsResponse<T>> {
    const request = this.describe(req);
    try {
      await this.budget.acquire(req.priority);
    } catch (error) {
      const message = (error as Error)?.message ?? String(error);
      throw new BudgetUnavailableError(
        `${request} was not sent: the request budget of profile ${this.profile.name} in Redis did not answer (${message})`,
        { status: null, message, slurmErrors: [], request },
        { cause: error },
      );
    }
    const headers: Record<string, string> = { accept: 'application/json' };
    if (!req.anonymous) Object.assign(headers, await this.credentials.headers());
    if (req.staleIfErrorSec) headers['cache-control'] = `stale-if-error=${req.staleIfErrorSec}`;
    let body: string | undefined;
    if (req.body !== undefined) {
      body = JSON.stringify(req.body);
      headers['content-type'] = 'application/json';
    }
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(req.query ?? {})) {
      if (value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value]) params.append(key, String(item));
    }
    const search = params.size > 0 ? `?${params}` : '';

    let statusCode = 0;
    let responseHeaders: Record<string, string | string[] | undefined>;
    let text = '';
    let streamed: ReadItems<T> | null = null;
    const endpoint = endpointOf(req.method, req.path);
    try {
      const res = await this.pool.request({
        method: req.method,
        path: `${this.basePath}${req.path}${search}`,
        headers,
        body,
        signal: req.signal,
      });
      statusCode = res.statusCode;
      responseHeaders = res.headers;
      if (of && statusCode < 300 && isJson(res.headers) && (isLarge(res.headers) || of.skip)) {
        streamed = await itemsOfStream(res.body, of);
      } else {
        text = await res.body.text();
      }
    } catch (error) {
      if (error instanceof AnswerShapeError) throw this.shapeError(error, request, statusCode);
      // A record the decoder refused.
      if (error instanceof UnexpectedResponseError) throw error;
      this.health.record(endpoint, null);
      throw this.transportError(error, request);
    }
    const fetchedAtMs = this.clock.now();
    const freshness = freshnessOf(responseHeaders, fetchedAtMs);
    // The proxy's own answers (meta, /ping) are always fresh: they say nothing of the scheduler.
    this.health.record(endpoint, statusCode, statusCode < 300 && !req.anonymous ? freshness : undefined);
    let parsed: unknown = streamed?.rest;
    if (!streamed && isJson(responseHeaders) && text !== '') {
      try {
        parsed = JSON.parse(text);
      } catch (error) {
        throw new UnexpectedResponseError(
          `${request} answered invalid JSON (HTTP ${statusCode})`,
          { status: statusCode, message: text.slice(0, 200), slurmErrors: [], request },
          { cause: error },
        );
      }
    }
    if (statusCode >= 300) {
      const retryAfter = responseHeaders['retry-after'];
      const error = errorForResponse({
        status: statusCode,
        body: parsed,
        text,
        request,
        retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
        account: this.profile.account,
      });
      // Every request of the profile waits out the Retry-After, not just this one's retry.
      if (error instanceof RateLimitedError) this.budget.rateLimited(error.retryAfterMs);
      throw error;
    }
    const response = { status: statusCode, body: parsed, text, headers: responseHeaders, freshness };
    if (!of) return response;
    try {
      const read = streamed ?? (await itemsOfParsed(parsed, of));
      // The text is not kept beside the records: a list answer can be tens of MB.
      return { ...response, body: read.rest, text: '', items: read.items, seen: read.seen };
    } catch (error) {
      if (error instanceof AnswerShapeError) throw this.shapeError(error, request, statusCode);
      throw error;
    }
  }

  private shapeError(error: AnswerShapeError, request: string, status: number): UnexpectedResponseError {
    return new UnexpectedResponseError(
      `${request} ${error.message} (HTTP ${status})`,
      { status, message: error.message, slurmErrors: [], request },
      { cause: error },
    );
  }

  private transportError(error: unknown, request: string): SchedApiError {
    const detail = { status: null, message: (error as Error)?.message ?? String(error), slurmErrors: [], request };
    const url = this.profile.url;
    if (
      error instanceof undiciErrors.ConnectTimeoutError ||
      error instanceof undiciErrors.HeadersTimeoutError ||
      error instanceof undiciErrors.BodyTimeoutError
    ) {
      return new RequestTimeoutError(`${request} to ${url} timed out (${detail.message}); will retry`, detail, {
        cause: error,
      });
    }
    const code = (error as NodeJS.ErrnoException)?.code;
    if (isNetworkErrorCode(code) || error instanceof undiciErrors.SocketError) {
      return new NetworkError(`cannot reach the scheduler at ${url} (${code ?? detail.message})`, detail, {
        cause: error,
      });
    }
    if ((error as Error)?.name === 'AbortError') {
      return new RequestTimeoutError(`${request} was aborted`, detail, { cause: error });
    }
    return new NetworkError(`${request} to ${url} failed: ${detail.message}`, detail, { cause: error });
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
