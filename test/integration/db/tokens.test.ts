import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import {
  createToken,
  findToken,
  hashToken,
  listTokens,
  liveTokenCount,
  revokeToken,
  TOKEN_PREFIX,
  touchToken,
} from '../../../src/db/tokens.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/** The local API's tokens, on SQLite and on PostgreSQL. */

const histories = testHistories();

describe.each(DIALECTS)('API tokens on %s', (dialect) => {
  it('are shown once and kept as their hash; a live name is refused, a revoked one taken over', async () => {
    const h = await histories.make(dialect);
    const { token, info } = await createToken(h, { name: 'lims', scopes: ['submit', 'read', 'submit'], at: 1000 });
    expect(token.startsWith(TOKEN_PREFIX)).toBe(true);
    expect(info).toEqual({
      id: info.id,
      name: 'lims',
      scopes: ['submit', 'read'],
      owner: 'lims',
      profiles: null,
      maxInFlight: null,
      maxPerDay: null,
      createdAt: 1000,
      lastUsedAt: null,
      revokedAt: null,
    });
    const stored = await h.all(h.db.select().from(h.t.apiTokens));
    expect(stored.map((row) => row.hash)).toEqual([hashToken(token)]);
    expect(JSON.stringify(stored)).not.toContain(token);

    await expect(createToken(h, { name: 'lims', scopes: ['read'] })).rejects.toThrow(
      /a token named "lims" exists: revoke it first/,
    );
    expect(await liveTokenCount(h)).toBe(1);
    expect(await revokeToken(h, 'lims')).toBe(true);
    expect(await revokeToken(h, 'lims')).toBe(false);
    expect(await liveTokenCount(h)).toBe(0);
    const again = await createToken(h, { name: 'lims', scopes: ['read'] });
    expect((await listTokens(h)).map((t) => [t.name, t.id, t.revokedAt])).toEqual([['lims', again.info.id, null]]);
  });

  it('finds a presented token as valid, revoked or unknown, also once another process revoked it', async () => {
    const h = await histories.make(dialect);
    const { token, info } = await createToken(h, { name: 'ci', scopes: ['read'] });
    expect(await findToken(h, token)).toEqual({ kind: 'valid', token: info });
    expect(await findToken(h, `${token}x`)).toEqual({ kind: 'unknown' });
    // The CLI, or a web role on another host, revokes it: refused from the next request on.
    const other = await histories.again(h);
    expect(await revokeToken(other, 'ci', 5000)).toBe(true);
    expect(await findToken(h, token)).toEqual({ kind: 'revoked', token: { ...info, revokedAt: 5000 } });
  });

  it('records use at most once a minute per token', async () => {
    const h = await histories.make(dialect);
    const { info } = await createToken(h, { name: 'poller', scopes: ['read'] });
    const lastUsed = async () =>
      (await h.one(h.db.select().from(h.t.apiTokens).where(eq(h.t.apiTokens.id, info.id))))?.lastUsedAt;
    await touchToken(h, info.id, 100_000);
    await touchToken(h, info.id, 130_000);
    expect(await lastUsed()).toBe(100_000);
    await touchToken(h, info.id, 160_001);
    expect(await lastUsed()).toBe(160_001);
  });
});
