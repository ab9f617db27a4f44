import type { History } from './history.js';

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
export function inSharedCommit<T>(h: History, work: (tx: History) => Promise<T>): Promise<T> {
  let waiting = pending.get(h);
  if (!waiting) {
    const batch: Pending[] = [];
    waiting = batch;
    pending.set(h, batch);
    setImmediate(() => {
      pending.delete(h);
      void commitTogether(h, batch);
    });
  }
  return new Promise<T>((resolve, reject) =>
    (waiting as Pending[]).push({ work, resolve: resolve as (value: unknown) => void, reject }),
  );
}

interface Pending {
  work: (tx: History) => Promise<unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

const pending = new WeakMap<History, Pending[]>();

async function commitTogether(h: History, batch: Pending[]): Promise<void> {
  let outcomes: Outcome<unknown>[];
  try {
    outcomes = await commitEach(
      h,
      batch.map((one) => one.work),
    );
  } catch (error) {
    // The commit itself failed: nothing of any of them was written.
    for (const one of batch) one.reject(error);
    return;
  }
  batch.forEach((one, i) => {
    const outcome = outcomes[i] as Outcome<unknown>;
    if (outcome.ok) one.resolve(outcome.value);
    else one.reject(outcome.error);
  });
}

export type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * Runs each write in a savepoint of its own inside one transaction, so a throw undoes that
 * write alone: their outcomes, in order. Throws when the commit itself fails (then nothing of
 * any of them was written).
 */
export function commitEach<T>(h: History, works: readonly ((tx: History) => Promise<T>)[]): Promise<Outcome<T>[]> {
  return h.transaction(async (tx) => {
    const outcomes: Outcome<T>[] = [];
    for (const work of works) {
      try {
        outcomes.push({ ok: true, value: await tx.transaction(work) });
      } catch (error) {
        outcomes.push({ ok: false, error });
      }
    }
    return outcomes;
  });
}
