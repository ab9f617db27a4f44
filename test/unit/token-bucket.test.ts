import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../../src/lib/token-bucket.js';

describe('TokenBucket', () => {
  it('allows a burst of its capacity, then refills at its rate', () => {
    const bucket = new TokenBucket(3, 2, 0);
    expect([bucket.tryTake(0), bucket.tryTake(0), bucket.tryTake(0), bucket.tryTake(0)]).toEqual([
      true,
      true,
      true,
      false,
    ]);
    expect(bucket.msUntilToken(0)).toBe(500);
    expect(bucket.tryTake(499)).toBe(false);
    expect(bucket.tryTake(500)).toBe(true);
  });

  it('never holds more than its capacity', () => {
    const bucket = new TokenBucket(2, 10, 0);
    expect(bucket.isFull(60_000)).toBe(true);
    expect([bucket.tryTake(60_000), bucket.tryTake(60_000), bucket.tryTake(60_000)]).toEqual([true, true, false]);
  });
});
