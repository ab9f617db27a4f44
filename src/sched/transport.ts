import { Pool, errors as undiciErrors } from 'undici';
import { backoffDelayMs, sleep } from '../lib/backoff.js';
import type { Logger } from '../logger.js';
import type { Credentials } from './credentials.js';
import { type Freshness, freshnessOf } from './freshness.js';
import type { Profile } from './profile.js';
import { RequestBudget, type RequestPriority } from './request-budget.js';
import { errorForResponse } from './response-errors.js';
import {
  AuthenticationError,
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

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'EPIPE']);

/**
 * The only place schedflow speaks HTTP to a scheduler: a keep-alive pool with
 * bounded connections and timeouts, the profile's request budget, typed errors,
 * and retries with backoff for what is safe to repeat.
 */
export class SchedTransport {
  private readonly pool: Pool;
  private readonly budget: RequestBudget;
  private readonly basePath: string;

  constructor(
    readonly profile: Profile,
    private readonly credentials: Credentials,
    private readonly logger: Logger,
    /** Where requests and answers are counted; the client registry keeps one per profile across reconnects. */
    readonly health: UpstreamHealth = new UpstreamHealth(profile.name),
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
    this.budget = new RequestBudget(profile.rateLimit.capacity, profile.rateLimit.refillPerSecond);
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
    const retry = req.retry ?? req.method === 'GET';
    const { attempts, baseDelayMs, maxDelayMs } = this.profile.retries;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once(req);
      } catch (error) {
        const e = error as SchedApiError;
        if (!retry || !e.retryable || attempt + 1 >= attempts) throw e;
        const retryAfter = e instanceof RateLimitedError ? e.retryAfterMs : null;
        const delay = backoffDelayMs(attempt, { baseDelayMs, maxDelayMs }, retryAfter);
        this.logger.warn(
          { request: this.describe(req), attempt: attempt + 1, delayMs: delay, code: e.code, status: e.status },
          'scheduler request failed; retrying',
        );
        await sleep(delay, req.signal);
      }
    }
  }

  /**
   * One attempt, no retries; but a MUNGE credential can expire in flight, and a 401 means
   * Slurm never saw the request (not even a submission), so it is sent once more with a fresh one.
   */
  async once(req: TransportRequest): Promise<TransportResponse> {
    try {
      return await this.sendOnce(req);
    } catch (error) {
      if (error instanceof AuthenticationError && this.credentials.type === 'munge') return await this.sendOnce(req);
      throw error;
    }
  }

  private async sendOnce(req: TransportRequest): Promise<TransportResponse> {
    await this.budget.acquire(req.priority);
    const request = this.describe(req);
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

    let statusCode: number;
    let responseHeaders: Record<string, string | string[] | undefined>;
    let text: string;
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
      text = await res.body.text();
    } catch (error) {
      this.health.record(endpoint, null);
      throw this.transportError(error, request);
    }
    const fetchedAtMs = Date.now();
    const freshness = freshnessOf(responseHeaders, fetchedAtMs);
    // The proxy's own answers (meta, /ping) are always fresh: they say nothing of the scheduler.
    this.health.record(endpoint, statusCode, statusCode < 300 && !req.anonymous ? freshness : undefined);
    const isJson = String(responseHeaders['content-type'] ?? '').includes('json');
    let parsed: unknown;
    if (isJson && text !== '') {
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
    return { status: statusCode, body: parsed, text, headers: responseHeaders, freshness };
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
    if ((code && NETWORK_CODES.has(code)) || error instanceof undiciErrors.SocketError) {
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
