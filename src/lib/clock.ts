import { sleep } from './sleep.js';

/**
 * The one source of "now" and of timers, passed in where time is read: the daemon gets
 * `systemClock`, a test that would otherwise sleep gets a `ManualClock` and moves it. Components
 * take it as an optional dependency that defaults to `systemClock`, so their callers change only
 * where a test wants to move time (pg-boss's `clock.ts`, its `TestClock.tick`).
 */
export interface Clock {
  /** Unix milliseconds, as `Date.now()`. */
  now(): number;
  /** Resolves after `ms` of this clock; rejects with the signal's reason as soon as it aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Real time: `Date.now()` and `setTimeout` (src/lib/sleep.ts). */
export const systemClock: Clock = {
  now: () => Date.now(),
  sleep,
};

interface ManualTimer {
  dueMs: number;
  /** Creation order: two timers due at the same moment fire in the order they were set. */
  seq: number;
  fire: () => void;
}

/**
 * A clock that stands still until a test moves it. `advance(ms)` fires the sleeps that fall due
 * on the way, each at its own moment (now() reads its due time while it runs), and lets the
 * code they wake run before the next fires, so a loop that sleeps again is woken again.
 */
export class ManualClock implements Clock {
  private nowMs: number;
  private seq = 0;
  private timers: ManualTimer[] = [];

  /** @defaultValue the real time at creation, so dates it produces are plausible */
  constructor(startMs: number = Date.now()) {
    this.nowMs = startMs;
  }

  now(): number {
    return this.nowMs;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const timer: ManualTimer = {
        dueMs: this.nowMs + Math.max(0, ms),
        seq: this.seq++,
        fire: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.timers = this.timers.filter((t) => t !== timer);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.timers.push(timer);
    });
  }

  /** Sleeps not yet due. */
  get pending(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing every sleep due by then, earliest first. */
  async advance(ms: number): Promise<void> {
    if (!(ms >= 0)) throw new Error(`a clock moves forward only (asked to move ${ms} ms)`);
    const targetMs = this.nowMs + ms;
    for (;;) {
      const next = this.nextDue(targetMs);
      if (!next) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.nowMs = next.dueMs;
      next.fire();
      // A macrotask turn: the woken code runs its continuations (and may sleep again) before
      // the next timer is looked for.
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    this.nowMs = targetMs;
  }

  private nextDue(byMs: number): ManualTimer | undefined {
    let next: ManualTimer | undefined;
    for (const t of this.timers) {
      if (t.dueMs > byMs) continue;
      if (!next || t.dueMs < next.dueMs || (t.dueMs === next.dueMs && t.seq < next.seq)) next = t;
    }
    return next;
  }
}
