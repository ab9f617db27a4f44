import { describe, expect, it } from 'vitest';
import { llmUsageOf, reserveLlmBudget, settleLlmBudget } from '../../../src/db/llm-budget.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/** The language model's daily budget, on SQLite and on PostgreSQL, shared by several hosts. */

const histories = testHistories();
const limits = { maxRequests: 3, maxTokens: 1000 };

describe.each(DIALECTS)('the LLM budget on %s', (dialect) => {
  it('reserves within both limits, refuses past either, and settles to what a call used', async () => {
    const h = await histories.make(dialect);
    expect(await reserveLlmBudget(h, '2026-11-26', limits, 600)).toEqual({ ok: true });
    expect(await reserveLlmBudget(h, '2026-11-26', limits, 500)).toEqual({
      ok: false,
      used: { requests: 1, tokens: 600 },
    });
    await settleLlmBudget(h, '2026-11-26', 600, 150);
    expect(await reserveLlmBudget(h, '2026-11-26', limits, 500)).toEqual({ ok: true });
    expect(await reserveLlmBudget(h, '2026-11-26', limits, 10)).toEqual({ ok: true });
    expect(await reserveLlmBudget(h, '2026-11-26', limits, 10)).toEqual({
      ok: false,
      used: { requests: 3, tokens: 660 },
    });
    // A call that used none, settled below zero by a bound larger than what was counted: 0.
    await settleLlmBudget(h, '2026-11-26', 5000, 0);
    expect(await llmUsageOf(h, '2026-11-26')).toEqual({ requests: 3, tokens: 0 });
    // A prompt larger than the day's tokens is refused on a fresh day too.
    expect(await reserveLlmBudget(h, '2026-11-27', limits, 1001)).toMatchObject({ ok: false });
    expect(await llmUsageOf(h, '2026-11-27')).toEqual({ requests: 0, tokens: 0 });
  });

  // On SQLite the hosts are processes of one machine, whose writes SQLite takes one at a time.
  it.skipIf(dialect === 'sqlite')('lets two hosts together take no more than the day allows', async () => {
    const h = await histories.make(dialect);
    const other = await histories.again(h);
    const tries = Array.from({ length: 10 }, (_, i) => reserveLlmBudget(i % 2 ? h : other, '2026-11-26', limits, 100));
    const taken = (await Promise.all(tries)).filter((r) => r.ok).length;
    expect(taken).toBe(3);
    expect(await llmUsageOf(h, '2026-11-26')).toEqual({ requests: 3, tokens: 300 });
  });
});
