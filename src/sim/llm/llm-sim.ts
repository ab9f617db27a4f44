import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from '../../logger.js';
import { SimConfigError } from '../sim-config.js';
import { boundText, completionText, countTokens, MESSAGE_OVERHEAD_TOKENS } from './completion.js';

/**
 * The simulator's OpenAI-compatible endpoint (the local language-model
 * service of the contract `001`): `GET /v1/models` and `POST
 * /v1/chat/completions` with its own API keys, deterministic completions, and
 * faults switched by `PUT /_sim/llm` (with the admin token) for tests and demos.
 */

export interface LlmSimSettings {
  /** Models served; the first is the demo's. */
  models: string[];
  /** Serve `GET /v1/models` (the contract does not promise it; some endpoints lack it). */
  listModels: boolean;
}

/** What the next answers do: `ok`, the connection reset (`down`), 429, 500, or a delay (`slow`). */
export type LlmFault =
  | { mode: 'ok' }
  | { mode: 'down' }
  | { mode: '429'; retryAfterSec: number }
  | { mode: '500' }
  | { mode: 'slow'; delayMs: number };

/** A request the endpoint received, as the tests inspect it (never the key). */
export interface ReceivedLlmRequest {
  at: number;
  method: string;
  path: string;
  /** True when it carried a valid API key. */
  authorized: boolean;
  body: unknown;
}

const KEEP_RECEIVED = 1000;

