import { eq, isNull, lt, or } from 'drizzle-orm';
import type { History } from './history.js';

/** Queries of the last cron tick each schedule made a run for (pipeline_schedules), for catch-up. */

/** The last tick (ms) a run was made for, or null: none yet, or never seen. */
export async function lastTickOf(h: History, pipeline: string): Promise<number | null> {
  const s = h.t.pipelineSchedules;
  const row = await h.one(h.db.select({ last: s.lastScheduledFor }).from(s).where(eq(s.pipeline, pipeline)));
  return row?.last ?? null;
}

/**
 * Moves a schedule's last tick forward to `lastScheduledFor`, never back: one statement, so a
 * tick recorded meanwhile (a fire on another worker or host) is not overwritten by an older one.
 */
export async function advanceLastTick(
  h: History,
  pipeline: string,
  lastScheduledFor: number,
  now: number,
): Promise<void> {
  const s = h.t.pipelineSchedules;
  await h.run(
    h.db
      .insert(s)
      .values({ pipeline, lastScheduledFor, updatedAt: now })
      .onConflictDoUpdate({
        target: s.pipeline,
        set: { lastScheduledFor, updatedAt: now },
        setWhere: or(isNull(s.lastScheduledFor), lt(s.lastScheduledFor, lastScheduledFor)),
      }),
  );
}
