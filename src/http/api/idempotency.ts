import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { History } from '../../db/history.js';
import { completeKey, purgeKeys, recordReplay, releaseKey, reserveKey } from '../../db/idempotency.js';
import type { Logger } from '../../logger.js';
import { ConflictApiError } from './api-errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** SHA-256 of the body as sent (canonical JSON), taken before validation transforms it. */
    bodyHash: string | null;
  }
  interface FastifyInstance {
    /** This local API's name on the keys it reserves: `<pid>:<uuid>`, new at each start. */
    idempotencyOwner: string;
  }
}

/** What a POST route answers; stored under its Idempotency-Key. */
export interface Answer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

export interface IdempotencyOptions {
  /**
   * The job request a stored answer is about (the job routes': its `id`). A
   * replay of such an answer is recorded on that request, so its history shows
   * the duplicate submission that was answered with it.
   */
  requestOf?: (body: unknown) => string | undefined;
}

/** Expired keys are purged this often (one indexed delete). */
const PURGE_EVERY_MS = 3600_000;

/** JSON with object keys sorted at every level, so the same body hashes the same however it was written. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * Hashes POST bodies that carry an Idempotency-Key, and purges expired keys
 * now and then. The timer is cleared when the app closes.
 */
export function registerIdempotency(app: FastifyInstance, store: History, logger: Logger): void {
  app.decorateRequest('bodyHash', null);
  app.decorate('idempotencyOwner', `${process.pid}:${randomUUID()}:${hostname()}`);
  app.addHook('preValidation', async (request) => {
    if (request.method === 'POST' && request.headers['idempotency-key'] !== undefined) {
      request.bodyHash = createHash('sha256')
        .update(canonicalJson(request.body ?? null))
        .digest('hex');
    }
  });
  const purge = async () => {
    try {
      const purged = await purgeKeys(store);
      if (purged > 0) logger.debug({ purged }, 'expired idempotency keys purged');
    } catch (error) {
      logger.warn({ err: error }, 'could not purge idempotency keys');
    }
  };
  void purge();
  const timer = setInterval(purge, PURGE_EVERY_MS);
  timer.unref();
  app.addHook('onClose', async () => clearInterval(timer));
}

/**
 * Runs a POST's work once per (token, Idempotency-Key): a repeat with the same
 * route and body gets the stored answer (`Idempotent-Replayed: true`), another
 * route or body under the key is a 409, and so is a repeat while the first is
 * still being answered. Without the header the work just runs.
 *
 * `work` gets a stable name for what it creates: the same on every retry of a
 * request that failed or was cut off half-way, so a retry finds what the first
 * attempt made instead of making it again.
 */
export async function idempotently(
  store: History,
  request: FastifyRequest,
  reply: FastifyReply,
  work: (stableId: string | null) => Promise<Answer>,
  options: IdempotencyOptions = {},
): Promise<FastifyReply> {
  const key = request.headers['idempotency-key'];
  const token = request.apiToken;
  if (typeof key !== 'string' || !token || request.bodyHash === null) return send(reply, await work(null));
  const route = `${request.method} ${request.url.split('?')[0]}`;
  const at = Date.now();
  const owner = request.server.idempotencyOwner;
  const claim = await reserveKey(store, {
    tokenId: token.id,
    key,
    route,
    bodyHash: request.bodyHash,
    at,
    owner,
    ownerGone: (other) => ownerGone(other, owner),
  });
  switch (claim.kind) {
    case 'replay': {
      const stored = claim.response as Answer;
      const requestId = options.requestOf?.(stored.body);
      if (requestId !== undefined) {
        // The record is for people reading the request's history; the client's answer matters more.
        try {
          await recordReplay(store, { requestId, tokenName: token.name, key, at });
        } catch (error) {
          request.log.warn({ requestId, err: error }, 'could not record a deduplicated submission');
        }
      }
      reply.header('idempotent-replayed', 'true');
      return send(reply, { ...stored, status: claim.status });
    }
    case 'mismatch':
      throw new ConflictApiError(
        'SCHEDFLOW_ERR_IDEMPOTENCY_KEY_REUSED',
        claim.what === 'route'
          ? `Idempotency-Key "${key}" was used for ${claim.route}; use a new key for each request`
          : `Idempotency-Key "${key}" was used with another body; use a new key for each request`,
      );
    case 'in_progress':
      throw new ConflictApiError(
        'SCHEDFLOW_ERR_IDEMPOTENCY_KEY_IN_USE',
        `a request with Idempotency-Key "${key}" is still being answered; try again shortly`,
        { retryAfterSec: 1 },
      );
    case 'reserved': {
      let answer: Answer;
      try {
        answer = await work(stableId(token.id, key, request.bodyHash, claim.reservedAt));
      } catch (error) {
        await releaseKey(store, token.id, key);
        throw error;
      }
      await completeKey(store, token.id, key, answer.status, { body: answer.body, headers: answer.headers });
      return send(reply, answer);
    }
  }
}

/**
 * Whether the local API that reserved a key is gone: an earlier start in this process (the
 * same pid, another uuid; a graceful stop drains every request, so its reservations were cut
 * off), or a process of this host that no longer runs. Another live process sharing the
 * history (separate `web` processes), or one on another host, whose processes this one cannot
 * see, may still be answering: its reservations wait for IN_PROGRESS_TIMEOUT_MS.
 */
function ownerGone(other: string, self: string): boolean {
  if (other === self) return false;
  // `pid:uuid:host`; `pid:uuid` before hosts were named, all of this host.
  const [pidText, , host] = other.split(':');
  if (host !== undefined && host !== hostname()) return false;
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    // EPERM: a process of another user has the pid now: ours is gone all the same.
    return (error as NodeJS.ErrnoException).code === 'ESRCH' || (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function send(reply: FastifyReply, answer: Answer): FastifyReply {
  if (answer.headers) reply.headers(answer.headers);
  return reply.code(answer.status).send(answer.body);
}

/** A UUID-shaped name derived from the claim (version 8: custom). */
function stableId(tokenId: string, key: string, bodyHash: string, reservedAt: number): string {
  const hex = createHash('sha256').update(`${tokenId}\0${key}\0${bodyHash}\0${reservedAt}`).digest('hex');
  const variant = ((Number.parseInt(hex.slice(16, 17), 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
