import { and, eq, lte, sql } from 'drizzle-orm';
import type { History } from './history.js';

/**
 * The language model's daily budget (requests and tokens, per UTC day), shared by every
 * process and host writing summaries into one history.
 */

/** The UTC day a time falls in, as `YYYY-MM-DD`: the budget's day. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export interface BudgetLimits {
  maxRequests: number;
  maxTokens: number;
}

/**
 * Reserves one request and an upper bound of its tokens from the day's budget, or refuses
 * when either would go over. One statement that adds only while the sums stay within the
 * limits, so two hosts cannot both take the last request.
 */
export async function reserveLlmBudget(
  h: History,
  day: string,
  limits: BudgetLimits,
  tokens: number,
  at = Date.now(),
): Promise<{ ok: true } | { ok: false; used: { requests: number; tokens: number } }> {
  const t = h.t.llmUsage;
  const fits = 1 <= limits.maxRequests && tokens <= limits.maxTokens;
  const taken = fits
    ? await h.run(
        h.db
          .insert(t)
          .values({ day, requests: 1, tokens, updatedAt: at })
          .onConflictDoUpdate({
            target: t.day,
            set: { requests: sql`${t.requests} + 1`, tokens: sql`${t.tokens} + ${tokens}`, updatedAt: at },
            setWhere: and(lte(t.requests, limits.maxRequests - 1), lte(t.tokens, limits.maxTokens - tokens)),
          }),
      )
    : 0;
  return taken > 0 ? { ok: true } : { ok: false, used: await llmUsageOf(h, day) };
}

/** Replaces a reservation's token bound by what the call really used (0 when it used none). */
export async function settleLlmBudget(
  h: History,
  day: string,
  reservedTokens: number,
  usedTokens: number,
): Promise<void> {
  const t = h.t.llmUsage;
  const settled = sql`${t.tokens} - ${reservedTokens} + ${usedTokens}`;
  await h.run(
    h.db
      .update(t)
      .set({ tokens: sql`case when ${settled} < 0 then 0 else ${settled} end`, updatedAt: Date.now() })
      .where(eq(t.day, day)),
  );
}

export async function llmUsageOf(h: History, day: string): Promise<{ requests: number; tokens: number }> {
  const t = h.t.llmUsage;
  const row = await h.one(h.db.select().from(t).where(eq(t.day, day)));
  return { requests: row?.requests ?? 0, tokens: row?.tokens ?? 0 };
}
