import { Pool, errors as undiciErrors } from 'undici';
import { z } from 'zod';
import type { UpstreamDetail } from '../errors.js';
import { packageVersion } from '../lib/package-info.js';
import { isNetworkErrorCode, isRetryableStatus, parseRetryAfterMs } from '../lib/retry-policy.js';
import type { Secret } from '../lib/secret.js';
import {
  LlmAuthError,
  type LlmError,
  LlmModelError,
  LlmRateLimitedError,
  LlmRequestRefusedError,
  LlmTimeoutError,
  LlmUnavailableError,
  LlmUnexpectedResponseError,
  LlmUnreachableError,
} from './llm-errors.js';
import { baseUrlOf, type LlmSettings } from './llm-settings.js';

/** One message of a conversation (the contract's `role` and `content`). */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** The body of `POST /v1/chat/completions` schedflow sends (a CreateChatCompletionRequest). */
export interface ChatCompletionBody {
  model: string;
  messages: ChatMessage[];
  temperature: number;
  max_tokens?: number;
  max_completion_tokens?: number;
}

export interface ChatResult {
  text: string;
  /** The model that answered, as the endpoint names it. */
  model: string;
  /** Token counts from the answer's `usage`; null when the endpoint sent none. */
  promptTokens: number | null;
  completionTokens: number | null;
  latencyMs: number;
  /** The completion stopped at the output bound (`finish_reason: length`). */
  truncated: boolean;
}

/** The members of a chat completion schedflow reads; anything else is ignored. */
const completionSchema = z.object({
  model: z.string().optional(),
  choices: z
    .array(
      z.object({
        message: z.object({ content: z.string().nullable().optional() }),
        finish_reason: z.string().nullable().optional(),
      }),
    )
    .min(1),
  usage: z
    .object({ prompt_tokens: z.number().int().nonnegative(), completion_tokens: z.number().int().nonnegative() })
    .partial()
    .nullable()
    .optional(),
});

const modelsSchema = z.object({ data: z.array(z.object({ id: z.string() })) });

/** Statuses with which an endpoint says it has no model list (the contract does not promise one). */
const NO_MODEL_LIST = new Set([404, 405, 501]);

/**
 * The chat-completions client: one keep-alive pool to `{llm_url}`, the API key
 * as a bearer token (revealed only into the header), typed errors that say
 * whether trying again can help. One call is one attempt: the caller (the
 * summarize queue) retries with backoff and honours `retryAfterMs`.
 */
export class LlmClient {
  private readonly pool: Pool;
  private readonly basePath: string;
  readonly baseUrl: string;
  private readonly userAgent = `schedflow/${packageVersion()}`;

  constructor(
    readonly settings: Omit<LlmSettings, 'apiKey' | 'apiKeyFile'>,
    private readonly apiKey: Secret,
  ) {
    this.baseUrl = baseUrlOf(settings.url);
    const url = new URL(this.baseUrl);
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.pool = new Pool(url.origin, {
      connections: 8,
      keepAliveTimeout: 30_000,
      connect: { timeout: Math.min(10_000, settings.timeoutMs) },
      headersTimeout: settings.timeoutMs,
      bodyTimeout: settings.timeoutMs,
    });
  }

  get model(): string {
    return this.settings.model;
  }

  /** The request body for these messages: model, messages, temperature and the output bound. */
  body(messages: ChatMessage[]): ChatCompletionBody {
    return {
      model: this.settings.model,
      messages,
      temperature: this.settings.temperature,
      [this.settings.maxTokensField]: this.settings.maxOutputTokens,
    };
  }

