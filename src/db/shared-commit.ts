import type { Db } from './database.js';

/**
 * Writes of several callers in one commit: each `work` runs in a savepoint of its own (a throw
 * undoes its writes alone and rejects its caller) inside one transaction run at the next turn
 * of the event loop, and every caller is answered once that transaction has committed. A
 * commit costs more than the few statements of a state change (the WAL's pages written, the
 * lock taken and given back), and submissions in flight at once each made their own (issue 14).
 *
 * For writes whose caller waits anyway (a submit worker between its POST and its answer): the
 * turn of waiting is short, and what a caller is told has been written is on disk.
 */
export function inSharedCommit<T>(db: Db, work: () => T): Promise<T> {
  let waiting = pending.get(db);
  if (!waiting) {
    const batch: Pending[] = [];
    waiting = batch;
    pending.set(db, batch);
    setImmediate(() => {
      pending.delete(db);
      commitTogether(db, batch);
    });
  }
  return new Promise<T>((resolve, reject) =>
    (waiting as Pending[]).push({ work, resolve: resolve as (value: unknown) => void, reject }),
  );
}

interface Pending {
  work: () => unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

const pending = new WeakMap<Db, Pending[]>();

function commitTogether(db: Db, batch: Pending[]): void {
  const done: { one: Pending; value: unknown }[] = [];
  try {
    db.transaction(() => {
      for (const one of batch) {
        try {
          done.push({ one, value: db.transaction(() => one.work()) });
        } catch (error) {
          one.reject(error);
        }
      }
    });
  } catch (error) {
    // The commit itself failed: nothing of any of them was written.
    for (const { one } of done) one.reject(error);
    return;
  }
  for (const { one, value } of done) one.resolve(value);
}
