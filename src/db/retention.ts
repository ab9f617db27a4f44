import {
  type AnyColumn,
  and,
  asc,
  count,
  inArray,
  isNotNull,
  lt,
  notInArray,
  or,
  type SQL,
  type SQLWrapper,
  sql,
} from 'drizzle-orm';
import { nextTurn } from '../lib/turns.js';
import type { History } from './history.js';
import { keepJobUsage } from './job-usage.js';
import { type JobRequestRow, TERMINAL_REQUEST_STATES, TERMINAL_RUN_STATES } from './schema.js';

/**
 * Retention: how long the history keeps its detail, and the pruner that removes what is older,
 * in slices (a bounded batch per transaction, a turn of the event loop between two): no long
 * write lock on SQLite, no long transaction on PostgreSQL.
 *
 * What is never removed: a request that has not ended (`lost` included: accounting may still
 * resolve it), one whose pipeline run is still live, one of an attempt chain with a live
 * attempt or a retry due, one whose summary or webhook delivery is still to be made. A pruned
 * request's children go in its slice's transaction, before it: transitions, array tasks,
 * replays, deadline misses, deliveries, its summary, its accounting record (at the latest with
 * it). A pipeline step's usage (job_usage) is kept first, so the efficiency trends stay.
 *
 * An ended pipeline run goes once its step requests are gone (never before them), with its
 * transitions, its own deadline misses, deliveries and summary, and its steps' kept usage; the
 * last runs of each pipeline its efficiency trend reads stay, with their usage.
 */

/** Ages past which rows go (ms); 0 keeps them for ever. */
export interface RetentionSettings {
  requestsMs: number;
  summariesMs: number;
  deliveriesMs: number;
  accountingMs: number;
  /** Ended pipeline runs, once their step requests are gone. */
  runsMs: number;
  /**
   * The last ended runs kept per pipeline (and owner) whatever their age: those the efficiency
   * trend of the next run reads (SCHEDFLOW_SUMMARY_TREND_RUNS).
   */
  keepRunsPerPipeline: number;
  auditMs: number;
}

/** Tables the pruner removes rows from, in the order it reports them. */
export const PRUNED_TABLES = [
  'job_requests',
  'job_transitions',
  'array_tasks',
  'request_replays',
  'deadline_misses',
  'webhook_deliveries',
  'summaries',
  'accounting_jobs',
  'pipeline_runs',
  'run_transitions',
  'job_usage',
  'audit_log',
] as const;
export type PrunedTable = (typeof PRUNED_TABLES)[number];
export type PruneCounts = Record<PrunedTable, number>;

/** Rows (requests, records, deliveries…) chosen per slice: a few milliseconds of deletes. */
export const PRUNE_SLICE_ROWS = 200;

export function noCounts(): PruneCounts {
  return Object.fromEntries(PRUNED_TABLES.map((t) => [t, 0])) as PruneCounts;
}

/** Requests retention may remove at `cutoff` (ms): ended before it, nothing live needing them. */
function prunableRequests(h: History, cutoff: number): SQL {
  const { jobRequests: r, pipelineRuns, summaries, webhookDeliveries } = h.t;
  const chain = sql`coalesce(${r.firstAttemptId}, ${r.id})`;
  return and(
    // created_at is indexed, and a request ends after it was made.
    lt(r.createdAt, cutoff),
    inArray(r.state, [...TERMINAL_REQUEST_STATES]),
    lt(sql`coalesce(${r.endedAt}, ${r.updatedAt})`, cutoff),
    sql`${r.retryDueAt} is null`,
    isNotNull(r.summaryCheckedAt),
    sql`not exists (select 1 from ${pipelineRuns} where ${pipelineRuns.id} = ${r.runId} and ${notInArray(pipelineRuns.state, [...TERMINAL_RUN_STATES])})`,
    // Another attempt of its chain live, or due: the chain is kept whole.
    sql`not exists (select 1 from ${r} o where (o.id = ${chain} or o.first_attempt_id = ${chain}) and (o.state not in (${sql.join(
      TERMINAL_REQUEST_STATES.map((s) => sql`${s}`),
      sql`, `,
    )}) or o.retry_due_at is not null))`,
    sql`not exists (select 1 from ${summaries} where ${summaries.requestId} = ${r.id} and ${summaries.state} = 'pending')`,
    sql`not exists (select 1 from ${webhookDeliveries} where ${webhookDeliveries.requestId} = ${r.id} and ${webhookDeliveries.state} = 'pending')`,
  ) as SQL;
}