  /** One chat completion; throws an LlmError. */
  async chat(messages: ChatMessage[], options: { signal?: AbortSignal } = {}): Promise<ChatResult> {
    const request = 'POST /v1/chat/completions';
    const started = performance.now();
    const res = await this.send('POST', '/v1/chat/completions', this.body(messages), options.signal);
    const latencyMs = Math.round(performance.now() - started);
    if (res.status === 404) {
      const detail = this.detail(res, request);
      throw new LlmModelError(
        `the LLM endpoint at ${this.baseUrl} does not serve model "${this.model}" (HTTP 404${detail.message ? `: ${detail.message}` : ''}); set SCHEDFLOW_LLM_MODEL to one of its models (GET ${this.baseUrl}/v1/models lists them)`,
        detail,
        this.model,
        null,
      );
    }
    this.throwForStatus(res, request);
    const parsed = completionSchema.safeParse(res.json);
    if (!parsed.success) {
      throw new LlmUnexpectedResponseError(
        `${request} at ${this.baseUrl} answered HTTP ${res.status} without a chat completion (${parsed.error.issues[0]?.path.join('.') || 'body'}: ${parsed.error.issues[0]?.message ?? 'not JSON'})`,
        this.detail(res, request),
      );
    }
    const choice = parsed.data.choices[0];
    const text = choice?.message.content?.trim() ?? '';
    if (!text) {
      throw new LlmUnexpectedResponseError(
        `${request} at ${this.baseUrl} answered a completion without text (finish_reason ${choice?.finish_reason ?? 'none'})`,
        this.detail(res, request),
      );
    }
    return {
      text,
      model: parsed.data.model ?? this.model,
      promptTokens: parsed.data.usage?.prompt_tokens ?? null,
      completionTokens: parsed.data.usage?.completion_tokens ?? null,
      latencyMs,
      truncated: choice?.finish_reason === 'length',
    };
  }

  /** The endpoint's models (`GET /v1/models`), or null when it does not offer the list. */
  async listModels(options: { signal?: AbortSignal } = {}): Promise<string[] | null> {
    const request = 'GET /v1/models';
    const res = await this.send('GET', '/v1/models', undefined, options.signal);
    if (NO_MODEL_LIST.has(res.status)) return null;
    this.throwForStatus(res, request);
    const parsed = modelsSchema.safeParse(res.json);
    if (!parsed.success) {
      throw new LlmUnexpectedResponseError(
        `${request} at ${this.baseUrl} answered HTTP ${res.status} without a model list`,
        this.detail(res, request),
      );
    }
    return parsed.data.data.map((m) => m.id);
  }

  /**
   * Checks the configured model against `GET /v1/models` when the endpoint
   * offers it. Throws LlmModelError naming the models it has when the model
   * is not among them; returns the list (null when there is none to check).
   */
  async checkModel(options: { signal?: AbortSignal } = {}): Promise<string[] | null> {
    const models = await this.listModels(options);
    if (models === null || models.includes(this.model)) return models;
    throw new LlmModelError(
      `the LLM endpoint at ${this.baseUrl} has no model "${this.model}"; it offers ${models.length ? models.map((m) => `"${m}"`).join(', ') : 'no models'}: set SCHEDFLOW_LLM_MODEL to one of them`,
      { status: 200, message: null, request: 'GET /v1/models' },
      this.model,
      models,
    );
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private async send(
    method: 'GET' | 'POST',
    path: string,
    body: unknown,
    signal: AbortSignal | undefined,
  ): Promise<{ status: number; json: unknown; text: string; headers: Record<string, string | string[] | undefined> }> {
    const request = `${method} ${path}`;
    // One deadline for the whole call; the caller's signal (shutdown) aborts it too.
    const deadline = AbortSignal.timeout(this.settings.timeoutMs);
    const combined = signal ? AbortSignal.any([signal, deadline]) : deadline;
    const headers: Record<string, string> = {
      accept: 'application/json',
      authorization: `Bearer ${this.apiKey.reveal()}`,
      'user-agent': this.userAgent,
    };
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      const res = await this.pool.request({
        method,
        path: `${this.basePath}${path}`,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: combined,
      });
      const text = await res.body.text();
      let json: unknown;
      try {
        json = text ? JSON.parse(text) : undefined;
      } catch {
        json = undefined;
      }
      return { status: res.statusCode, json, text, headers: res.headers };
    } catch (error) {
      if (signal?.aborted) throw signal.reason ?? error;
      throw this.transportError(error, request, deadline.aborted);
    }
  }

