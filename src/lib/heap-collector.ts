import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Logger } from '../logger.js';

/** How often the heap is looked at. */
const CHECK_MS = 30_000;
/** Growth of the heap over the smallest it was after a collection that is worth one. */
const GROWTH_BYTES = 64 * 1024 * 1024;

/**
 * Gives memory back after a burst. V8 collects its old generation when it grows or when the
 * process idles, and the daemon never idles in V8's sense (its workers wake every few seconds):
 * after 10,000 submissions the heap held three times its live size, and RSS stayed 200 MB over
 * idle for as long as it was watched (issue 14). Every 30 s, when the heap is 64 MB over the
 * smallest it was after a collection, one is run (tens of milliseconds at the daemon's live
 * size) and V8 returns the freed pages. Over the smallest, not the last: one run mid-burst,
 * while the burst's data was alive, must not raise the bar for the garbage it leaves.
 */
export class HeapCollector {
  readonly #collect = fullCollection();
  readonly #timer: NodeJS.Timeout;
  #floor = process.memoryUsage().heapUsed;

  constructor(private readonly logger: Logger) {
    this.#timer = setInterval(() => this.check(), CHECK_MS);
    this.#timer.unref();
  }

  /** Collects when the heap has grown enough; true when it did. */
  check(): boolean {
    const before = process.memoryUsage().heapUsed;
    if (before - this.#floor < GROWTH_BYTES) return false;
    const started = performance.now();
    this.#collect();
    const after = process.memoryUsage().heapUsed;
    this.#floor = Math.min(this.#floor, after);
    this.logger.debug(
      { heapBeforeMb: mb(before), heapAfterMb: mb(after), ms: Math.round(performance.now() - started) },
      'heap collected after growth',
    );
    return true;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

const mb = (bytes: number) => Math.round(bytes / 1048576);

/** V8's full collection: `gc` of a context made once the flag that exposes it is set. */
function fullCollection(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
