import { and, count, eq, gte, inArray, isNull, min, notInArray, placeholder, sql } from 'drizzle-orm';
import type { History } from './history.js';
import { TERMINAL_REQUEST_STATES } from './schema.js';

/**
 * Queries of a token's bindings and quotas (src/access/quota.ts decides with them). Counted in
 * the transaction that records the request, after {@link lockTokenQuotas}: what they count
 * cannot change before that transaction commits.
 */

/** What a live token allows: read in the recording transaction, so a change counts from the next request. */
export interface TokenLimitsRow {
  owner: string;
  profiles: string[] | null;
  maxInFlight: number | null;
  maxPerDay: number | null;
}

/** Prepared once: read for every request a token makes. */
export async function tokenLimitsByName(h: History, name: string): Promise<TokenLimitsRow | undefined> {
  const t = h.t.apiTokens;
  const rows = await h.prepared(
    'quotas.tokenLimitsByName',
    () =>
      h.db
        .select({ owner: t.owner, profiles: t.profiles, maxInFlight: t.maxInFlight, maxPerDay: t.maxPerDay })
        .from(t)
        .where(and(eq(t.name, placeholder('name')), isNull(t.revokedAt)))
        .limit(1),
    { name },
  );
  return rows[0];
}

/**
 * Serialises the quota checks of these tokens' requests until the transaction ends: on
 * PostgreSQL, a transaction-scoped advisory lock per token (other hosts, and this daemon's
 * other commits, record requests at the same time), taken in name order so two transactions
 * never wait for each other's. SQLite's write transactions have the database to themselves.
 */
export async function lockTokenQuotas(h: History, names: readonly string[]): Promise<void> {
  if (h.dialect !== 'postgres') return;
  for (const name of [...new Set(names)].sort()) {
    // The two-key form, in a class of its own: the migration lock uses the one-key form.
    await h.rows(sql`select pg_advisory_xact_lock(${QUOTA_LOCK_CLASS}, hashtext(${name}))`);
  }
}

/** The advisory lock class of quota checks (an arbitrary int4: "sfq" in ASCII). */
const QUOTA_LOCK_CLASS = 0x736671;

/**
 * Requests of `owner` made by one of `actors` that have not ended, a pipeline run's steps
 * aside (they are the run's, src/access/quota.ts). `lost` is not terminal (its
 * end is not known), so it counts. Read through the (owner, state) index: a token's requests
 * are its owner's.
 */
export async function inFlightCount(h: History, q: { owner: string; actors: readonly string[] }): Promise<number> {
  const t = h.t.jobRequests;
  const row = await h.one(
    h.db
      .select({ n: count() })
      .from(t)
      .where(
        and(
          eq(t.owner, q.owner),
          notInArray(t.state, [...TERMINAL_REQUEST_STATES]),
          inArray(t.actor, [...q.actors]),
          isNull(t.runId),
        ),
      ),
  );
  return row?.n ?? 0;
}

/** Requests of `owner` made by one of `actors` (steps aside) accepted at or after `since`, and when the oldest of them was. */
export async function acceptedSince(
  h: History,
  q: { owner: string; actors: readonly string[]; since: number },
): Promise<{ count: number; oldestAt: number | null }> {
  const t = h.t.jobRequests;
  const row = await h.one(
    h.db
      .select({ n: count(), oldest: min(t.createdAt) })
      .from(t)
      .where(and(eq(t.owner, q.owner), gte(t.createdAt, q.since), inArray(t.actor, [...q.actors]), isNull(t.runId))),
  );
  return {
    count: row?.n ?? 0,
    oldestAt: row?.oldest === null || row?.oldest === undefined ? null : Number(row.oldest),
  };
}
