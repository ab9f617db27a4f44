import { describe, expect, it } from 'vitest';
import {
  completeKey,
  IDEMPOTENCY_TTL_MS,
  type KeyInput,
  purgeKeys,
  releaseKey,
  reserveKey,
} from '../../../src/db/idempotency.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/** Idempotency-Keys, on SQLite and on PostgreSQL, also claimed by two web roles at once. */

const histories = testHistories();

const input = (over: Partial<KeyInput> = {}): KeyInput => ({
  tokenId: 'token-1',
  key: 'key-1',
  route: 'POST /api/v1/jobs',
  bodyHash: 'body-1',
  at: 1_000_000,
  owner: 'web-a',
  ownerGone: () => false,
  ...over,
});

describe.each(DIALECTS)('Idempotency-Keys on %s', (dialect) => {
  it('reserves a key once; a repeat is in progress, then replayed; another route or body is a mismatch', async () => {
    const h = await histories.make(dialect);
    expect(await reserveKey(h, input())).toEqual({ kind: 'reserved', reservedAt: 1_000_000 });
    expect(await reserveKey(h, input({ at: 1_000_500 }))).toEqual({ kind: 'in_progress' });
    await completeKey(h, 'token-1', 'key-1', 201, { body: { id: 'r1' } });
    expect(await reserveKey(h, input({ at: 1_001_000 }))).toEqual({
      kind: 'replay',
      status: 201,
      response: { body: { id: 'r1' } },
    });
    expect(await reserveKey(h, input({ bodyHash: 'body-2' }))).toMatchObject({ kind: 'mismatch', what: 'body' });
    expect(await reserveKey(h, input({ route: 'POST /api/v1/runs' }))).toMatchObject({
      kind: 'mismatch',
      what: 'route',
    });
    // Another token's key of the same text is its own.
    expect(await reserveKey(h, input({ tokenId: 'token-2' }))).toEqual({ kind: 'reserved', reservedAt: 1_000_000 });
  });

  it('replays an answer as it was stored: its members in their order, any text in its strings', async () => {
    const h = await histories.make(dialect);
    await reserveKey(h, input());
    const answer = { body: { zlast: 1, afirst: 2, text: 'nul \u0000 and ünïcode' }, headers: { location: '/x' } };
    await completeKey(h, 'token-1', 'key-1', 201, answer);
    const replay = await reserveKey(h, input({ at: 1_000_100 }));
    expect(replay).toEqual({ kind: 'replay', status: 201, response: answer });
    expect(JSON.stringify(replay.kind === 'replay' ? replay.response : null)).toBe(JSON.stringify(answer));
  });

  it('lets a retry take over a released or abandoned claim with its first time; an expired key starts afresh', async () => {
    const h = await histories.make(dialect);
    await reserveKey(h, input());
    await releaseKey(h, 'token-1', 'key-1', 1_000_100);
    expect(await reserveKey(h, input({ at: 1_000_200 }))).toEqual({ kind: 'reserved', reservedAt: 1_000_000 });
    // Its owner is gone (killed mid-request): taken over at once.
    expect(await reserveKey(h, input({ at: 1_000_300, owner: 'web-b', ownerGone: (o) => o === 'web-a' }))).toEqual({
      kind: 'reserved',
      reservedAt: 1_000_000,
    });
    await completeKey(h, 'token-1', 'key-1', 201, { body: {} });
    const later = 1_000_300 + IDEMPOTENCY_TTL_MS + 1;
    expect(await reserveKey(h, input({ at: later }))).toEqual({ kind: 'reserved', reservedAt: later });
    expect(await purgeKeys(h, later + IDEMPOTENCY_TTL_MS + 1)).toBe(1);
  });

  // On SQLite the roles share one host's file, whose write lock takes their transactions one
  // at a time; two connections in this one process would wait on each other's lock instead.
  it.skipIf(dialect === 'sqlite')(
    'gives one of two web roles claiming one key at once the work, the other an in-progress answer',
    async () => {
      const h = await histories.make(dialect);
      const other = await histories.again(h);
      for (let round = 0; round < 10; round++) {
        const key = `together-${round}`;
        const answers = await Promise.all([
          reserveKey(h, input({ key, owner: 'web-a' })),
          reserveKey(other, input({ key, owner: 'web-b' })),
        ]);
        expect(answers.map((a) => a.kind).sort()).toEqual(['in_progress', 'reserved']);
      }
    },
  );
});
