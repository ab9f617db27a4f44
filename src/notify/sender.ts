import { Agent, request } from 'undici';
import type { WebhookDeliveryRow } from '../db/schema.js';
import { type UpstreamDetail, UpstreamError } from '../errors.js';
import { packageVersion } from '../lib/package-info.js';
import { isRetryableStatus, parseRetryAfterMs } from '../lib/retry-policy.js';
import type { Secret } from '../lib/secret.js';
import { signatureHeader } from './signature.js';
import { InwardAddressError, type ResolveAll, WEBHOOK_ALLOW_HOSTS_ENV, type WebhookTargets } from './webhook-target.js';

/**
 * Why an attempt did not deliver: an {@link UpstreamError} of a webhook receiver, whose
 * `detail.request` is `POST <origin>`. Messages name the receiver by origin only: URLs may carry tokens.
 */
export abstract class WebhookDeliveryError extends UpstreamError {
  readonly upstream = 'webhook';
}

/** Network error, time-out, 408, 429 or 5xx: another attempt may succeed. */
export class WebhookRetryableError extends WebhookDeliveryError {
  readonly code = 'SCHEDFLOW_ERR_WEBHOOK_UNAVAILABLE';
}

/** Any other answer (4xx, a redirect) or an unusable URL: trying again will not help. */
export class WebhookRefusedError extends WebhookDeliveryError {
  readonly code = 'SCHEDFLOW_ERR_WEBHOOK_REFUSED';
}

/**
 * The URL's host is the daemon's own host or network, as written or as resolved (src/notify/webhook-target.ts),
 * and the allow-list does not name it: nothing was sent, and trying again will not help.
 */
export class WebhookTargetRefusedError extends WebhookDeliveryError {
  readonly code = 'SCHEDFLOW_ERR_WEBHOOK_TARGET_REFUSED';
}

/**
 * scheme://host:port of a webhook URL, the only part of it that is logged or
 * kept in errors: path, query and user info may hold the receiver's token.
 */
export function receiverOrigin(url: string): string {
  try {
    const u = new URL(url);
    // `host` is hostname and port (the port left out when it is the scheme's default); no user info.
    return `${u.protocol}//${u.host}`;
  } catch {
    return '(invalid URL)';
  }
}

/** What a receiver answered, for an error: `POST <origin>`, its status and the first bytes it said. */
export function webhookDetail(url: string, status: number | null, said = ''): UpstreamDetail {
  return { status, message: said || null, request: `POST ${receiverOrigin(url)}` };
}

export interface WebhookSenderOptions {
  secret: Secret;
  /** Which hosts may be targets (the daemon's allow-list). */
  targets: WebhookTargets;
  /** Resolves a receiver's name to all its addresses. @defaultValue dns.lookup, the system resolver */
  resolve?: ResolveAll;
  /** One attempt's limit, from connecting to the end of the answer. @defaultValue 10000 */
  timeoutMs?: number;
}

/** What a delivery needs to be sent. */
export type OutgoingDelivery = Pick<WebhookDeliveryRow, 'id' | 'event' | 'url' | 'payload'>;

/** How much of a refusing receiver's answer is kept with the error. */
const ANSWER_EXCERPT_BYTES = 200;

/**
 * Sends webhook deliveries: one signed POST per attempt, no redirects
 * followed (a redirect to another host must not carry the signature along
 * unnoticed), a time limit on the whole exchange.
 */
export class WebhookSender {
  readonly timeoutMs: number;
  private readonly secret: Secret;
  private readonly targets: WebhookTargets;
  private readonly agent: Agent;
  private readonly userAgent = `schedflow/${packageVersion()}`;

  constructor(options: WebhookSenderOptions) {
    this.secret = options.secret;
    this.targets = options.targets;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.agent = new Agent({
      // Every connection resolves its name through the target check: what was accepted as a
      // public name may resolve inward now (DNS rebinding). Addresses written as such are
      // never looked up, and are checked in send().
      connect: { timeout: this.timeoutMs, lookup: this.targets.lookup(options.resolve) },
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
      keepAliveTimeout: 10_000,
    });
  }

