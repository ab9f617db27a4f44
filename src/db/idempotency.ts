import { and, asc, eq, lt, sql } from 'drizzle-orm';
import type { Db } from './database.js';
import { prepared } from './prepared.js';
import { idempotencyKeys, type RequestReplayRow, requestReplays } from './schema.js';

/**
 * Queries of `Idempotency-Key`s: per token, the first answer to a POST, so a
 * client that retries (after a timeout, a lost connection) gets that answer
 * again instead of doing the work twice.
 */

/** Keys are kept this long; a key reused after that starts afresh. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;
/**
 * A reservation (the work is under way) older than this was left by a process
 * that died mid-request: the next request with the key takes it over. A reservation
 * whose owner is known to be gone (see `KeyInput.ownerGone`) is taken over at once.
 */
export const IN_PROGRESS_TIMEOUT_MS = 60_000;
/** `status` of a row whose request is still being answered. */
const IN_PROGRESS = 0;

export type Reservation =
  /**
   * The caller does the work, then `completeKey` or `releaseKey`. `reservedAt`
   * is when the key was first claimed, kept when a claim abandoned by a failed
   * or interrupted request is taken over, so work can be named after it
   * (the same request id on every retry).
   */
  | { kind: 'reserved'; reservedAt: number }
  | { kind: 'replay'; status: number; response: unknown }
  /** The key was used for another route or another body. */
  | { kind: 'mismatch'; what: 'route' | 'body'; route: string }
  | { kind: 'in_progress' };

export interface KeyInput {
  tokenId: string;
  key: string;
  /** `POST /api/v1/jobs`: method and path. */
  route: string;
  bodyHash: string;
  at: number;
  /** Who answers (one running local API); kept on the reservation. */
  owner: string;
  /**
   * Whether the owner of a reservation is gone (an earlier run of the daemon, stopped or
   * killed mid-request): its work will never finish, so a retry takes the key over at once
   * instead of answering 409 until IN_PROGRESS_TIMEOUT_MS has passed.
   */
  ownerGone: (owner: string) => boolean;
}

/** Claims a key for a request, or says what to answer instead; one transaction. */
export function reserveKey(db: Db, input: KeyInput): Reservation {
  return db.transaction((tx) => {
    const where = and(eq(idempotencyKeys.tokenId, input.tokenId), eq(idempotencyKeys.key, input.key));
    const row = tx.select().from(idempotencyKeys).where(where).get();
    const ownerGone = (owner: string | undefined) => owner !== undefined && input.ownerGone(owner);
    const abandoned =
      row &&
      (row.createdAt < input.at - IDEMPOTENCY_TTL_MS ||
        (row.status === IN_PROGRESS &&
          (row.createdAt < input.at - IN_PROGRESS_TIMEOUT_MS || ownerGone(ownerOf(row.response)))));
    if (row && !abandoned) {
      if (row.route !== input.route) return { kind: 'mismatch', what: 'route', route: row.route };
      if (row.bodyHash !== input.bodyHash) return { kind: 'mismatch', what: 'body', route: row.route };
      if (row.status === IN_PROGRESS) return { kind: 'in_progress' };
      return { kind: 'replay', status: row.status, response: row.response };
    }
    // An abandoned claim (not an expired key) keeps its first time: a retry is the same work.
    const takenOver = row && row.status === IN_PROGRESS && row.createdAt >= input.at - IDEMPOTENCY_TTL_MS;
    const reservedAt = takenOver ? (reservedAtOf(row.response) ?? input.at) : input.at;
    if (row) tx.delete(idempotencyKeys).where(where).run();
    tx.insert(idempotencyKeys)
      .values({
        tokenId: input.tokenId,
        key: input.key,
        route: input.route,
        bodyHash: input.bodyHash,
        status: IN_PROGRESS,
        response: { reservedAt, owner: input.owner },
        createdAt: input.at,
      })
      .run();
    return { kind: 'reserved', reservedAt };
  });
}

function ownerOf(response: unknown): string | undefined {
  const value = (response as { owner?: unknown } | null)?.owner;
  return typeof value === 'string' ? value : undefined;
}

function reservedAtOf(response: unknown): number | undefined {
  const value = (response as { reservedAt?: unknown } | null)?.reservedAt;
  return typeof value === 'number' ? value : undefined;
}

/** Stores the answer of a reserved key. */
export function completeKey(db: Db, tokenId: string, key: string, status: number, response: unknown): void {
  db.update(idempotencyKeys)
    .set({ status, response })
    .where(and(eq(idempotencyKeys.tokenId, tokenId), eq(idempotencyKeys.key, key)))
    .run();
}

/**
 * Gives a reserved key up after a failure: the claim is marked abandoned (not
 * deleted), so the client's retry takes it over at once with the same
 * `reservedAt`, and work that got half done is found again rather than redone.
 */
export function releaseKey(db: Db, tokenId: string, key: string, at = Date.now()): void {
  db.update(idempotencyKeys)
    .set({ createdAt: at - IN_PROGRESS_TIMEOUT_MS - 1 })
    .where(
      and(eq(idempotencyKeys.tokenId, tokenId), eq(idempotencyKeys.key, key), eq(idempotencyKeys.status, IN_PROGRESS)),
    )
    .run();
}

/** Deletes keys past their lifetime (an indexed range delete); returns how many. */
export function purgeKeys(db: Db, now = Date.now()): number {
  return db
    .delete(idempotencyKeys)
    .where(lt(idempotencyKeys.createdAt, now - IDEMPOTENCY_TTL_MS))
    .run().changes;
}

export interface ReplayInput {
  requestId: string;
  /** The token's name: its id is not kept, as a revoked token's name can be taken over. */
  tokenName: string;
  key: string;
  at: number;
}

/** Counts a POST answered with an existing request from its stored key: the first and last time, and how often. */
export function recordReplay(db: Db, input: ReplayInput): void {
  db.insert(requestReplays)
    .values({ ...input, count: 1, firstAt: input.at, lastAt: input.at })
    .onConflictDoUpdate({
      target: [requestReplays.requestId, requestReplays.tokenName, requestReplays.key],
      set: { count: sql`${requestReplays.count} + 1`, lastAt: input.at },
    })
    .run();
}

/** A request's deduplicated submissions, per token and key, first one first. */
export function replaysOf(db: Db, requestId: string): RequestReplayRow[] {
  return prepared(db, 'replays.ofRequest', () =>
    db
      .select()
      .from(requestReplays)
      .where(eq(requestReplays.requestId, sql.placeholder('requestId')))
      .orderBy(asc(requestReplays.firstAt))
      .prepare(),
  ).all({ requestId });
}
