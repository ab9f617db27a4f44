import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.js';
import { RequestBudget } from '../../src/sched/request-budget.js';

/** Whether a promise has settled by the time the microtasks and one macrotask turn have run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => {
    done = true;
  });
  await new Promise<void>((resolve) => setImmediate(resolve));
  return done;
}

describe('RequestBudget on a moved clock', () => {
  it('serves a waiting request when the clock reaches its token, not before (no real waiting)', async () => {
    const clock = new ManualClock(1_000_000);
    // One token a minute: on real time this test would take a minute per request.
    const budget = new RequestBudget(2, 1 / 60, clock);
    await budget.acquire();
    await budget.acquire();
    const third = budget.acquire();
    expect(await settled(third)).toBe(false);
    await clock.advance(59_000);
    expect(await settled(third)).toBe(false);
    await clock.advance(1_000);
    expect(await settled(third)).toBe(true);
  });

  it('holds everything for a Retry-After of the clock, and polls go first after it', async () => {
    const clock = new ManualClock(1_000_000);
    const budget = new RequestBudget(10, 5, clock);
    budget.rateLimited(120_000);
    const order: string[] = [];
    const normal = budget.acquire('normal').then(() => order.push('normal'));
    const poll = budget.acquire('poll').then(() => order.push('poll'));
    const open = budget.whenOpen();
    await clock.advance(119_999);
    expect(await settled(open)).toBe(false);
    expect(order).toEqual([]);
    // The hold is over: the pace after a 429 is one at a time (half of 5 a second), polls first.
    await clock.advance(1);
    expect(await settled(open)).toBe(true);
    await clock.advance(1_000);
    await Promise.all([normal, poll]);
    expect(order).toEqual(['poll', 'normal']);
    expect(budget.currentRate()).toBeCloseTo(2.5, 1);
  });
});

describe('contention on a moved clock', () => {
  it('lasts as long as a request other than a poll waits, past the window, and then the window', async () => {
    const clock = new ManualClock(1_000_000);
    const budget = new RequestBudget(1, 1 / 60, clock);
    await budget.acquire('poll');
    expect(budget.contendedWithin(10_000)).toBe(false);
    const lookup = budget.acquire('normal');
    expect(budget.contendedWithin(10_000)).toBe(true);
    // Waiting for a minute's token: still contention 30 s in, beyond the 10-s window.
    await clock.advance(30_000);
    expect(budget.contendedWithin(10_000)).toBe(true);
    await clock.advance(30_000);
    expect(await settled(lookup)).toBe(true);
    await clock.advance(10_001);
    expect(budget.contendedWithin(10_000)).toBe(false);
  });
});
