import { nextTurn } from '../lib/turns.js';
import type { History } from './history.js';

/**
 * Longest a transaction of many writes holds the event loop before it commits and lets the rest
 * of the daemon (the API, health checks, other workers) run. A fixed count of rows was not a
 * bound: 100 accounting records took from 10 ms to over 500 ms depending on what else ran.
 */
export const WRITE_SLICE_MS = 20;

/**
 * Applies `write` to each item in transactions of at most WRITE_SLICE_MS each, with a turn of
 * the event loop before each: a mass end, a mass start or a reconcile of thousands of records
 * never stalls the process, and one commit covers many rows. `write` uses the slice's
 * transaction. Returns how many writes said true.
 */
export async function writeInSlices<T>(
  h: History,
  items: readonly T[],
  write: (tx: History, item: T) => Promise<boolean>,
): Promise<number> {
  let done = 0;
  let counted = 0;
  while (done < items.length) {
    await nextTurn();
    await h.transaction(async (tx) => {
      const sliceStart = performance.now();
      while (done < items.length && performance.now() - sliceStart < WRITE_SLICE_MS) {
        if (await write(tx, items[done] as T)) counted++;
        done++;
      }
    });
  }
  return counted;
}

/**
 * `items` in the order of the Slurm job ids whose requests they write. Every mass writer (the
 * poll's slices, the reconcile's) gives its items so: on PostgreSQL each slice locks the rows it
 * writes until it commits, and two slices taking the same requests in different orders (a poll
 * and a reconcile, on one host or two) each waited for the other, a deadlock the server ends by
 * failing one of them.
 */
export function inJobIdOrder<T>(items: readonly T[], jobIdOf: (item: T) => number | null): T[] {
  return [...items].sort((a, b) => (jobIdOf(a) ?? 0) - (jobIdOf(b) ?? 0));
}
