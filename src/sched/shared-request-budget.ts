import { sleep } from '../lib/sleep.js';
import type { Budget, RequestPriority } from './request-budget.js';

/** One answer of a shared bucket, in this process's terms (durations from now, not instants). */
export interface SharedBucketAnswer {
  /** 0 when a token was taken (or, for a peek, nothing holds the profile); else ms until one may be. */
  waitMs: number;
  /** The pace the profile is sent at now, requests a second. */
  ratePerSec: number;
  /** True while the proxy's 429s hold the profile below its configured pace. */
  limited: boolean;
  /** Ms until the last 429's Retry-After has passed; 0 when none holds. */
  heldMs: number;
  /** Tokens a take took: up to the number it asked for, 0 when it must wait. */
  taken: number;
}

/**
 * One profile's token bucket kept outside the process, where every process of the deployment
 * takes from it (src/redis/shared-budget.ts): refill, Retry-After hold and the pace after 429s
 * are the bucket's, computed atomically on one clock.
 */
export interface SharedBucket {
  /** Takes up to `want` tokens (those there are); when fewer, says how long until the next may be taken. */
  take(want?: number): Promise<SharedBucketAnswer>;
  /** Says the state without taking a token. */
  peek(): Promise<SharedBucketAnswer>;
  /** The proxy answered 429: every process holds the profile, and its pace halves. */
  rateLimited(retryAfterMs: number | null): Promise<SharedBucketAnswer>;
}

/** How long a bucket's answer stands for whether a Retry-After holds the profile. */
const ANSWER_FRESH_MS = 100;

interface Waiter {
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * The request budget of a profile shared by every process that sends to its proxy: N workers
 * together stay under one limit, not N times it. Waiting requests of this process queue here
 * (polls first), and one loop at a time asks the shared bucket for their tokens, sleeping as
 * long as it says. A bucket that does not answer (Redis down) fails the waiting requests, each
 * of which its caller's retry sends again later, rather than holding them forever.
 */
export class SharedRequestBudget implements Budget {
  private readonly queues: Record<RequestPriority, Waiter[]> = { poll: [], normal: [] };
  /** When a request other than a poll last had to wait for a token (or the Retry-After). */
  private normalQueuedAtMs = Number.NEGATIVE_INFINITY;
  /** The bucket's last answer: what isLimited and currentRate say until the next one. */
  private last: { ratePerSec: number; limited: boolean };
  /** When that answer came (performance.now()), and until when it said a Retry-After holds. */
  private lastAtMs = Number.NEGATIVE_INFINITY;
  private heldUntilMs = Number.NEGATIVE_INFINITY;
  /** A peek on its way: whenOpen's callers of the same moment wait for one answer. */
  private peeking: Promise<SharedBucketAnswer> | null = null;
  private draining = false;
  /** True while the loop sleeps because the bucket said to wait: what a newcomer then waits for. */
  private sleepingForTokens = false;

  constructor(
    private readonly bucket: SharedBucket,
    refillPerSecond: number,
  ) {
    this.last = { ratePerSec: refillPerSecond, limited: false };
  }

  acquire(priority: RequestPriority = 'normal'): Promise<void> {
    // Waiting for the bucket to refill, not for the loop's round trip to Redis: requests that
    // merely overlap with others are no contention, and polling's own reads need not give way.
    if (priority === 'normal' && this.sleepingForTokens) this.normalQueuedAtMs = Date.now();
    return new Promise((resolve, reject) => {
      this.queues[priority].push({ resolve, reject });
      void this.drain();
    });
  }

  rateLimited(retryAfterMs: number | null): void {
    // When Redis does not take it, the next take fails as well, and says so to its request.
    this.bucket.rateLimited(retryAfterMs).then(
      (answer) => this.note(answer),
      () => {},
    );
  }

  currentRate(): number {
    return this.last.ratePerSec;
  }

  isLimited(): boolean {
    return this.last.limited;
  }

  contendedWithin(windowMs: number, nowMs: number = Date.now()): boolean {
    // Still waiting, however long ago it began (a Retry-After of a minute, say).
    if (this.sleepingForTokens && this.queues.normal.length > 0) return true;
    return nowMs - this.normalQueuedAtMs <= windowMs;
  }

  async whenOpen(): Promise<void> {
    for (;;) {
      const now = performance.now();
      if (now < this.heldUntilMs) {
        await sleep(this.heldUntilMs - now);
        continue;
      }
      // An answer of a moment ago (a take's, another whenOpen's) says as much as a new one:
      // a Retry-After set since is still waited for by the token the request then takes.
      if (now - this.lastAtMs <= ANSWER_FRESH_MS) return;
      try {
        this.peeking ??= this.bucket.peek().finally(() => {
          this.peeking = null;
        });
        this.note(await this.peeking);
      } catch {
        // Only a courtesy before a submission: its own acquire fails with the typed error.
        return;
      }
      if (this.heldUntilMs <= performance.now()) return;
    }
  }

  waiting(): number {
    return this.queues.poll.length + this.queues.normal.length;
  }

  private note(answer: SharedBucketAnswer): void {
    this.last = { ratePerSec: answer.ratePerSec, limited: answer.limited };
    this.lastAtMs = performance.now();
    this.heldUntilMs = this.lastAtMs + answer.heldMs;
  }

  private async drain(): Promise<void> {
    if (this.draining) return;
    this.draining = true;
    try {
      while (this.waiting() > 0) {
        let answer: SharedBucketAnswer;
        try {
          // A token for every request waiting, in one call (those there are): one round trip
          // to Redis per request was a tenth of a submission's cost (issue 14).
          answer = await this.bucket.take(this.waiting());
        } catch (error) {
          for (const waiter of [...this.queues.poll.splice(0), ...this.queues.normal.splice(0)]) waiter.reject(error);
          return;
        }
        this.note(answer);
        for (let i = 0; i < answer.taken; i++) (this.queues.poll.shift() ?? this.queues.normal.shift())?.resolve();
        // Every waiter served (a newcomer starts the next loop), or more tokens now.
        if (answer.waitMs <= 0 || this.waiting() === 0) continue;
        if (this.queues.normal.length > 0) this.normalQueuedAtMs = Date.now();
        this.sleepingForTokens = true;
        try {
          await sleep(answer.waitMs);
        } finally {
          this.sleepingForTokens = false;
        }
      }
    } finally {
      this.draining = false;
    }
  }
}