  private throwForStatus(
    res: { status: number; json: unknown; text: string; headers: Record<string, string | string[] | undefined> },
    request: string,
  ): void {
    const { status } = res;
    if (status >= 200 && status < 300) return;
    const detail = this.detail(res, request);
    const said = detail.message ? `: ${detail.message}` : '';
    if (status === 401 || status === 403) {
      throw new LlmAuthError(
        `the LLM endpoint at ${this.baseUrl} refused the API key (HTTP ${status}${said}); check SCHEDFLOW_LLM_API_KEY_FILE (or SCHEDFLOW_LLM_API_KEY): a key comes from the service portal and needs an approved allocation`,
        detail,
      );
    }
    if (status === 429) {
      const wait = parseRetryAfterMs(res.headers['retry-after']);
      throw new LlmRateLimitedError(
        `the LLM endpoint at ${this.baseUrl} is rate limiting (HTTP 429${said})${wait !== null ? `; retry after ${Math.ceil(wait / 1000)} s` : ''}`,
        detail,
        { retryAfterMs: wait },
      );
    }
    if (status === 408) {
      throw new LlmTimeoutError(`the LLM endpoint at ${this.baseUrl} timed out the request (HTTP 408${said})`, detail);
    }
    // The policy's other retryable statuses: any 5xx.
    if (isRetryableStatus(status)) {
      throw new LlmUnavailableError(`the LLM endpoint at ${this.baseUrl} failed (HTTP ${status}${said})`, detail);
    }
    if (status >= 300 && status < 400) {
      const location = res.headers.location;
      throw new LlmRequestRefusedError(
        `the LLM endpoint at ${this.baseUrl} redirects (HTTP ${status}${location ? ` to ${String(location).split('?')[0]}` : ''}); set SCHEDFLOW_LLM_URL to the final address`,
        detail,
      );
    }
    throw new LlmRequestRefusedError(
      `the LLM endpoint at ${this.baseUrl} refused ${request} (HTTP ${status}${said})`,
      detail,
    );
  }

  /** The endpoint's own message: OpenAI's `error.message`, or a flat `message`/`detail`, or the text. */
  private detail(res: { status: number; json: unknown; text: string }, request: string): UpstreamDetail {
    const body = res.json as
      | { error?: { message?: unknown } | string; message?: unknown; detail?: unknown }
      | undefined;
    const candidates = [
      typeof body?.error === 'object' ? body.error?.message : body?.error,
      body?.message,
      body?.detail,
    ];
    const found = candidates.find((c): c is string => typeof c === 'string' && c.length > 0);
    const message = found ?? (res.json === undefined && res.text ? res.text.slice(0, 200) : null);
    return { status: res.status, message: message ? message.slice(0, 500) : null, request };
  }

  private transportError(error: unknown, request: string, timedOut: boolean): LlmError {
    const message = (error as Error)?.message ?? String(error);
    const detail: UpstreamDetail = { status: null, message, request };
    if (
      timedOut ||
      error instanceof undiciErrors.HeadersTimeoutError ||
      error instanceof undiciErrors.BodyTimeoutError ||
      error instanceof undiciErrors.ConnectTimeoutError
    ) {
      return new LlmTimeoutError(
        `the LLM endpoint at ${this.baseUrl} did not answer ${request} within ${this.settings.timeoutMs} ms`,
        detail,
        { cause: error },
      );
    }
    const code = (error as NodeJS.ErrnoException)?.code ?? ((error as Error)?.cause as NodeJS.ErrnoException)?.code;
    const network =
      isNetworkErrorCode(code) ||
      error instanceof undiciErrors.SocketError ||
      error instanceof undiciErrors.ClientDestroyedError;
    return new LlmUnreachableError(
      `cannot reach the LLM endpoint at ${this.baseUrl} (${code ?? message})${network ? ': the service is reachable only from the institution’s network, on site or through its VPN; connect to the VPN (summaries are retried, and a template summary is stored meanwhile)' : ''}`,
      detail,
      { cause: error },
    );
  }
}
