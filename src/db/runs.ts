import { and, asc, desc, eq, inArray, lt, type SQL } from 'drizzle-orm';
import type { Db } from './database.js';
import { type JobRequestRow, jobRequests, type PipelineRunRow, pipelineRuns, type RunState } from './schema.js';

/** Queries of pipeline runs; their steps are job requests with the run's id. */

export interface RunFilter {
  pipeline?: string;
  state?: RunState[];
  /** Cursor: runs created before this (ms), newest first. */
  before?: number;
  limit?: number;
}

export function listRuns(db: Db, filter: RunFilter = {}): PipelineRunRow[] {
  const where: SQL[] = [];
  if (filter.pipeline) where.push(eq(pipelineRuns.pipeline, filter.pipeline));
  if (filter.state?.length) where.push(inArray(pipelineRuns.state, filter.state));
  if (filter.before) where.push(lt(pipelineRuns.createdAt, filter.before));
  return db
    .select()
    .from(pipelineRuns)
    .where(where.length ? and(...where) : undefined)
    .orderBy(desc(pipelineRuns.createdAt))
    .limit(filter.limit ?? 50)
    .all();
}

export function getRun(db: Db, id: string): PipelineRunRow | undefined {
  return db.select().from(pipelineRuns).where(eq(pipelineRuns.id, id)).get();
}

/** Every request of a run, all attempts, in step then attempt order. */
export function stepRequests(db: Db, runId: string): JobRequestRow[] {
  return db
    .select()
    .from(jobRequests)
    .where(eq(jobRequests.runId, runId))
    .orderBy(asc(jobRequests.step), asc(jobRequests.attempt))
    .all();
}
