import { and, desc, eq, getTableColumns, gte, inArray, isNotNull, isNull, lt, type SQL, sql } from 'drizzle-orm';
import { arrayTaskOfRecord } from '../db/accounting.js';
import type { History } from '../db/history.js';
import type { AccountingJobRow, JobRequestRow, PipelineRunRow, RequestState, RunState } from '../db/schema.js';

/**
 * The API's list queries: keyset pages (newest first, with a unique
 * tie-breaker, so rows created in the same millisecond are neither skipped nor
 * repeated across pages), and the filters of its routes. The CLI's simpler
 * lists stay in src/db; these take one row more than the page to know whether
 * there is a next one.
 */

export interface JobsFilter {
  states?: RequestState[];
  profile?: string;
  pipeline?: string;
  runId?: string;
  createdSince?: number;
  createdUntil?: number;
  /** The sort key of the last row of the page before: created_at, id. */
  after?: readonly [number, string];
  limit: number;
}

/** A request as lists show it: every column but its spec (up to a megabyte of JSON to parse). */
export type JobListRow = Omit<JobRequestRow, 'spec'>;

export function jobsPage(h: History, filter: JobsFilter): Promise<JobListRow[]> {
  const { jobRequests, pipelineRuns } = h.t;
  const { spec: _spec, ...listColumns } = getTableColumns(jobRequests);
  // Prepared once per shape of filter (which filters are given, how many states), the values
  // bound: building and preparing the query on each call was most of a page's cost (issue 14).
  const values: Record<string, unknown> = { limit: filter.limit + 1 };
  const bind = (name: string, value: unknown) => {
    values[name] = value;
    return sql.placeholder(name);
  };
  const where: SQL[] = [];
  const shape: string[] = [];
  // Each state once: the shapes, and so the statements kept, stay as few as the states.
  const states = [...new Set(filter.states)];
  if (states.length) {
    where.push(
      inArray(
        jobRequests.state,
        states.map((state, i) => bind(`state${i}`, state)),
      ),
    );
    shape.push(`states${states.length}`);
  }
  if (filter.profile) {
    where.push(eq(jobRequests.profile, bind('profile', filter.profile)));
    shape.push('profile');
  }
  if (filter.runId) {
    where.push(eq(jobRequests.runId, bind('runId', filter.runId)));
    shape.push('runId');
  }
  if (filter.pipeline) {
    const pipeline = bind('pipeline', filter.pipeline);
    where.push(
      inArray(
        jobRequests.runId,
        h.db.select({ id: pipelineRuns.id }).from(pipelineRuns).where(eq(pipelineRuns.pipeline, pipeline)),
      ),
    );
    shape.push('pipeline');
  }
  if (filter.createdSince !== undefined) {
    where.push(gte(jobRequests.createdAt, bind('createdSince', filter.createdSince)));
    shape.push('since');
  }
  if (filter.createdUntil !== undefined) {
    where.push(lt(jobRequests.createdAt, bind('createdUntil', filter.createdUntil)));
    shape.push('until');
  }
  if (filter.after) {
    where.push(
      sql`(${jobRequests.createdAt}, ${jobRequests.id}) < (${bind('afterAt', filter.after[0])}, ${bind('afterId', filter.after[1])})`,
    );
    shape.push('after');
  }
  return h.prepared(
    `jobsPage:${shape.join(',')}`,
    () =>
      h.db
        .select(listColumns)
        .from(jobRequests)
        .where(where.length ? and(...where) : undefined)
        .orderBy(desc(jobRequests.createdAt), desc(jobRequests.id))
        .limit(sql.placeholder('limit')),
    values,
  );
}

export interface HistoryFilter {
  profile?: string;
  /** Slurm base states (COMPLETED, FAILED, …). */
  states?: string[];
  /** Submit time, Unix seconds. */
  sinceSec?: number;
  untilSec?: number;
  external?: boolean;
  /** The sort key of the last row of the page before: submit time (0 when unknown), job id, profile. */
  after?: readonly [number, number, string];
  limit: number;
}

export interface HistoryPageRow {
  accounting: AccountingJobRow;
  localState: RequestState | null;
  /** The array task the record is, when it is one of an array request's. */
  taskId: number | null;
}

/**
 * Accounting records beside the local request, newest submission first: the
 * query of `history()` in src/db/accounting.ts, with the API's filters and
 * keyset paging.
 */
export function historyPage(h: History, filter: HistoryFilter): Promise<HistoryPageRow[]> {
  const { accountingJobs, jobRequests, arrayTasks } = h.t;
  const submitKey = sql<number>`coalesce(${accountingJobs.submitTime}, 0)`;
  const where: SQL[] = [];
  if (filter.profile) where.push(eq(accountingJobs.profile, filter.profile));
  if (filter.states?.length) where.push(inArray(accountingJobs.state, filter.states));
  if (filter.sinceSec !== undefined) where.push(gte(accountingJobs.submitTime, filter.sinceSec));
  if (filter.untilSec !== undefined) where.push(lt(accountingJobs.submitTime, filter.untilSec));
  if (filter.external === true) where.push(isNull(accountingJobs.requestId));
  if (filter.external === false) where.push(isNotNull(accountingJobs.requestId));
  if (filter.after) {
    const [submit, jobId, profile] = filter.after;
    where.push(
      sql`(${submitKey}, ${accountingJobs.jobId}, ${accountingJobs.profile}) < (${submit}, ${jobId}, ${profile})`,
    );
  }
  return h.all(
    h.db
      .select({ accounting: accountingJobs, localState: jobRequests.state, taskId: arrayTasks.taskId })
      .from(accountingJobs)
      .leftJoin(jobRequests, eq(jobRequests.id, accountingJobs.requestId))
      .leftJoin(arrayTasks, arrayTaskOfRecord(h))
      .where(where.length ? and(...where) : undefined)
      .orderBy(desc(submitKey), desc(accountingJobs.jobId), desc(accountingJobs.profile))
      .limit(filter.limit + 1),
  );
}

export interface RunsFilter {
  pipeline?: string;
  states?: RunState[];
  /** The sort key of the last row of the page before: created_at, id. */
  after?: readonly [number, string];
  limit: number;
}

/** Pipeline runs, newest first: `listRuns` of src/db/runs.ts with a tie-breaker for paging. */
export function runsPage(h: History, filter: RunsFilter): Promise<PipelineRunRow[]> {
  const { pipelineRuns } = h.t;
  const where: SQL[] = [];
  if (filter.pipeline) where.push(eq(pipelineRuns.pipeline, filter.pipeline));
  if (filter.states?.length) where.push(inArray(pipelineRuns.state, filter.states));
  if (filter.after) {
    where.push(sql`(${pipelineRuns.createdAt}, ${pipelineRuns.id}) < (${filter.after[0]}, ${filter.after[1]})`);
  }
  return h.all(
    h.db
      .select()
      .from(pipelineRuns)
      .where(where.length ? and(...where) : undefined)
      .orderBy(desc(pipelineRuns.createdAt), desc(pipelineRuns.id))
      .limit(filter.limit + 1),
  );
}

/** Requests per state, for /metrics. */
export async function requestCountsByState(h: History): Promise<{ state: RequestState; count: number }[]> {
  const { jobRequests } = h.t;
  const rows = await h.all(
    h.db
      .select({ state: jobRequests.state, count: sql<number>`count(*)` })
      .from(jobRequests)
      .groupBy(jobRequests.state),
  );
  // PostgreSQL's count is a bigint, which pg hands over as text.
  return rows.map((row) => ({ state: row.state, count: Number(row.count) }));
}