/**
 * Runs retention may remove at `cutoff`: ended before it, taken up by the summaries, none of
 * its summary or deliveries pending, no step request left (`requestsGoing`: but those, removed
 * by the same prune before it), and not among the last `keep` ended runs of its pipeline and
 * owner, as the trend reads them (src/db/summaries.ts endedRunsOf).
 */
function prunableRuns(h: History, cutoff: number, keep: number, requestsGoing: SQLWrapper | null): SQL {
  const { pipelineRuns: p, jobRequests: r, summaries, webhookDeliveries } = h.t;
  const trendStates = ['succeeded', 'failed'] as const;
  return and(
    lt(p.createdAt, cutoff),
    inArray(p.state, [...TERMINAL_RUN_STATES]),
    lt(sql`coalesce(${p.endedAt}, ${p.updatedAt})`, cutoff),
    isNotNull(p.summaryCheckedAt),
    sql`not exists (select 1 from ${r} where ${r.runId} = ${p.id}${requestsGoing ? sql` and ${r.id} not in (${requestsGoing})` : sql``})`,
    sql`not exists (select 1 from ${summaries} where ${summaries.runId} = ${p.id} and ${summaries.state} = 'pending')`,
    sql`not exists (select 1 from ${webhookDeliveries} where ${webhookDeliveries.runId} = ${p.id} and ${webhookDeliveries.state} = 'pending')`,
    keep > 0
      ? sql`${p.id} not in (select k.id from ${p} k where k.pipeline = ${p.pipeline} and k.owner = ${p.owner} and k.state in (${sql.join(
          trendStates.map((s) => sql`${s}`),
          sql`, `,
        )}) order by k.created_at desc, k.id desc limit ${keep})`
      : undefined,
  ) as SQL;
}

function prunableDeliveries(h: History, cutoff: number): SQL {
  const d = h.t.webhookDeliveries;
  return and(
    inArray(d.state, ['delivered', 'failed']),
    lt(d.createdAt, cutoff),
    lt(sql`coalesce(${d.deliveredAt}, ${d.updatedAt})`, cutoff),
  ) as SQL;
}

function prunableSummaries(h: History, cutoff: number): SQL {
  const s = h.t.summaries;
  return and(
    inArray(s.state, ['ready', 'failed']),
    lt(s.createdAt, cutoff),
    lt(sql`coalesce(${s.completedAt}, ${s.updatedAt})`, cutoff),
  ) as SQL;
}

/** Accounting records of jobs that ended before `cutoff`, unless their request is still live. */
function prunableAccounting(h: History, cutoff: number): SQL {
  const { accountingJobs: a, jobRequests: r } = h.t;
  return and(
    isNotNull(a.endTime),
    lt(a.endTime, Math.floor(cutoff / 1000)),
    or(
      sql`${a.requestId} is null`,
      sql`not exists (select 1 from ${r} where ${r.id} = ${a.requestId} and ${notInArray(r.state, [...TERMINAL_REQUEST_STATES])})`,
    ),
  ) as SQL;
}

function prunableAudit(h: History, cutoff: number): SQL {
  return lt(h.t.auditLog.at, cutoff);
}

const num = (n: unknown): number => Number(n ?? 0);

/**
 * The rows whose run (if any) is still ended, the runs locked until the prune's transaction ends.
 * A resume (src/pipelines/run-resume.ts) locks the run too and moves it back to `running`: on
 * PostgreSQL it could commit between the select above and the deletes, and the prune would take
 * the kept steps of a run being resumed. Locked here, one waits for the other: the prune sees the
 * run running and keeps its steps, or the resume sees them gone and is refused.
 */
async function stillEndedRuns(tx: History, rows: readonly JobRequestRow[]): Promise<JobRequestRow[]> {
  const runIds = [...new Set(rows.map((r) => r.runId).filter((id): id is string => id !== null))];
  if (runIds.length === 0) return [...rows];
  const p = tx.t.pipelineRuns;
  const live = new Set(
    (
      await tx.all(
        tx.forUpdate(
          tx.db.select({ id: p.id, state: p.state }).from(p).where(inArray(p.id, runIds)).orderBy(asc(p.id)),
        ),
      )
    )
      .filter((r) => !(TERMINAL_RUN_STATES as readonly string[]).includes(r.state))
      .map((r) => r.id),
  );
  return rows.filter((r) => r.runId === null || !live.has(r.runId));
}

