import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { and, eq, isNull, lt, or } from 'drizzle-orm';
import { ConfigError } from '../errors.js';
import { appendAudit } from './audit.js';
import { connectionOf } from './database.js';
import type { History } from './history.js';
import type { ApiScope, ApiTokenRow } from './schema.js';

/**
 * Queries of local API tokens. A token is `sfa_` and 32 random bytes
 * (base64url); only its SHA-256 is stored, so the history file never holds a
 * usable token, and the token is shown once, when it is made.
 */

export const TOKEN_PREFIX = 'sfa_';

/** The stored form of a token: hex SHA-256 of the whole token text. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A token row without its hash: what listing and the API see. */
export type TokenInfo = Omit<ApiTokenRow, 'hash'>;

export interface CreatedToken {
  token: string;
  info: TokenInfo;
}

/**
 * Who changed the token table, for the audit row written in the change's transaction
 * (`token.create`, `token.update`, `token.revoke`). @defaultValue the daemon (`schedflow`)
 */
export interface TokenAudit {
  actor: string;
  httpRequestId?: string | null;
}

const DAEMON = 'schedflow';

type TokenLimits = Pick<ApiTokenRow, 'owner' | 'scopes' | 'profiles' | 'maxInFlight' | 'maxPerDay'>;

/** What a token allows, as the audit row's detail says it (never the token itself). */
function limitsOf(t: TokenLimits): [string, string][] {
  return [
    ['owner', t.owner],
    ['scopes', t.scopes.join(',')],
    ['profiles', t.profiles === null ? 'any' : t.profiles.join(',')],
    ['max_in_flight', String(t.maxInFlight ?? 'none')],
    ['max_per_day', String(t.maxPerDay ?? 'none')],
  ];
}

const limitsText = (t: TokenLimits): string =>
  limitsOf(t)
    .map(([key, value]) => `${key}=${value}`)
    .join(' ');

/** `max_in_flight: none -> 5; owner: lab-a -> lab-b`: what an update changed. */
function limitsChange(before: TokenLimits, after: TokenLimits): string {
  const was = new Map(limitsOf(before));
  const changed = limitsOf(after)
    .filter(([key, value]) => was.get(key) !== value)
    .map(([key, value]) => `${key}: ${was.get(key)} -> ${value}`);
  return changed.length ? changed.join('; ') : 'nothing changed';
}

/**
 * Makes a token. A name in use by a live token is refused; the name of a
 * revoked one is taken over (the revoked row is deleted), so names can be reused.
 */
export async function createToken(
  h: History,
  input: {
    name: string;
    scopes: ApiScope[];
    /** @defaultValue the token's name */
    owner?: string;
    /** The profiles its requests may name; null or absent: any. */
    profiles?: string[] | null;
    maxInFlight?: number | null;
    maxPerDay?: number | null;
    at?: number;
    audit?: TokenAudit;
  },
): Promise<CreatedToken> {
  const token = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
  const at = input.at ?? Date.now();
  const scopes = [...new Set(input.scopes)];
  const t = h.t.apiTokens;
  const row = await h.transaction(async (tx) => {
    const existing = await tx.one(tx.db.select().from(t).where(eq(t.name, input.name)));
    if (existing && existing.revokedAt === null) {
      throw new ConfigError(`a token named "${input.name}" exists: revoke it first, or pick another name`);
    }
    if (existing) await tx.run(tx.db.delete(t).where(eq(t.id, existing.id)));
    const values = {
      id: randomUUID(),
      name: input.name,
      hash: hashToken(token),
      scopes,
      owner: input.owner ?? input.name,
      profiles: input.profiles ?? null,
      maxInFlight: input.maxInFlight ?? null,
      maxPerDay: input.maxPerDay ?? null,
      createdAt: at,
    };
    await tx.run(tx.db.insert(t).values(values));
    await appendAudit(tx, {
      at,
      actor: input.audit?.actor ?? DAEMON,
      owner: values.owner,
      action: 'token.create',
      target: `token:${input.name}`,
      outcome: 'ok',
      httpRequestId: input.audit?.httpRequestId ?? null,
      detail: limitsText(values),
    });
    return { ...values, lastUsedAt: null, revokedAt: null };
  });
  forgetTokenRows(h);
  return { token, info: withoutHash(row) };
}

