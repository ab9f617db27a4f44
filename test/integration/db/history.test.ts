import { eq, sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import type { History } from '../../../src/db/history.js';
import { inSharedCommit } from '../../../src/db/shared-commit.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/** One query, written once, on SQLite and on PostgreSQL: what a statement and a transaction do. */

const histories = testHistories();

const put = (h: History, key: string, value: string) =>
  h.run(
    h.db
      .insert(h.t.historyMeta)
      .values({ key, value })
      .onConflictDoUpdate({ target: h.t.historyMeta.key, set: { value } }),
  );
const get = async (h: History, key: string) =>
  (await h.one(h.db.select().from(h.t.historyMeta).where(eq(h.t.historyMeta.key, key))))?.value;

describe.each(DIALECTS)('the history on %s', (dialect) => {
  it('reads rows as the schema types them, and counts the rows a write changed', async () => {
    const h = await histories.make(dialect);
    expect(h.dialect).toBe(dialect);
    await h.run(
      h.db.insert(h.t.apiTokens).values({
        id: 'a',
        name: 'lims',
        hash: 'h',
        scopes: ['submit', 'read'],
        createdAt: 1_800_000_000_000,
      }),
    );
    const row = await h.one(h.db.select().from(h.t.apiTokens));
    expect(row).toEqual({
      id: 'a',
      name: 'lims',
      hash: 'h',
      scopes: ['submit', 'read'],
      owner: 'default',
      profiles: null,
      maxInFlight: null,
      maxPerDay: null,
      createdAt: 1_800_000_000_000,
      lastUsedAt: null,
      revokedAt: null,
    });
    const t = h.t.apiTokens;
    expect(await h.run(h.db.update(t).set({ revokedAt: 1 }).where(eq(t.name, 'lims')))).toBe(1);
    expect(await h.run(h.db.update(t).set({ revokedAt: 1 }).where(eq(t.name, 'nobody')))).toBe(0);
    expect(await h.one(h.db.select().from(t).where(eq(t.name, 'nobody')))).toBeUndefined();
  });

  it('commits a transaction whole, and undoes all of it when it throws', async () => {
    const h = await histories.make(dialect);
    await h.transaction(async (tx) => {
      await put(tx, 'a', '1');
      await put(tx, 'b', '1');
    });
    await expect(
      h.transaction(async (tx) => {
        await put(tx, 'a', '2');
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect([await get(h, 'a'), await get(h, 'b')]).toEqual(['1', '1']);
  });

  it('undoes a nested transaction alone when it throws (a savepoint)', async () => {
    const h = await histories.make(dialect);
    await h.transaction(async (tx) => {
      await put(tx, 'kept', '1');
      await tx
        .transaction(async (inner) => {
          await put(inner, 'undone', '1');
          throw new Error('inner');
        })
        .catch(() => undefined);
      await put(tx, 'after', '1');
    });
    expect([await get(h, 'kept'), await get(h, 'undone'), await get(h, 'after')]).toEqual(['1', undefined, '1']);
  });

  it('keeps transactions begun together apart: a read-modify-write of each counts', async () => {
    const h = await histories.make(dialect);
    await put(h, 'n', '0');
    const increment = () =>
      h.transaction(async (tx) => {
        // Locked for the rest of the transaction on PostgreSQL, as SQLite's one writer is.
        if (tx.dialect === 'postgres') {
          await tx.rows(sql`select 1 from ${tx.t.historyMeta} where ${tx.t.historyMeta.key} = 'n' for update`);
        }
        const n = Number(await get(tx, 'n'));
        await put(tx, 'n', String(n + 1));
      });
    await Promise.all(Array.from({ length: 20 }, increment));
    expect(await get(h, 'n')).toBe('20');
  });

  it('a statement outside a transaction that is open is not part of it', async () => {
    const h = await histories.make(dialect);
    let inside!: () => void;
    const begun = new Promise<void>((resolve) => {
      inside = resolve;
    });
    const undone = h.transaction(async (tx) => {
      await put(tx, 'tx', '1');
      inside();
      await get(tx, 'tx');
      throw new Error('rolled back');
    });
    undone.catch(() => undefined);
    await begun;
    await put(h, 'outside', '1');
    await expect(undone).rejects.toThrow('rolled back');
    expect([await get(h, 'tx'), await get(h, 'outside')]).toEqual([undefined, '1']);
  });
});

describe('the history on SQLite', () => {
  it('undoes a transaction that awaited something other than the history at the next turn, freeing the history', async () => {
    const h = await histories.make('sqlite');
    let afterTimer: unknown;
    const undone = h.transaction(async (tx) => {
      await put(tx, 'a', '1');
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      afterTimer = await put(tx, 'b', '1').catch((error: Error) => error.message);
    });
    undone.catch(() => undefined);
    // The root handle does not wait for the timer: the transaction is undone at the next turn.
    const started = Date.now();
    await put(h, 'c', '1');
    // Well before the timer, however loaded the machine.
    expect(Date.now() - started).toBeLessThan(1_500);
    await expect(undone).rejects.toThrow(/was undone: it awaited something other than the history/);
    expect(afterTimer).toMatch(/was undone/);
    expect([await get(h, 'a'), await get(h, 'b'), await get(h, 'c')]).toEqual([undefined, undefined, '1']);
  });

  it('keeps the writes of a shared commit out of an open transaction, so undoing it does not undo them', async () => {
    const h = await histories.make('sqlite');
    const shared = inSharedCommit(h, (tx) => put(tx, 'shared', '1'));
    const undone = h.transaction(async (tx) => {
      await put(tx, 'tx', '1');
      await new Promise((resolve) => setTimeout(resolve, 20));
    });
    await expect(undone).rejects.toThrow(/was undone/);
    await shared;
    expect([await get(h, 'shared'), await get(h, 'tx')]).toEqual(['1', undefined]);
  });
});