/** What a prune at `now` would remove, per table (counts, no write): `schedflow db stats`. */
export async function countPrunable(h: History, settings: RetentionSettings, now: number): Promise<PruneCounts> {
  const counts = noCounts();
  const t = h.t;
  const countOf = async (query: Promise<{ n: number }[]>) => num((await query)[0]?.n);
  if (settings.requestsMs > 0) {
    const ids = h.db
      .select({ id: t.jobRequests.id })
      .from(t.jobRequests)
      .where(prunableRequests(h, now - settings.requestsMs));
    counts.job_requests = await countOf(
      h.all(
        h.db
          .select({ n: count() })
          .from(t.jobRequests)
          .where(prunableRequests(h, now - settings.requestsMs)),
      ),
    );
    counts.job_transitions = await countOf(
      h.all(h.db.select({ n: count() }).from(t.jobTransitions).where(inArray(t.jobTransitions.requestId, ids))),
    );
    counts.array_tasks = await countOf(
      h.all(h.db.select({ n: count() }).from(t.arrayTasks).where(inArray(t.arrayTasks.requestId, ids))),
    );
    counts.request_replays = await countOf(
      h.all(h.db.select({ n: count() }).from(t.requestReplays).where(inArray(t.requestReplays.requestId, ids))),
    );
    counts.deadline_misses = await countOf(
      h.all(h.db.select({ n: count() }).from(t.deadlineMisses).where(inArray(t.deadlineMisses.requestId, ids))),
    );
    counts.webhook_deliveries = await countOf(
      h.all(h.db.select({ n: count() }).from(t.webhookDeliveries).where(inArray(t.webhookDeliveries.requestId, ids))),
    );
    counts.summaries = await countOf(
      h.all(h.db.select({ n: count() }).from(t.summaries).where(inArray(t.summaries.requestId, ids))),
    );
    counts.accounting_jobs = await countOf(
      h.all(h.db.select({ n: count() }).from(t.accountingJobs).where(inArray(t.accountingJobs.requestId, ids))),
    );
  }
  if (settings.runsMs > 0) {
    const going = requestsGoing(h, settings, now);
    const runIds = h.db
      .select({ id: t.pipelineRuns.id })
      .from(t.pipelineRuns)
      .where(prunableRuns(h, now - settings.runsMs, settings.keepRunsPerPipeline, going));
    counts.pipeline_runs = await countOf(
      h.all(
        h.db
          .select({ n: count() })
          .from(t.pipelineRuns)
          .where(prunableRuns(h, now - settings.runsMs, settings.keepRunsPerPipeline, going)),
      ),
    );
    counts.run_transitions = await countOf(
      h.all(h.db.select({ n: count() }).from(t.runTransitions).where(inArray(t.runTransitions.runId, runIds))),
    );
    // A run's own rows; those of its step requests are counted with them.
    const ofRun = async (table: typeof t.deadlineMisses | typeof t.webhookDeliveries | typeof t.summaries) =>
      countOf(
        h.all(
          h.db
            .select({ n: count() })
            .from(table)
            .where(and(inArray(table.runId, runIds), notGoingWithRequest(h, table.requestId, settings, now))),
        ),
      );
    counts.deadline_misses += await ofRun(t.deadlineMisses);
    counts.webhook_deliveries += await ofRun(t.webhookDeliveries);
    counts.summaries += await ofRun(t.summaries);
    // The usage kept so far, and that of its step requests the same prune keeps before it.
    const u = t.jobUsage;
    counts.job_usage = await countOf(
      h.all(
        h.db
          .select({ n: count() })
          .from(u)
          .where(and(inArray(u.runId, runIds), going ? sql`${u.requestId} not in (${going})` : undefined)),
      ),
    );
    if (going) {
      counts.job_usage += await countOf(
        h.all(
          h.db
            .select({ n: count() })
            .from(t.jobRequests)
            .where(and(inArray(t.jobRequests.runId, runIds), sql`${t.jobRequests.id} in (${going})`)),
        ),
      );
    }
  }
  // Rows of tables with retentions of their own, beside those going with their requests or runs.
  if (settings.deliveriesMs > 0) {
    const d = t.webhookDeliveries;
    counts.webhook_deliveries += await countOf(
      h.all(
        h.db
          .select({ n: count() })
          .from(d)
          .where(
            and(
              prunableDeliveries(h, now - settings.deliveriesMs),
              notGoingWithRequest(h, d.requestId, settings, now),
              notGoingWithRun(h, d.runId, settings, now),
            ),
          ),
      ),
    );
  }
  if (settings.summariesMs > 0) {
    const s = t.summaries;
    counts.summaries += await countOf(
      h.all(
        h.db
          .select({ n: count() })
          .from(s)
          .where(
            and(
              prunableSummaries(h, now - settings.summariesMs),
              notGoingWithRequest(h, s.requestId, settings, now),
              notGoingWithRun(h, s.runId, settings, now),
            ),
          ),
      ),
    );
  }
  if (settings.accountingMs > 0) {
    const a = t.accountingJobs;
    counts.accounting_jobs += await countOf(
      h.all(
        h.db
          .select({ n: count() })
          .from(a)
          .where(
            and(prunableAccounting(h, now - settings.accountingMs), notGoingWithRequest(h, a.requestId, settings, now)),
          ),
      ),
    );
  }
  if (settings.auditMs > 0) {
    counts.audit_log = await countOf(
      h.all(
        h.db
          .select({ n: count() })
          .from(t.auditLog)
          .where(prunableAudit(h, now - settings.auditMs)),
      ),
    );
  }
  return counts;
}

