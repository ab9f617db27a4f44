/**
 * Turns of the event loop, taken one at a time by everything that holds it for a slice: a
 * batch of history writes, a stretch of decoding an answer, a reconcile comparison, an API read.
 * Each waits for a turn of its own, first come first served. Yielding with a bare setImmediate
 * was not enough: the poller's writes, reconcile's import and an answer's decoding, each in
 * slices of 20 ms, ran their slices in the same turn and held the loop 60 to 120 ms together
 * (bench:submit's slowest /healthz, issue 14). Between two slices the loop takes in its timers
 * and I/O.
 */

const waiting: (() => void)[] = [];
/** Turns taken after which the queue drops them, while it never empties. */
const COMPACT_AFTER = 1024;
let next = 0;
let scheduled = false;

/** Runs `run` in a turn of the event loop of its own, after every turn taken before it. */
export function takeTurn(run: () => void): void {
  waiting.push(run);
  if (!scheduled) {
    scheduled = true;
    setImmediate(runOne);
  }
}

/** Resolves in a turn of its own: `await nextTurn()` between two slices of work. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => takeTurn(resolve));
}

// An immediate set from inside an immediate runs at the next turn, after the loop's timers and
// I/O; the slice a resolved turn lets go on runs in this one (microtasks follow each immediate).
function runOne(): void {
  const run = waiting[next];
  waiting[next++] = noop;
  if (next === waiting.length) {
    waiting.length = 0;
    next = 0;
    scheduled = false;
  } else {
    // Busy for long (several loops taking turns without a pause): the turns taken go.
    if (next >= COMPACT_AFTER) {
      waiting.splice(0, next);
      next = 0;
    }
    setImmediate(runOne);
  }
  run?.();
}

const noop = () => undefined;
