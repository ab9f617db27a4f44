/**
 * A token bucket: `capacity` tokens, refilled continuously at `refillPerSecond`.
 * Time is passed in so the bucket is pure and testable without timers.
 */
export class TokenBucket {
  private tokens: number;
  private updatedAtMs: number;

  constructor(
    public capacity: number,
    public refillPerSecond: number,
    nowMs: number = Date.now(),
  ) {
    this.tokens = capacity;
    this.updatedAtMs = nowMs;
  }

  private refill(nowMs: number): void {
    const elapsedMs = Math.max(0, nowMs - this.updatedAtMs);
    this.tokens = Math.min(this.capacity, this.tokens + (elapsedMs / 1000) * this.refillPerSecond);
    this.updatedAtMs = nowMs;
  }

  /** Takes one token if there is one; returns whether it did. */
  tryTake(nowMs: number = Date.now()): boolean {
    this.refill(nowMs);
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Milliseconds until one whole token is available (0 when one is). */
  msUntilToken(nowMs: number = Date.now()): number {
    this.refill(nowMs);
    if (this.tokens >= 1) return 0;
    if (this.refillPerSecond <= 0) return Number.POSITIVE_INFINITY;
    return Math.ceil(((1 - this.tokens) / this.refillPerSecond) * 1000);
  }

  /**
   * Changes capacity and rate from now on (tokens gathered so far at the old rate are kept, up
   * to the new capacity): a client that learns the server's real limit slows down to it.
   */
  retune(capacity: number, refillPerSecond: number, nowMs: number = Date.now()): void {
    this.refill(nowMs);
    this.capacity = capacity;
    this.refillPerSecond = refillPerSecond;
    this.tokens = Math.min(this.tokens, capacity);
  }

  /** Spends every token: the next one comes at the refill rate. */
  empty(nowMs: number = Date.now()): void {
    this.refill(nowMs);
    this.tokens = 0;
  }

  /** True when the bucket is full, i.e. nobody has used it for a while. */
  isFull(nowMs: number = Date.now()): boolean {
    this.refill(nowMs);
    return this.tokens >= this.capacity;
  }
}
