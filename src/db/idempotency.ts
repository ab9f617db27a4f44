import { and, asc, eq, lt, sql } from 'drizzle-orm';
import type { History } from './history.js';
import type { RequestReplayRow } from './schema.js';

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

/**
 * Claims a key for a request, or says what to answer instead; one transaction. Two claims of
 * one key at once (two web roles sharing the history) are decided by the key's row: the
 * second waits for the first's insert to commit, then reads it.
 */
export async function reserveKey(h: History, input: KeyInput): Promise<Reservation> {
  const t = h.t.idempotencyKeys;
  const claim = (reservedAt: number) => ({
    route: input.route,
    bodyHash: input.bodyHash,
    status: IN_PROGRESS,
    response: { reservedAt, owner: input.owner },
    createdAt: input.at,
  });
  return h.transaction(async (tx): Promise<Reservation> => {
    const inserted = await tx.run(
      tx.db
        .insert(t)
        .values({ tokenId: input.tokenId, key: input.key, ...claim(input.at) })
        .onConflictDoNothing(),
    );
    if (inserted > 0) return { kind: 'reserved', reservedAt: input.at };
    const where = and(eq(t.tokenId, input.tokenId), eq(t.key, input.key));
    const row = await tx.one(tx.forUpdate(tx.db.select().from(t).where(where)));
    // Purged between the two statements: as good as never claimed.
    if (!row) throw new Error(`idempotency key "${input.key}" vanished while being claimed; try again`);
    const ownerGone = (owner: string | undefined) => owner !== undefined && input.ownerGone(owner);
    const abandoned =
      row.createdAt < input.at - IDEMPOTENCY_TTL_MS ||
      (row.status === IN_PROGRESS &&
        (row.createdAt < input.at - IN_PROGRESS_TIMEOUT_MS || ownerGone(ownerOf(row.response))));
    if (!abandoned) {
      if (row.route !== input.route) return { kind: 'mismatch', what: 'route', route: row.route };
      if (row.bodyHash !== input.bodyHash) return { kind: 'mismatch', what: 'body', route: row.route };
      if (row.status === IN_PROGRESS) return { kind: 'in_progress' };
      return { kind: 'replay', status: row.status, response: row.response };
    }
    // An abandoned claim (not an expired key) keeps its first time: a retry is the same work.
    const takenOver = row.status === IN_PROGRESS && row.createdAt >= input.at - IDEMPOTENCY_TTL_MS;
    const reservedAt = takenOver ? (reservedAtOf(row.response) ?? input.at) : input.at;
    await tx.run(tx.db.update(t).set(claim(reservedAt)).where(where));
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

const keyOf = (h: History, tokenId: string, key: string) =>
  and(eq(h.t.idempotencyKeys.tokenId, tokenId), eq(h.t.idempotencyKeys.key, key));

/** Stores the answer of a reserved key. */
export async function completeKey(
  h: History,
  tokenId: string,
  key: string,
  status: number,
  response: unknown,
): Promise<void> {
  await h.run(
    h.db
      .update(h.t.idempotencyKeys)
      .set({ status, response })
      .where(keyOf(h, tokenId, key)),
  );
}

/**
 * Gives a reserved key up after a failure: the claim is marked abandoned (not
 * deleted), so the client's retry takes it over at once with the same
 * `reservedAt`, and work that got half done is found again rather than redone.
 */
export async function releaseKey(h: History, tokenId: string, key: string, at = Date.now()): Promise<void> {
  const t = h.t.idempotencyKeys;
  await h.run(
    h.db
      .update(t)
      .set({ createdAt: at - IN_PROGRESS_TIMEOUT_MS - 1 })
      .where(and(keyOf(h, tokenId, key), eq(t.status, IN_PROGRESS))),
  );
}

/** Deletes keys past their lifetime (an indexed range delete); returns how many. */
export function purgeKeys(h: History, now = Date.now()): Promise<number> {
  const t = h.t.idempotencyKeys;
  return h.run(h.db.delete(t).where(lt(t.createdAt, now - IDEMPOTENCY_TTL_MS)));
}

export interface ReplayInput {
  requestId: string;
  /** The token's name: its id is not kept, as a revoked token's name can be taken over. */
  tokenName: string;
  key: string;
  at: number;
}

/** Counts a POST answered with an existing request from its stored key: the first and last time, and how often. */
export async function recordReplay(h: History, input: ReplayInput): Promise<void> {
  const t = h.t.requestReplays;
  await h.run(
    h.db
      .insert(t)
      .values({ ...input, count: 1, firstAt: input.at, lastAt: input.at })
      .onConflictDoUpdate({
        target: [t.requestId, t.tokenName, t.key],
        set: { count: sql`${t.count} + 1`, lastAt: input.at },
      }),
  );
}

/** A request's deduplicated submissions, per token and key, first one first. */
export function replaysOf(h: History, requestId: string): Promise<RequestReplayRow[]> {
  const t = h.t.requestReplays;
  return h.all(h.db.select().from(t).where(eq(t.requestId, requestId)).orderBy(asc(t.firstAt)));
}