  /**
   * One attempt. Resolves with the receiver's 2xx status; otherwise throws a
   * WebhookRetryableError or a WebhookRefusedError. `signal` (shutdown) aborts
   * the attempt with its reason.
   */
  async send(delivery: OutgoingDelivery, signal?: AbortSignal): Promise<number> {
    const origin = receiverOrigin(delivery.url);
    const asked = (status: number | null, said = ''): UpstreamDetail => webhookDetail(delivery.url, status, said);
    let url: URL;
    try {
      url = new URL(delivery.url);
    } catch {
      throw new WebhookRefusedError('the webhook URL is not a valid URL', asked(null));
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new WebhookRefusedError(`the webhook URL must be http or https (${url.protocol})`, asked(null));
    }
    // Again at each attempt, not only when the URL came in: a URL recorded before this check,
    // written in a pipeline file, or accepted before the allow-list lost its host.
    const refusal = this.targets.refusal(url);
    if (refusal) throw new WebhookTargetRefusedError(`not sent to ${origin}: ${refusal}`, asked(null));
    const body = JSON.stringify(delivery.payload);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': this.userAgent,
      'schedflow-event': delivery.event,
      'schedflow-delivery': delivery.id,
      'schedflow-signature': signatureHeader(body, this.secret),
    };
    // User info in the URL is sent as Basic credentials, as curl does, and not as part of the URL.
    if (url.username || url.password) {
      let pair: string;
      try {
        pair = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
      } catch {
        throw new WebhookRefusedError('the user info of the webhook URL is not valid percent-encoding', asked(null));
      }
      headers.authorization = `Basic ${Buffer.from(pair).toString('base64')}`;
      url.username = '';
      url.password = '';
    }
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const abort = signal ? AbortSignal.any([signal, timeout]) : timeout;

    let status: number;
    let retryAfter: string | string[] | undefined;
    let excerpt = '';
    try {
      const res = await request(url, { method: 'POST', headers, body, signal: abort, dispatcher: this.agent });
      status = res.statusCode;
      retryAfter = res.headers['retry-after'];
      if (status >= 200 && status < 300) {
        // The answer is not used; read it off so the connection can be reused.
        await res.body.dump({ limit: 64 * 1024 }).catch(() => {});
        return status;
      }
      excerpt = await readExcerpt(res.body);
    } catch (error) {
      if (timeout.aborted && !signal?.aborted) {
        throw new WebhookRetryableError(`${origin} did not answer within ${this.timeoutMs} ms`, asked(null), {
          cause: error,
        });
      }
      if (signal?.aborted) {
        throw new WebhookRetryableError(`the attempt to ${origin} was interrupted (${reasonOf(signal)})`, asked(null), {
          cause: error,
        });
      }
      const inward = inwardAddressIn(error);
      if (inward) {
        throw new WebhookTargetRefusedError(
          `not sent to ${origin}: ${inward.message}; webhooks are not sent to the daemon's own host or network unless ${WEBHOOK_ALLOW_HOSTS_ENV} names the host`,
          asked(null),
          { cause: error },
        );
      }
      throw new WebhookRetryableError(
        `cannot reach ${origin}: ${describeNetworkError(error, delivery.url)}`,
        asked(null),
        {
          cause: error,
        },
      );
    }

    const said = excerpt ? `: ${excerpt}` : '';
    if (isRetryableStatus(status)) {
      const retryAfterMs = parseRetryAfterMs(retryAfter);
      throw new WebhookRetryableError(`${origin} answered HTTP ${status}${said}`, asked(status, excerpt), {
        retryAfterMs,
      });
    }
    if (status >= 300 && status < 400) {
      throw new WebhookRefusedError(
        `${origin} answered HTTP ${status} (a redirect); redirects are not followed: configure the final URL`,
        asked(status, excerpt),
      );
    }
    throw new WebhookRefusedError(`${origin} refused the delivery: HTTP ${status}${said}`, asked(status, excerpt));
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/** The first bytes of a refusing answer, on one line, for the delivery's record. */
async function readExcerpt(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= ANSWER_EXCERPT_BYTES) break;
    }
  } catch {
    // The status says enough.
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks).toString('utf8').slice(0, ANSWER_EXCERPT_BYTES).replace(/\s+/g, ' ').trim();
}

/** The target check's refusal behind a failed connection (net hands it on as the socket's error, maybe inside an AggregateError). */
function inwardAddressIn(error: unknown): InwardAddressError | null {
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof InwardAddressError) return e;
    const inner = (e as { errors?: unknown[] }).errors?.find((one) => one instanceof InwardAddressError);
    if (inner instanceof InwardAddressError) return inner;
  }
  return null;
}

function reasonOf(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason.message : String(reason);
}

/** The error code and message of a failed connection, with the URL's path and query taken out. */
function describeNetworkError(error: unknown, url: string): string {
  const e = error as NodeJS.ErrnoException & { errors?: NodeJS.ErrnoException[] };
  // Node's happy-eyeballs connect fails with an AggregateError whose own message is empty.
  const code = e?.code ?? e?.errors?.[0]?.code;
  const message = (e?.message || e?.errors?.[0]?.message || String(error)).split(url).join(receiverOrigin(url));
  return code && !message.includes(code) ? `${code} ${message}` : message;
}
