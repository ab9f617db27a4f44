import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createRequest, insertTransition } from '../../../src/db/requests.js';
import { LiveChanges, type OwnedChange } from '../../../src/http/ui/live-changes.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';
import { waitFor } from '../../helpers/http.js';

/** The UI's live feed of request changes, read from the history on SQLite and on PostgreSQL. */

const histories = testHistories();
const base = {
  profile: 'p',
  name: 'n',
  spec: {},
  owner: 'default',
  actor: 'test',
  origin: 'api' as const,
  at: 1,
  source: 'api' as const,
};

describe.each(DIALECTS)('live changes on %s', (dialect) => {
  it('reports each new transition once, after the ones that were there when the page opened', async () => {
    const h = await histories.make(dialect);
    await createRequest(h, { ...base, id: 'old' });
    const feed = new LiveChanges(h, pino({ level: 'silent' }), 50);
    const seen: OwnedChange[] = [];
    const stop = feed.subscribe((changes) => seen.push(...changes));
    try {
      // The first read is where the transitions stand: nothing of before is news.
      await new Promise((resolve) => setTimeout(resolve, 150));
      await createRequest(h, { ...base, id: 'new' });
      await waitFor(async () => (seen.length > 0 ? true : undefined), { what: 'the new request', timeoutMs: 5000 });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(seen).toEqual([
        { change: { kind: 'job', id: 'new', state: 'accepted', run: null }, owner: 'default', pipeline: null },
      ]);
    } finally {
      stop();
    }
  });

  // On SQLite transitions commit in the order of their ids: one writer at a time.
  it.skipIf(dialect === 'sqlite')('reports a transition committed after one with a larger id', async () => {
    const h = await histories.make(dialect);
    const other = await histories.again(h);
    await createRequest(h, { ...base, id: 'a' });
    await createRequest(h, { ...base, id: 'b' });
    const feed = new LiveChanges(h, pino({ level: 'silent' }), 50);
    const seen: OwnedChange[] = [];
    const stop = feed.subscribe((changes) => seen.push(...changes));
    try {
      await new Promise((resolve) => setTimeout(resolve, 150));
      let commit!: () => void;
      const held = new Promise<void>((resolve) => {
        commit = resolve;
      });
      let inserted!: () => void;
      const insertedA = new Promise<void>((resolve) => {
        inserted = resolve;
      });
      // A's transition takes its id first and commits last (another host's slow transaction).
      const slow = h.transaction(async (tx) => {
        await insertTransition(tx, { requestId: 'a', fromState: 'accepted', toState: 'queued', at: 2, source: 'api' });
        inserted();
        await held;
      });
      await insertedA;
      await insertTransition(other, { requestId: 'b', fromState: 'accepted', toState: 'queued', at: 3, source: 'api' });
      await waitFor(async () => (seen.some((c) => c.change.id === 'b') ? true : undefined), { what: "b's change" });
      commit();
      await slow;
      await waitFor(async () => (seen.some((c) => c.change.id === 'a') ? true : undefined), { what: "a's change" });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(seen.map((c) => `${c.change.id}:${c.change.state}`)).toEqual(['b:queued', 'a:queued']);
    } finally {
      stop();
    }
  });
});
