import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { and, eq, isNull, lt, or, sql } from 'drizzle-orm';
import { ConfigError } from '../errors.js';
import { connectionOf, type Db } from './database.js';
import { prepared } from './prepared.js';
import { type ApiScope, type ApiTokenRow, apiTokens } from './schema.js';

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
 * Makes a token. A name in use by a live token is refused; the name of a
 * revoked one is taken over (the revoked row is deleted), so names can be reused.
 */
export function createToken(db: Db, input: { name: string; scopes: ApiScope[]; at?: number }): CreatedToken {
  const token = `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
  const at = input.at ?? Date.now();
  const scopes = [...new Set(input.scopes)];
  return db.transaction((tx) => {
    const existing = tx.select().from(apiTokens).where(eq(apiTokens.name, input.name)).get();
    if (existing && existing.revokedAt === null) {
      throw new ConfigError(`a token named "${input.name}" exists: revoke it first, or pick another name`);
    }
    if (existing) tx.delete(apiTokens).where(eq(apiTokens.id, existing.id)).run();
    const row = tx
      .insert(apiTokens)
      .values({ id: randomUUID(), name: input.name, hash: hashToken(token), scopes, createdAt: at })
      .returning()
      .get();
    forgetTokenRows(db);
    return { token, info: withoutHash(row) };
  });
}

export function listTokens(db: Db): TokenInfo[] {
  return db.select().from(apiTokens).orderBy(apiTokens.createdAt).all().map(withoutHash);
}

/** Revokes a live token by name; false when there is no live token of that name. */
export function revokeToken(db: Db, name: string, at = Date.now()): boolean {
  const result = db
    .update(apiTokens)
    .set({ revokedAt: at })
    .where(and(eq(apiTokens.name, name), isNull(apiTokens.revokedAt)))
    .run();
  forgetTokenRows(db);
  return result.changes > 0;
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
export function findToken(db: Db, presented: string): TokenLookup {
  const wanted = Buffer.from(hashToken(presented), 'hex');
  let found: ApiTokenRow | undefined;
  for (const row of tokenRows(db)) {
    const stored = Buffer.from(row.hash, 'hex');
    if (stored.length === wanted.length && timingSafeEqual(stored, wanted)) found = row;
  }
  if (!found) return { kind: 'unknown' };
  return { kind: found.revokedAt === null ? 'valid' : 'revoked', token: withoutHash(found) };
}

/** Records use, at most once a minute per token, so reads do not each cost a write. */
export function touchToken(db: Db, id: string, at = Date.now()): void {
  // This connection's last touch, so most requests skip even the UPDATE that would change nothing.
  const touched = lastTouch(db);
  if (at - (touched.get(id) ?? Number.NEGATIVE_INFINITY) < TOUCH_EVERY_MS) return;
  const { changes } = prepared(db, 'tokens.touch', () =>
    db
      .update(apiTokens)
      .set({ lastUsedAt: sql`${sql.placeholder('at')}` })
      .where(
        and(
          eq(apiTokens.id, sql.placeholder('id')),
          or(isNull(apiTokens.lastUsedAt), lt(apiTokens.lastUsedAt, sql.placeholder('staleBefore'))),
        ),
      )
      .prepare(),
  ).run({ id, at, staleBefore: at - TOUCH_EVERY_MS });
  touched.set(id, at);
  if (changes > 0) forgetTokenRows(db);
}

const TOUCH_EVERY_MS = 60_000;

/**
 * The token table as last read, per connection, kept while no other connection has written to
 * the history since (`PRAGMA data_version` moves only for their commits; this module forgets it
 * after its own writes). Reading and decoding every row on every API request was a tenth of
 * what the local API spent on a submission (issue 14); a token revoked by the CLI is refused
 * from the next request on, as before.
 */
interface TokenTable {
  dataVersion: { get(): unknown };
  version: unknown;
  rows: ApiTokenRow[] | null;
  touched: Map<string, number>;
}
const tokenTables = new WeakMap<object, TokenTable>();

function tokenTable(db: Db): TokenTable {
  const connection = connectionOf(db);
  let table = tokenTables.get(connection);
  if (!table) {
    table = {
      dataVersion: connection.prepare('PRAGMA data_version').pluck(),
      version: null,
      rows: null,
      touched: new Map(),
    };
    tokenTables.set(connection, table);
  }
  return table;
}

function tokenRows(db: Db): ApiTokenRow[] {
  const table = tokenTable(db);
  const version = table.dataVersion.get();
  if (table.rows === null || version !== table.version) {
    table.rows = prepared(db, 'tokens.all', () => db.select().from(apiTokens).prepare()).all();
    table.version = version;
  }
  return table.rows;
}

function lastTouch(db: Db): Map<string, number> {
  return tokenTable(db).touched;
}

function forgetTokenRows(db: Db): void {
  const table = tokenTables.get(connectionOf(db));
  if (table) {
    table.rows = null;
    table.touched.clear();
  }
}

/** Number of live tokens, for the start banner's hint. */
export function liveTokenCount(db: Db): number {
  return db.select({ id: apiTokens.id }).from(apiTokens).where(isNull(apiTokens.revokedAt)).all().length;
}

function withoutHash(row: ApiTokenRow): TokenInfo {
  const { hash: _hash, ...info } = row;
  return info;
}
