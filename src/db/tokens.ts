import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { and, eq, isNull, lt, or, sql } from 'drizzle-orm';
import { ConfigError } from '../errors.js';
import type { Db } from './database.js';
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
  const rows = prepared(db, 'tokens.all', () => db.select().from(apiTokens).prepare()).all();
  for (const row of rows) {
    const stored = Buffer.from(row.hash, 'hex');
    if (stored.length === wanted.length && timingSafeEqual(stored, wanted)) found = row;
  }
  if (!found) return { kind: 'unknown' };
  return { kind: found.revokedAt === null ? 'valid' : 'revoked', token: withoutHash(found) };
}

/** Records use, at most once a minute per token, so reads do not each cost a write. */
export function touchToken(db: Db, id: string, at = Date.now()): void {
  prepared(db, 'tokens.touch', () =>
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
  ).run({ id, at, staleBefore: at - 60_000 });
}

/** Number of live tokens, for the start banner's hint. */
export function liveTokenCount(db: Db): number {
  return db.select({ id: apiTokens.id }).from(apiTokens).where(isNull(apiTokens.revokedAt)).all().length;
}

function withoutHash(row: ApiTokenRow): TokenInfo {
  const { hash: _hash, ...info } = row;
  return info;
}