/** A row whose request is not among those the same prune removes (it is counted there already). */
function notGoingWithRequest(h: History, requestId: AnyColumn, settings: RetentionSettings, now: number): SQL {
  if (settings.requestsMs <= 0) return sql`1 = 1`;
  const r = h.t.jobRequests;
  return or(
    sql`${requestId} is null`,
    sql`${requestId} not in (${h.db
      .select({ id: r.id })
      .from(r)
      .where(prunableRequests(h, now - settings.requestsMs))})`,
  ) as SQL;
}

/** The requests the same prune removes (a subquery of their ids); null when none go. */
function requestsGoing(h: History, settings: RetentionSettings, now: number): SQLWrapper | null {
  if (settings.requestsMs <= 0) return null;
  const r = h.t.jobRequests;
  return h.db
    .select({ id: r.id })
    .from(r)
    .where(prunableRequests(h, now - settings.requestsMs));
}

/** A row whose run is not among those the same prune removes (it is counted there already). */
function notGoingWithRun(h: History, runId: AnyColumn, settings: RetentionSettings, now: number): SQL {
  if (settings.runsMs <= 0) return sql`1 = 1`;
  const p = h.t.pipelineRuns;
  return or(
    sql`${runId} is null`,
    sql`${runId} not in (${h.db
      .select({ id: p.id })
      .from(p)
      .where(prunableRuns(h, now - settings.runsMs, settings.keepRunsPerPipeline, requestsGoing(h, settings, now)))})`,
  ) as SQL;
}

/**
 * Removes what is older than its retention at `now`, slice by slice; returns the rows removed
 * per table. `signal` (the daemon's shutdown) stops it between two slices: the next prune
 * carries on.
 */
