import { and, eq, isNotNull, isNull } from 'drizzle-orm';
import type { History } from './history.js';

/** Queries of an admin's pause of a pipeline's schedule (kept on the pipeline's schedule row). */

export interface SchedulePause {
  /** Who paused it: `token <name>` or `password`, as the UI and the API name callers. */
  by: string;
  at: number;
}

/** Every paused pipeline, by name: one read serves a whole listing or catch-up pass. */
export async function schedulePauses(h: History): Promise<Map<string, SchedulePause>> {
  const t = h.t.pipelineSchedules;
  const rows = await h.all(h.db.select().from(t).where(isNotNull(t.pausedAt)));
  return new Map(rows.map((r) => [r.pipeline, { by: r.pausedBy ?? 'unknown', at: r.pausedAt as number }]));
}

/**
 * Pauses a pipeline's schedule. Pausing one already paused keeps the first
 * pause: the page goes on saying who stopped it and since when. The rows changed: 0 when it
 * was paused already.
 */
export function pauseSchedule(h: History, pipeline: string, pause: SchedulePause): Promise<number> {
  const t = h.t.pipelineSchedules;
  return h.run(
    h.db
      .insert(t)
      .values({ pipeline, pausedAt: pause.at, pausedBy: pause.by, updatedAt: pause.at })
      .onConflictDoUpdate({
        target: t.pipeline,
        set: { pausedAt: pause.at, pausedBy: pause.by, updatedAt: pause.at },
        setWhere: isNull(t.pausedAt),
      }),
  );
}

/**
 * Lifts a pause; a schedule that is not paused is left as it is. The catch-up
 * mark moves to `at`: ticks that fell while the schedule was paused are not
 * owed, so resuming never fires a burst of catch-up runs for them. The rows changed: 0 when
 * it was not paused.
 */
export function resumeSchedule(h: History, pipeline: string, at: number): Promise<number> {
  const t = h.t.pipelineSchedules;
  return h.run(
    h.db
      .update(t)
      .set({ pausedAt: null, pausedBy: null, lastScheduledFor: at, updatedAt: at })
      .where(and(eq(t.pipeline, pipeline), isNotNull(t.pausedAt))),
  );
}
