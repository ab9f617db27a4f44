import { randomUUID } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import type { History } from './history.js';

const HISTORY_ID = 'history_id';

/**
 * The history's own id: made once, at its first open, and kept with it (a copy or a restored
 * backup is the same history). Processes sharing one Redis compare it (src/redis/history-claim.ts).
 */
export async function historyId(h: History): Promise<string> {
  const t = h.t.historyMeta;
  // Several processes may open a new history together: the first insert wins, all read it.
  await h.run(h.db.insert(t).values({ key: HISTORY_ID, value: randomUUID() }).onConflictDoNothing());
  const row = await h.one(h.db.select().from(t).where(eq(t.key, HISTORY_ID)));
  if (!row) throw new Error('the history has no history_id after writing one');
  return row.value;
}

/** Resolves once the history answers a statement: the readiness check's. */
export async function historyAnswers(h: History): Promise<void> {
  await h.rows(sql`select 1`);
}
