import { type Clock, systemClock } from '../lib/clock.js';
import { TokenBucket } from '../lib/token-bucket.js';

/** Which work a request serves; polling is served first so submissions never starve it. */
export type RequestPriority = 'poll' | 'normal';

interface Waiter {
  resolve: () => void;
}

/**
 * What the transport asks of a profile's request budget: this process's own
 * ({@link RequestBudget}, for a CLI command without a daemon) or the deployment's, shared
 * through Redis by every process (SharedRequestBudget).
 */
export interface Budget {
  /** Resolves when the request may be sent; polls before the rest. */
  acquire(priority?: RequestPriority): Promise<void>;
  /** The proxy answered 429: hold the profile for `retryAfterMs` and slow its pace. */
  rateLimited(retryAfterMs: number | null): void;
  /** The pace (requests a second) the profile is sent at now. */
  currentRate(): number;
  /** True while the proxy's 429s hold the profile below its configured pace. */
  isLimited(): boolean;
  /** Whether work other than polling had to wait for the budget within `windowMs`. */
  contendedWithin(windowMs: number): boolean;
  /** Resolves once no Retry-After holds the profile. Takes no token. */
  whenOpen(): Promise<void>;
}

/** The slowest pace a rate-limited profile drops to (requests a second); Retry-After pauses go lower. */
export const MIN_RATE_PER_SEC = 0.1;
/**
 * After a 429 the pace grows back by this share of a rate each second without one: of the rate
 * refused, up to it (the limit is likely there: probing it faster meant a 429 every 8 s in a
 * storm at 1/s with 5/s configured), then of the configured rate (the limit has gone up).
 */
export const RECOVERY_SHARE_PER_SEC = 0.01;

/**
 * One request budget per profile: a token bucket kept below the proxy's limit,
 * so schedflow does not cause 429s in normal operation. Waiting requests are
 * served in order, polling before everything else.
 *
 * When the proxy answers 429 anyway (its limit is lower than the profile says, or other
 * clients share its address), the budget is also the profile's gate: nothing is sent until
 * the Retry-After has passed, whatever the request (submit, poll, lookup), since the proxy
 * would refuse it; then requests go one at a time at half the pace that was refused, and the
 * pace grows back slowly (additive increase, multiplicative decrease, as TCP does) until the
 * configured one. Retrying at the old pace would only buy more 429s (issue 13, weak spot 3).
 */
export class RequestBudget implements Budget {
  private readonly bucket: TokenBucket;
  private readonly queues: Record<RequestPriority, Waiter[]> = { poll: [], normal: [] };
  /** When a request other than a poll last had to wait for a token (or the Retry-After). */
  private normalQueuedAtMs = Number.NEGATIVE_INFINITY;
  /** Aborts the pending wake-up of the queue (a 429 moves it). */
  private timer: AbortController | undefined;
  /** Nothing is sent before this (the last 429's Retry-After). */
  private heldUntilMs = 0;
  /** The pace after the last 429, and when it was set: the current pace grows from there. */
  private limited: { ratePerSec: number; refusedPerSec: number; sinceMs: number } | null = null;

  constructor(
    private readonly capacity: number,
    private readonly refillPerSecond: number,
    /** Time and timers: a test moves a ManualClock instead of waiting for tokens. */
    private readonly clock: Clock = systemClock,
  ) {
    this.bucket = new TokenBucket(capacity, refillPerSecond, clock.now());
  }

  acquire(priority: RequestPriority = 'normal'): Promise<void> {
    this.recover();
    const now = this.clock.now();
    if (this.waiting() === 0 && now >= this.heldUntilMs && this.bucket.tryTake(now)) return Promise.resolve();
    if (priority === 'normal') this.normalQueuedAtMs = now;
    return new Promise((resolve) => {
      this.queues[priority].push({ resolve });
      this.schedule();
    });
  }

