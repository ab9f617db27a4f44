import { and, eq, isNotNull, isNull } from 'drizzle-orm';
import type { Db } from './database.js';
import { pipelineSchedules } from './schema.js';

/** Queries of an admin's pause of a pipeline's schedule (kept on the pipeline's schedule row). */

export interface SchedulePause {
  /** Who paused it: `token <name>` or `password`, as the UI and the API name callers. */
  by: string;
  at: number;
}

/** Every paused pipeline, by name: one read serves a whole listing or catch-up pass. */
export function schedulePauses(db: Db): Map<string, SchedulePause> {
  const rows = db.select().from(pipelineSchedules).where(isNotNull(pipelineSchedules.pausedAt)).all();
  return new Map(rows.map((r) => [r.pipeline, { by: r.pausedBy ?? 'unknown', at: r.pausedAt as number }]));
}

/**
 * Pauses a pipeline's schedule. Pausing one already paused keeps the first
 * pause: the page goes on saying who stopped it and since when.
 */
export function pauseSchedule(db: Db, pipeline: string, pause: SchedulePause): void {
  db.insert(pipelineSchedules)
    .values({ pipeline, pausedAt: pause.at, pausedBy: pause.by, updatedAt: pause.at })
    .onConflictDoUpdate({
      target: pipelineSchedules.pipeline,
      set: { pausedAt: pause.at, pausedBy: pause.by, updatedAt: pause.at },
      setWhere: isNull(pipelineSchedules.pausedAt),
    })
    .run();
}

/**
 * Lifts a pause; a schedule that is not paused is left as it is. The catch-up
 * mark moves to `at`: ticks that fell while the schedule was paused are not
 * owed, so resuming never fires a burst of catch-up runs for them.
 */
export function resumeSchedule(db: Db, pipeline: string, at: number): void {
  db.update(pipelineSchedules)
    .set({ pausedAt: null, pausedBy: null, lastScheduledFor: at, updatedAt: at })
    .where(and(eq(pipelineSchedules.pipeline, pipeline), isNotNull(pipelineSchedules.pausedAt)))
    .run();
}
