import { and, asc, desc, eq, inArray, lt, type SQL, sql } from 'drizzle-orm';
import type { History } from './history.js';
import type { JobRequestRow, PipelineRunRow, RunState } from './schema.js';

/** Queries of pipeline runs; their steps are job requests with the run's id. */

export interface RunFilter {
  pipeline?: string;
  state?: RunState[];
  /** Cursor: runs created before this (ms), newest first. */
  before?: number;
  limit?: number;
}

export function listRuns(h: History, filter: RunFilter = {}): Promise<PipelineRunRow[]> {
  const t = h.t.pipelineRuns;
  const where: SQL[] = [];
  if (filter.pipeline) where.push(eq(t.pipeline, filter.pipeline));
  if (filter.state?.length) where.push(inArray(t.state, filter.state));
  if (filter.before) where.push(lt(t.createdAt, filter.before));
  return h.all(
    h.db
      .select()
      .from(t)
      .where(where.length ? and(...where) : undefined)
      .orderBy(desc(t.createdAt))
      .limit(filter.limit ?? 50),
  );
}

export async function getRun(h: History, id: string): Promise<PipelineRunRow | undefined> {
  const t = h.t.pipelineRuns;
  // Prepared: each submission of a step reads its run (stepDependencies), as does each page of one.
  const rows = await h.prepared(
    'runs.getRun',
    () =>
      h.db
        .select()
        .from(t)
        .where(eq(t.id, sql.placeholder('id'))),
    { id },
  );
  return rows[0];
}

/** Every request of a run, all attempts, in step then attempt order. */
export function stepRequests(h: History, runId: string): Promise<JobRequestRow[]> {
  const t = h.t.jobRequests;
  // Prepared: read for each submission of a step and each pass of the pipeline tick over a run.
  return h.prepared(
    'runs.stepRequests',
    () =>
      h.db
        .select()
        .from(t)
        .where(eq(t.runId, sql.placeholder('runId')))
        .orderBy(asc(t.step), asc(t.attempt)),
    { runId },
  );
}