  /**
   * The proxy refused a request for its rate limit: hold every request until `retryAfterMs`
   * from now, and halve the pace. 429s to requests that were already in flight when the
   * first came (within its hold) are the same overrun, and do not halve it again.
   */
  rateLimited(retryAfterMs: number | null, nowMs: number = this.clock.now()): void {
    const holdMs = Math.max(retryAfterMs ?? 1000, 100);
    if (nowMs >= this.heldUntilMs) {
      const refused = this.currentRate(nowMs);
      const pace = Math.max(MIN_RATE_PER_SEC, refused / 2);
      this.limited = { ratePerSec: pace, refusedPerSec: Math.max(refused, pace), sinceMs: nowMs + holdMs };
      // One at a time after the hold: a burst of the bucket's capacity would be refused again.
      this.bucket.retune(1, pace, nowMs);
    }
    this.bucket.empty(nowMs);
    this.heldUntilMs = Math.max(this.heldUntilMs, nowMs + holdMs);
    if (this.timer) {
      this.timer.abort();
      this.timer = undefined;
    }
    if (this.waiting() > 0) this.schedule();
  }

  /** The pace requests are sent at now (requests a second); lower than configured after 429s. */
  currentRate(nowMs: number = this.clock.now()): number {
    if (!this.limited) return this.refillPerSecond;
    const { ratePerSec, refusedPerSec, sinceMs } = this.limited;
    const grownSec = Math.max(0, nowMs - sinceMs) / 1000;
    const towardRefusedSec = (refusedPerSec - ratePerSec) / (RECOVERY_SHARE_PER_SEC * refusedPerSec);
    if (grownSec <= towardRefusedSec) return ratePerSec + grownSec * RECOVERY_SHARE_PER_SEC * refusedPerSec;
    const beyondSec = grownSec - towardRefusedSec;
    return Math.min(this.refillPerSecond, refusedPerSec + beyondSec * RECOVERY_SHARE_PER_SEC * this.refillPerSecond);
  }

  /** True while the proxy's rate limit holds the profile below its configured pace. */
  isLimited(nowMs: number = this.clock.now()): boolean {
    this.recover(nowMs);
    return this.limited !== null;
  }

  /** Whether work other than polling (submissions, lookups) had to wait for the budget within `windowMs`. */
  contendedWithin(windowMs: number, nowMs: number = this.clock.now()): boolean {
    // Still waiting, however long ago it began (a Retry-After of a minute, say).
    if (this.queues.normal.length > 0) return true;
    return nowMs - this.normalQueuedAtMs <= windowMs;
  }

  /** Resolves once no Retry-After holds the profile (at once when none does). Takes no token. */
  async whenOpen(): Promise<void> {
    for (let waitMs = this.heldUntilMs - this.clock.now(); waitMs > 0; waitMs = this.heldUntilMs - this.clock.now()) {
      await this.clock.sleep(waitMs);
    }
  }

  waiting(): number {
    return this.queues.poll.length + this.queues.normal.length;
  }

  /** Follows the pace as it grows back; the configured bucket again once it is reached. */
  private recover(nowMs: number = this.clock.now()): void {
    if (!this.limited || nowMs < this.heldUntilMs) return;
    const rate = this.currentRate(nowMs);
    if (rate >= this.refillPerSecond) {
      this.limited = null;
      this.bucket.retune(this.capacity, this.refillPerSecond, nowMs);
    } else {
      this.bucket.retune(1, rate, nowMs);
    }
  }

  private schedule(): void {
    if (this.timer) return;
    const now = this.clock.now();
    const delay = Math.max(this.bucket.msUntilToken(now), this.heldUntilMs - now, 0);
    const timer = new AbortController();
    this.timer = timer;
    this.clock.sleep(delay, timer.signal).then(
      () => {
        this.timer = undefined;
        this.drain();
      },
      // Aborted: a 429 scheduled another wake-up in its place.
      () => {},
    );
  }

  private drain(): void {
    this.recover();
    while (this.waiting() > 0 && this.clock.now() >= this.heldUntilMs && this.bucket.tryTake(this.clock.now())) {
      const next = this.queues.poll.shift() ?? this.queues.normal.shift();
      next?.resolve();
    }
    if (this.waiting() > 0) this.schedule();
  }
}