export async function listTokens(h: History): Promise<TokenInfo[]> {
  return (await h.all(h.db.select().from(h.t.apiTokens).orderBy(h.t.apiTokens.createdAt))).map(withoutHash);
}

/** Revokes a live token by name; false when there is no live token of that name. */
export async function revokeToken(h: History, name: string, at = Date.now(), audit?: TokenAudit): Promise<boolean> {
  const t = h.t.apiTokens;
  const changed = await h.transaction(async (tx) => {
    const live = await tx.one(
      tx.forUpdate(
        tx.db
          .select({ owner: t.owner })
          .from(t)
          .where(and(eq(t.name, name), isNull(t.revokedAt)))
          .limit(1),
      ),
    );
    if (!live) return false;
    await tx.run(
      tx.db
        .update(t)
        .set({ revokedAt: at })
        .where(and(eq(t.name, name), isNull(t.revokedAt))),
    );
    await appendAudit(tx, {
      at,
      actor: audit?.actor ?? DAEMON,
      owner: live.owner,
      action: 'token.revoke',
      target: `token:${name}`,
      outcome: 'ok',
      httpRequestId: audit?.httpRequestId ?? null,
    });
    return true;
  });
  forgetTokenRows(h);
  return changed;
}

/** What `tokens update` changes; an absent member is left as it is. */
export interface TokenChange {
  owner?: string;
  scopes?: ApiScope[];
  /** null: any profile. */
  profiles?: string[] | null;
  /** null: no limit. */
  maxInFlight?: number | null;
  maxPerDay?: number | null;
}

/**
 * Changes a live token's owner, scopes, bindings or quotas, keeping the token itself: its next
 * request is let in (or refused) by what it allows now. Null when there is no live token of
 * that name. The audit row's detail says what changed, from what to what.
 */
export async function updateToken(
  h: History,
  name: string,
  change: TokenChange,
  options: { at?: number; audit?: TokenAudit } = {},
): Promise<TokenInfo | null> {
  const t = h.t.apiTokens;
  const at = options.at ?? Date.now();
  const updated = await h.transaction(async (tx) => {
    const row = await tx.one(
      tx.forUpdate(
        tx.db
          .select()
          .from(t)
          .where(and(eq(t.name, name), isNull(t.revokedAt)))
          .limit(1),
      ),
    );
    if (!row) return null;
    const next: ApiTokenRow = {
      ...row,
      ...(change.owner !== undefined && { owner: change.owner }),
      ...(change.scopes !== undefined && { scopes: [...new Set(change.scopes)] }),
      ...(change.profiles !== undefined && {
        profiles: change.profiles === null ? null : [...new Set(change.profiles)],
      }),
      ...(change.maxInFlight !== undefined && { maxInFlight: change.maxInFlight }),
      ...(change.maxPerDay !== undefined && { maxPerDay: change.maxPerDay }),
    };
    await tx.run(
      tx.db
        .update(t)
        .set({
          owner: next.owner,
          scopes: next.scopes,
          profiles: next.profiles,
          maxInFlight: next.maxInFlight,
          maxPerDay: next.maxPerDay,
        })
        .where(eq(t.id, row.id)),
    );
    await appendAudit(tx, {
      at,
      actor: options.audit?.actor ?? DAEMON,
      owner: next.owner,
      action: 'token.update',
      target: `token:${name}`,
      outcome: 'ok',
      httpRequestId: options.audit?.httpRequestId ?? null,
      detail: limitsChange(row, next),
    });
    return next;
  });
  forgetTokenRows(h);
  return updated && withoutHash(updated);
}

export type TokenLookup =
  | { kind: 'valid'; token: TokenInfo }
  | { kind: 'revoked'; token: TokenInfo }
  | { kind: 'unknown' };

/**
 * Finds the token a caller presented. Every stored hash is compared in
 * constant time, with no early exit, so the answer's timing says nothing about
 * how close a guess was (the table holds a handful of rows).
 */