export async function pruneHistory(
  h: History,
  settings: RetentionSettings,
  now: number,
  signal?: AbortSignal,
): Promise<PruneCounts> {
  const counts = noCounts();
  const add = (table: PrunedTable, n: number) => {
    counts[table] += n;
  };
  const t = h.t;
  if (settings.requestsMs > 0) {
    const cutoff = now - settings.requestsMs;
    for (;;) {
      if (signal?.aborted) return counts;
      await nextTurn();
      const removed = await h.transaction(async (tx) => {
        const found = await tx.all(
          tx.db
            .select()
            .from(t.jobRequests)
            .where(prunableRequests(tx, cutoff))
            .orderBy(asc(t.jobRequests.createdAt), asc(t.jobRequests.id))
            .limit(PRUNE_SLICE_ROWS),
        );
        if (found.length === 0) return 0;
        const rows = await stillEndedRuns(tx, found);
        const ids = rows.map((r) => r.id);
        if (ids.length === 0) return found.length;
        await keepJobUsage(tx, rows, now);
        add(
          'job_transitions',
          await tx.run(tx.db.delete(t.jobTransitions).where(inArray(t.jobTransitions.requestId, ids))),
        );
        add('array_tasks', await tx.run(tx.db.delete(t.arrayTasks).where(inArray(t.arrayTasks.requestId, ids))));
        add(
          'request_replays',
          await tx.run(tx.db.delete(t.requestReplays).where(inArray(t.requestReplays.requestId, ids))),
        );
        add(
          'deadline_misses',
          await tx.run(tx.db.delete(t.deadlineMisses).where(inArray(t.deadlineMisses.requestId, ids))),
        );
        add(
          'webhook_deliveries',
          await tx.run(tx.db.delete(t.webhookDeliveries).where(inArray(t.webhookDeliveries.requestId, ids))),
        );
        add('summaries', await tx.run(tx.db.delete(t.summaries).where(inArray(t.summaries.requestId, ids))));
        add(
          'accounting_jobs',
          await tx.run(tx.db.delete(t.accountingJobs).where(inArray(t.accountingJobs.requestId, ids))),
        );
        const n = await tx.run(tx.db.delete(t.jobRequests).where(inArray(t.jobRequests.id, ids)));
        add('job_requests', n);
        return rows.length;
      });
      if (removed < PRUNE_SLICE_ROWS) break;
    }
  }
  if (settings.runsMs > 0) {
    const p = t.pipelineRuns;
    // After the requests: a run whose last step requests went just now goes in the same prune.
    const where = prunableRuns(h, now - settings.runsMs, settings.keepRunsPerPipeline, null);
    add(
      'pipeline_runs',
      await deleteInSlices(h, signal, async (tx) => {
        const ids = (
          await tx.all(
            tx.db
              .select({ id: p.id })
              .from(p)
              .where(where)
              // No ORDER BY: no index gives one here (SQLite picks pipeline_runs_state), and a
              // sort would weigh every old run's conditions each slice (a year of runs at the
              // first prune). In table order, about oldest first, a slice stops at its share.
              .limit(PRUNE_SLICE_ROWS),
          )
        ).map((r) => r.id);
        if (ids.length === 0) return 0;
        add(
          'run_transitions',
          await tx.run(tx.db.delete(t.runTransitions).where(inArray(t.runTransitions.runId, ids))),
        );
        add(
          'deadline_misses',
          await tx.run(tx.db.delete(t.deadlineMisses).where(inArray(t.deadlineMisses.runId, ids))),
        );
        add(
          'webhook_deliveries',
          await tx.run(tx.db.delete(t.webhookDeliveries).where(inArray(t.webhookDeliveries.runId, ids))),
        );
        add('summaries', await tx.run(tx.db.delete(t.summaries).where(inArray(t.summaries.runId, ids))));
        add('job_usage', await tx.run(tx.db.delete(t.jobUsage).where(inArray(t.jobUsage.runId, ids))));
        return tx.run(tx.db.delete(p).where(inArray(p.id, ids)));
      }),
    );
  }
  if (settings.deliveriesMs > 0) {
    const d = t.webhookDeliveries;
    const where = prunableDeliveries(h, now - settings.deliveriesMs);
    add(
      'webhook_deliveries',
      await deleteInSlices(h, signal, async (tx) => {
        const ids = (
          await tx.all(
            tx.db
              .select({ id: d.id })
              .from(d)
              .where(where)
              .orderBy(asc(d.createdAt), asc(d.id))
              .limit(PRUNE_SLICE_ROWS),
          )
        ).map((r) => r.id);
        return ids.length ? tx.run(tx.db.delete(d).where(inArray(d.id, ids))) : 0;
      }),
    );
  }
  if (settings.summariesMs > 0) {
    const s = t.summaries;
    const where = prunableSummaries(h, now - settings.summariesMs);
    add(
      'summaries',
      await deleteInSlices(h, signal, async (tx) => {
        const ids = (
          await tx.all(
            tx.db
              .select({ id: s.id })
              .from(s)
              .where(where)
              .orderBy(asc(s.createdAt), asc(s.id))
              .limit(PRUNE_SLICE_ROWS),
          )
        ).map((r) => r.id);
        return ids.length ? tx.run(tx.db.delete(s).where(inArray(s.id, ids))) : 0;
      }),
    );
  }
  if (settings.accountingMs > 0) {
    const a = t.accountingJobs;
    const where = prunableAccounting(h, now - settings.accountingMs);
    add(
      'accounting_jobs',
      await deleteInSlices(h, signal, async (tx) => {
        const records = await tx.all(
          tx.db
            .select({ profile: a.profile, jobId: a.jobId, requestId: a.requestId })
            .from(a)
            .where(where)
            // The primary key's order, oldest first as job ids grow: no index on end_time, and an
            // order the database had to sort would make every slice read every record past it.
            .orderBy(asc(a.profile), asc(a.jobId))
            .limit(PRUNE_SLICE_ROWS),
        );
        if (records.length === 0) return 0;
        // A step's usage is kept while its accounting record is still there to read.
        const requestIds = records.map((r) => r.requestId).filter((id): id is string => id !== null);
        if (requestIds.length) {
          const requests = await tx.all(
            tx.db.select().from(t.jobRequests).where(inArray(t.jobRequests.id, requestIds)),
          );
          await keepJobUsage(tx, requests, now);
        }
        let n = 0;
        for (const [profile, jobIds] of byProfile(records)) {
          // The condition again: on PostgreSQL a reconcile may have written a record under the
          // same (reused) job id since the select; that one is not past its retention.
          n += await tx.run(
            tx.db.delete(a).where(and(sql`${a.profile} = ${profile}`, inArray(a.jobId, jobIds), where)),
          );
        }
        return n;
      }),
    );
  }
  if (settings.auditMs > 0) {
    const l = t.auditLog;
    const where = prunableAudit(h, now - settings.auditMs);
    add(
      'audit_log',
      await deleteInSlices(h, signal, async (tx) => {
        const ids = (
          await tx.all(
            tx.db.select({ id: l.id }).from(l).where(where).orderBy(asc(l.at), asc(l.id)).limit(PRUNE_SLICE_ROWS),
          )
        ).map((r) => r.id);
        return ids.length ? tx.run(tx.db.delete(l).where(inArray(l.id, ids))) : 0;
      }),
    );
  }
  return counts;
}

