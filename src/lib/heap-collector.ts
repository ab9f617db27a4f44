import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Logger } from '../logger.js';

/** How often the heap is looked at. */
const CHECK_MS = 30_000;
/** Growth of the heap over the smallest it was after a collection that is worth one. */
const GROWTH_BYTES = 64 * 1024 * 1024;
/** Share of the last interval the event loop was busy above which a collection waits. */
const BUSY_UTILIZATION = 0.3;
/** Growth collected after a burst: a cycle of a mass end adds about 40 MB of garbage. */
const BURST_GROWTH_BYTES = GROWTH_BYTES / 2;
/** Growth that is collected even while busy: memory then matters more than the pause. */
const URGENT_GROWTH_BYTES = 4 * GROWTH_BYTES;

/**
 * Gives memory back after a burst. V8 collects its old generation when it grows or when the
 * process idles, and the daemon never idles in V8's sense (its workers wake every few seconds):
 * after 10,000 submissions the heap held three times its live size, and RSS stayed 200 MB over
 * idle for as long as it was watched (issue 14). Every 30 s, when the heap is 64 MB over the
 * smallest it was after a collection, one is run and V8 returns the freed pages. Over the
 * smallest, not the last: one run mid-burst, while the burst's data was alive, must not raise
 * the bar for the garbage it leaves. Not while the daemon is busy: a full collection is one
 * pause, about 100 ms at a burst's heap (the longest block of bench:submit), and V8 collects
 * incrementally meanwhile; the burst's garbage goes once the load has passed.
 */
export class HeapCollector {
  readonly #collect = fullCollection();
  readonly #timer: NodeJS.Timeout;
  #floor = process.memoryUsage().heapUsed;
  readonly #utilization: () => number;

  constructor(
    private readonly logger: Logger,
    /** The event loop's utilization since the previous call (0 to 1). */
    utilization: () => number = loopUtilization(),
  ) {
    this.#utilization = utilization;
    this.#timer = setInterval(() => this.check(), CHECK_MS);
    this.#timer.unref();
  }

  /** Collects when the heap has grown enough; true when it did. */
  check(): boolean {
    return this.#checkGrowth(this.#utilization() > BUSY_UTILIZATION);
  }

  /**
   * A burst has just been written (a poll cycle's mass start or end). Its answers' parse trees
   * outlived a few scavenges, so they sit in the old generation as garbage, and V8 lets that grow
   * to about four times the live heap before it collects: in bench:mass-end (20,000 ends) the heap
   * reached 150 MB, 40 MB of it live, and RSS 312 MB. Collected once it has grown 32 MB, busy or
   * not: the pause follows the live heap (tens of milliseconds here), not the garbage.
   */
  afterBurst(): boolean {
    return this.#checkGrowth(false, BURST_GROWTH_BYTES);
  }

  #checkGrowth(busy: boolean, growthBytes = GROWTH_BYTES): boolean {
    const before = process.memoryUsage().heapUsed;
    const growth = before - this.#floor;
    if (growth < growthBytes || (busy && growth < URGENT_GROWTH_BYTES)) return false;
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

function loopUtilization(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(now, last);
    last = now;
    return utilization;
  };
}

/** V8's full collection: `gc` of a context made once the flag that exposes it is set. */
function fullCollection(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}