export async function findToken(h: History, presented: string): Promise<TokenLookup> {
  const wanted = Buffer.from(hashToken(presented), 'hex');
  let found: ApiTokenRow | undefined;
  for (const row of await tokenRows(h)) {
    const stored = Buffer.from(row.hash, 'hex');
    if (stored.length === wanted.length && timingSafeEqual(stored, wanted)) found = row;
  }
  if (!found) return { kind: 'unknown' };
  return { kind: found.revokedAt === null ? 'valid' : 'revoked', token: withoutHash(found) };
}

/** Records use, at most once a minute per token, so reads do not each cost a write. */
export async function touchToken(h: History, id: string, at = Date.now()): Promise<void> {
  // This process's last touch, so most requests skip even the UPDATE that would change nothing.
  const touched = tokenTable(h).touched;
  if (at - (touched.get(id) ?? Number.NEGATIVE_INFINITY) < TOUCH_EVERY_MS) return;
  touched.set(id, at);
  const t = h.t.apiTokens;
  const changed = await h.run(
    h.db
      .update(t)
      .set({ lastUsedAt: at })
      .where(and(eq(t.id, id), or(isNull(t.lastUsedAt), lt(t.lastUsedAt, at - TOUCH_EVERY_MS)))),
  );
  // The rows read are stale now (their last use); this process's touches are not.
  const table = tokenTables.get(h);
  if (changed > 0 && table) table.rows = null;
}

const TOUCH_EVERY_MS = 60_000;

/**
 * The token table as last read, per history, kept on SQLite while no other connection has
 * written to it since (`PRAGMA data_version` moves only for their commits; this module forgets
 * it after its own writes). Reading and decoding every row on every API request was a tenth of
 * what the local API spent on a submission (issue 14); a token revoked by the CLI is refused
 * from the next request on, as before. PostgreSQL has no such counter, and other hosts write
 * there: its rows are read for each request (a handful, by one query).
 */
interface TokenTable {
  dataVersion: { get(): unknown } | null;
  version: unknown;
  rows: ApiTokenRow[] | null;
  touched: Map<string, number>;
}
const tokenTables = new WeakMap<History, TokenTable>();

function tokenTable(h: History): TokenTable {
  let table = tokenTables.get(h);
  if (!table) {
    table = {
      dataVersion: h.dialect === 'sqlite' ? connectionOf(h.db).prepare('PRAGMA data_version').pluck() : null,
      version: null,
      rows: null,
      touched: new Map(),
    };
    tokenTables.set(h, table);
  }
  return table;
}

async function tokenRows(h: History): Promise<ApiTokenRow[]> {
  const table = tokenTable(h);
  if (!table.dataVersion) return h.all(h.db.select().from(h.t.apiTokens));
  const version = table.dataVersion.get();
  if (table.rows === null || version !== table.version) {
    table.rows = await h.all(h.db.select().from(h.t.apiTokens));
    table.version = version;
  }
  return table.rows;
}

function forgetTokenRows(h: History): void {
  const table = tokenTables.get(h);
  if (table) {
    table.rows = null;
    table.touched.clear();
  }
}

/** Number of live tokens, for the start banner's hint. */
export async function liveTokenCount(h: History): Promise<number> {
  const t = h.t.apiTokens;
  return (await h.all(h.db.select({ id: t.id }).from(t).where(isNull(t.revokedAt)))).length;
}

function withoutHash(row: ApiTokenRow): TokenInfo {
  const { hash: _hash, ...info } = row;
  return info;
}

/**
 * What a live token grants now (its owner and scopes), or null when it is revoked or gone: what
 * a UI session logged in with it is checked against on every request, so an update of the token
 * (its owner, its scopes) applies to its sessions at once.
 */
export async function liveTokenGrant(h: History, id: string): Promise<{ owner: string; scopes: ApiScope[] } | null> {
  const t = h.t.apiTokens;
  const rows = await h.all(
    h.db
      .select({ owner: t.owner, scopes: t.scopes })
      .from(t)
      .where(and(eq(t.id, id), isNull(t.revokedAt))),
  );
  return rows[0] ?? null;
}