/** Reads an API keys file (one key a line), refusing one other users can read. */
export function loadLlmKeysFile(path: string): Set<string> {
  try {
    if ((statSync(path).mode & 0o077) !== 0) {
      throw new SimConfigError(`LLM keys file ${path} is readable by other users; run: chmod 600 ${path}`);
    }
    const keys = readFileSync(path, 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    if (keys.length === 0) throw new SimConfigError(`LLM keys file ${path} holds no key`);
    return new Set(keys);
  } catch (error) {
    if (error instanceof SimConfigError) throw error;
    throw new SimConfigError(`cannot read LLM keys file ${path}: ${(error as Error).message}`);
  }
}

function sameSecret(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** An OpenAI-style error body. */
function openAiError(reply: FastifyReply, status: number, message: string, type: string, code: string | null) {
  return reply.code(status).send({ error: { message, type, param: null, code } });
}

export class LlmSimulator {
  fault: LlmFault = { mode: 'ok' };
  /** Answers left with the current fault before it goes back to `ok`; null: until switched. */
  private faultTimes: number | null = null;
  readonly received: ReceivedLlmRequest[] = [];
  readonly stats = { requests: 0, completions: 0, inFlight: 0, maxInFlight: 0 };
  /** Delays of slow answers, ended early when the server closes. */
  private readonly waiting = new Set<() => void>();

  constructor(
    private readonly keys: ReadonlySet<string>,
    readonly settings: LlmSimSettings,
    private readonly logger: Logger,
  ) {}

  /** Switches the fault; `times` limits it to that many answers. */
  setFault(fault: LlmFault, times: number | null = null): void {
    this.fault = fault;
    this.faultTimes = times;
    this.logger.warn({ llm: fault.mode, times }, 'simulated LLM endpoint switched');
  }

  /** Forgets the received requests and the in-flight high-water mark. */
  resetRecord(): void {
    this.received.length = 0;
    this.stats.maxInFlight = this.stats.inFlight;
    this.stats.requests = 0;
    this.stats.completions = 0;
  }

  private takeFault(): LlmFault {
    const fault = this.fault;
    if (fault.mode !== 'ok' && this.faultTimes !== null) {
      this.faultTimes -= 1;
      if (this.faultTimes <= 0) {
        this.fault = { mode: 'ok' };
        this.faultTimes = null;
      }
    }
    return fault;
  }

  private authorized(req: FastifyRequest): boolean {
    const header = req.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer (.+)$/.exec(header) : null;
    if (!match?.[1]) return false;
    const given = match[1].trim();
    let ok = false;
    // Every key is compared, so the time taken does not tell which one nearly matched.
    for (const key of this.keys) ok = sameSecret(given, key) || ok;
    return ok;
  }

  private record(req: FastifyRequest, authorized: boolean): void {
    this.received.push({ at: Date.now(), method: req.method, path: req.url, authorized, body: req.body ?? null });
    if (this.received.length > KEEP_RECEIVED) this.received.shift();
  }

  private delay(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiting.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiting.add(done);
    });
  }

  /** Ends every delayed answer now (the server is closing). */
  releaseWaiting(): void {
    for (const done of [...this.waiting]) done();
  }

  /**
   * Applies the fault of this answer. Returns true when it answered (or
   * dropped the connection) itself.
   */
  private async applyFault(req: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    const fault = this.takeFault();
    switch (fault.mode) {
      case 'ok':
        return false;
      case 'down':
        // As an endpoint behind a VPN looks from outside: the connection goes away.
        reply.hijack();
        req.raw.socket.destroy();
        return true;
      case '429':
        reply.header('retry-after', String(fault.retryAfterSec));
        openAiError(reply, 429, 'Rate limit reached for requests; try again later', 'rate_limit_exceeded', null);
        return true;
      case '500':
        openAiError(reply, 500, 'The server had an error while processing your request', 'server_error', null);
        return true;
      case 'slow':
        await this.delay(fault.delayMs);
        return false;
    }
  }

  register(app: FastifyInstance): void {
    app.addHook('preClose', async () => this.releaseWaiting());

    app.get('/v1/models', async (req, reply) => {
      const authorized = this.authorized(req);
      this.record(req, authorized);
      if (!this.settings.listModels) return openAiError(reply, 404, 'Not Found', 'invalid_request_error', null);
      if (!authorized) return this.unauthorized(req, reply);
      if (await this.applyFault(req, reply)) return reply;
      return {
        object: 'list',
        data: this.settings.models.map((id) => ({
          id,
          object: 'model',
          created: 1_700_000_000,
          owned_by: 'schedflow-sim',
        })),
      };
    });

    app.post<{ Body: unknown }>('/v1/chat/completions', async (req, reply) => {
      const authorized = this.authorized(req);
      this.record(req, authorized);
      this.stats.requests += 1;
      if (!authorized) return this.unauthorized(req, reply);
      this.stats.inFlight += 1;
      this.stats.maxInFlight = Math.max(this.stats.maxInFlight, this.stats.inFlight);
      try {
        if (await this.applyFault(req, reply)) return reply;
        return this.complete(req.body, reply);
      } finally {
        this.stats.inFlight -= 1;
      }
    });
  }

  private unauthorized(req: FastifyRequest, reply: FastifyReply) {
    const missing = !req.headers.authorization;
    return openAiError(
      reply,
      401,
      missing
        ? 'You did not provide an API key: send Authorization: Bearer <API_KEY>'
        : 'Incorrect API key provided; keys are issued by the service portal',
      'invalid_request_error',
      missing ? 'missing_api_key' : 'invalid_api_key',
    );
  }

  private complete(body: unknown, reply: FastifyReply) {
    const b = body as {
      model?: unknown;
      messages?: unknown;
      temperature?: unknown;
      max_tokens?: unknown;
      max_completion_tokens?: unknown;
    } | null;
    if (!b || typeof b !== 'object') {
      return openAiError(reply, 400, 'the body must be a JSON object', 'invalid_request_error', null);
    }
    if (typeof b.model !== 'string' || !this.settings.models.includes(b.model)) {
      return openAiError(
        reply,
        404,
        `The model \`${String(b.model)}\` does not exist or you do not have access to it.`,
        'invalid_request_error',
        'model_not_found',
      );
    }
    const messages = b.messages;
    if (
      !Array.isArray(messages) ||
      messages.length === 0 ||
      !messages.every((m) => m && typeof m === 'object' && typeof m.role === 'string' && typeof m.content === 'string')
    ) {
      return openAiError(
        reply,
        400,
        'messages must be a non-empty array of { role, content } with string content',
        'invalid_request_error',
        null,
      );
    }
    if (b.temperature !== undefined && (typeof b.temperature !== 'number' || b.temperature < 0 || b.temperature > 2)) {
      return openAiError(reply, 400, 'temperature must be a number from 0 to 2', 'invalid_request_error', null);
    }
    const bound = b.max_completion_tokens ?? b.max_tokens;
    if (bound !== undefined && bound !== null && (!Number.isInteger(bound) || (bound as number) < 1)) {
      return openAiError(reply, 400, 'the token bound must be a positive integer', 'invalid_request_error', null);
    }
    const typed = messages as { role: string; content: string }[];
    const { text, truncated } = boundText(completionText(typed), (bound as number | undefined) ?? null);
    const promptTokens = typed.reduce((sum, m) => sum + countTokens(m.content) + MESSAGE_OVERHEAD_TOKENS, 0);
    const completionTokens = countTokens(text);
    this.stats.completions += 1;
    return {
      id: `chatcmpl-${createHash('sha256').update(JSON.stringify(b)).digest('hex').slice(0, 24)}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: b.model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: text, refusal: null, annotations: [] },
          logprobs: null,
          finish_reason: truncated ? 'length' : 'stop',
        },
      ],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
      },
      system_fingerprint: 'schedflow-sim',
    };
  }

  /** Admin routes under /_sim/llm (the server's admin hook keeps them to holders of its admin token). */
  registerAdmin(app: FastifyInstance, prefix: string): void {
    app.get(`${prefix}/llm`, async () => ({ fault: this.fault, stats: this.stats, models: this.settings.models }));
    app.get(`${prefix}/llm/requests`, async () => ({ requests: this.received }));
    app.delete(`${prefix}/llm/requests`, async () => {
      this.resetRecord();
      return { ok: true };
    });
    app.put<{ Body: unknown }>(`${prefix}/llm`, async (req, reply) => {
      const body = (req.body ?? {}) as { mode?: unknown; retryAfterSec?: unknown; delayMs?: unknown; times?: unknown };
      const times = body.times === undefined ? null : Number(body.times);
      if (times !== null && !(Number.isInteger(times) && times > 0)) {
        return reply.code(400).send({ error: 'Bad Request', message: 'times must be a positive whole number' });
      }
      switch (body.mode) {
        case 'ok':
        case 'down':
        case '500':
          this.setFault({ mode: body.mode }, times);
          break;
        case '429':
          this.setFault({ mode: '429', retryAfterSec: Number(body.retryAfterSec ?? 1) }, times);
          break;
        case 'slow':
          this.setFault({ mode: 'slow', delayMs: Number(body.delayMs ?? 2000) }, times);
          break;
        default:
          return reply
            .code(400)
            .send({ error: 'Bad Request', message: 'mode must be one of ok, down, 429, 500, slow' });
      }
      return { fault: this.fault };
    });
  }
}
