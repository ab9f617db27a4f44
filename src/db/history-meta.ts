import { randomUUID } from 'node:crypto';
import { eq } from 'drizzle-orm';
import type { Db } from './database.js';
import { historyMeta } from './schema.js';

const HISTORY_ID = 'history_id';

/**
 * The history's own id: made once, at its first open, and kept with it (a copy or a restored
 * backup is the same history). Processes sharing one Redis compare it (src/redis/history-claim.ts).
 */
export function historyId(db: Db): string {
  // Several processes may open a new history together: the first insert wins, all read it.
  db.insert(historyMeta).values({ key: HISTORY_ID, value: randomUUID() }).onConflictDoNothing().run();
  const row = db.select().from(historyMeta).where(eq(historyMeta.key, HISTORY_ID)).get();
  if (!row) throw new Error('the history has no history_id after writing one');
  return row.value;
}