function byProfile(records: readonly { profile: string; jobId: number }[]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const r of records) out.set(r.profile, [...(out.get(r.profile) ?? []), r.jobId]);
  return out;
}

/** Runs `slice` (which deletes, oldest first, at most PRUNE_SLICE_ROWS rows) in transactions until one deletes fewer. */
async function deleteInSlices(
  h: History,
  signal: AbortSignal | undefined,
  slice: (tx: History) => Promise<number>,
): Promise<number> {
  let total = 0;
  for (;;) {
    if (signal?.aborted) return total;
    await nextTurn();
    const n = await h.transaction(slice);
    total += n;
    if (n < PRUNE_SLICE_ROWS) return total;
  }
}

const PRUNE_RECORD = 'prune_totals';

/** What the prunes removed so far (every process's, since the history was made), and the last one. */
export interface PruneRecord {
  lastAt: number;
  last: PruneCounts;
  totals: PruneCounts;
  pagesReturned: number;
}

/** Adds a prune's counts to the history's record of them (read by the metrics at a scrape). */
export async function recordPrune(h: History, at: number, counts: PruneCounts, pagesReturned: number): Promise<void> {
  const t = h.t.historyMeta;
  await h.transaction(async (tx) => {
    const earlier = await readPruneRecord(tx, true);
    const totals = noCounts();
    for (const table of PRUNED_TABLES) totals[table] = (earlier?.totals[table] ?? 0) + counts[table];
    const record: PruneRecord = {
      lastAt: at,
      last: counts,
      totals,
      pagesReturned: (earlier?.pagesReturned ?? 0) + pagesReturned,
    };
    const value = JSON.stringify(record);
    await tx.run(
      tx.db.insert(t).values({ key: PRUNE_RECORD, value }).onConflictDoUpdate({ target: t.key, set: { value } }),
    );
  });
}

export async function readPruneRecord(h: History, lock = false): Promise<PruneRecord | null> {
  const t = h.t.historyMeta;
  const query = h.db.select().from(t).where(sql`${t.key} = ${PRUNE_RECORD}`);
  const row = await h.one(lock ? h.forUpdate(query) : query);
  if (!row) return null;
  try {
    const parsed = JSON.parse(row.value) as Partial<PruneRecord>;
    const counts = (c: unknown): PruneCounts => {
      const out = noCounts();
      for (const table of PRUNED_TABLES)
        out[table] = Number((c as Record<string, unknown> | undefined)?.[table] ?? 0) || 0;
      return out;
    };
    return {
      lastAt: Number(parsed.lastAt) || 0,
      last: counts(parsed.last),
      totals: counts(parsed.totals),
      pagesReturned: Number(parsed.pagesReturned) || 0,
    };
  } catch {
    return null;
  }
}
