import { TokenBucket } from '../lib/token-bucket.js';

/** Which work a request serves; polling is served first so submissions never starve it. */
export type RequestPriority = 'poll' | 'normal';

interface Waiter {
  resolve: () => void;
}

/**
 * One request budget per profile: a token bucket kept below the proxy's limit,
 * so schedflow does not cause 429s in normal operation. Waiting requests are
 * served in order, polling before everything else.
 */
export class RequestBudget {
  private readonly bucket: TokenBucket;
  private readonly queues: Record<RequestPriority, Waiter[]> = { poll: [], normal: [] };
  private timer: NodeJS.Timeout | undefined;

  constructor(capacity: number, refillPerSecond: number) {
    this.bucket = new TokenBucket(capacity, refillPerSecond);
  }

  acquire(priority: RequestPriority = 'normal'): Promise<void> {
    if (this.waiting() === 0 && this.bucket.tryTake()) return Promise.resolve();
    return new Promise((resolve) => {
      this.queues[priority].push({ resolve });
      this.schedule();
    });
  }

  waiting(): number {
    return this.queues.poll.length + this.queues.normal.length;
  }

  private schedule(): void {
    if (this.timer) return;
    const delay = this.bucket.msUntilToken();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.drain();
    }, delay);
  }

  private drain(): void {
    while (this.waiting() > 0 && this.bucket.tryTake()) {
      const next = this.queues.poll.shift() ?? this.queues.normal.shift();
      next?.resolve();
    }
    if (this.waiting() > 0) this.schedule();
  }
}
