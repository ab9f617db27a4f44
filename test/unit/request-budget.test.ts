import { describe, expect, it } from 'vitest';
import { RequestBudget } from '../../src/sched/request-budget.js';

describe('RequestBudget pace after 429s', () => {
  it('halves the pace on a 429, once per overrun', () => {
    const budget = new RequestBudget(10, 5);
    budget.rateLimited(1000, 0);
    expect(budget.currentRate(1000)).toBe(2.5);
    // Another 429 within the hold is the same overrun: the pace is not halved again.
    budget.rateLimited(1000, 500);
    expect(budget.currentRate(1000)).toBe(2.5);
  });

  it('grows back slowly toward the refused pace, then at the configured share beyond it', () => {
    const budget = new RequestBudget(10, 5);
    budget.rateLimited(1000, 0); // refused at 5: 2.5 from t = 1 s
    budget.rateLimited(1000, 1000); // refused at 2.5: 1.25 from t = 2 s
    expect(budget.currentRate(2000)).toBe(1.25);
    // 1 % of the refused 2.5 a second: back at 2.5 after 50 s, not after 25 s (1 % of 5 a second).
    expect(budget.currentRate(2000 + 25_000)).toBeCloseTo(1.875, 6);
    expect(budget.currentRate(2000 + 50_000)).toBeCloseTo(2.5, 6);
    // Past the refused pace the limit has gone up: 1 % of the configured 5 a second.
    expect(budget.currentRate(2000 + 60_000)).toBeCloseTo(3, 6);
    expect(budget.currentRate(2000 + 100_000)).toBe(5);
    expect(budget.isLimited(2000 + 100_000)).toBe(false);
  });

  it('never drops below a tenth of a request a second', () => {
    const budget = new RequestBudget(10, 5);
    for (let i = 0; i < 10; i++) budget.rateLimited(100, i * 1000);
    expect(budget.currentRate(9100)).toBeCloseTo(0.1, 6);
  });
});
