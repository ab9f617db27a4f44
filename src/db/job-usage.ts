import { asc, eq, inArray } from 'drizzle-orm';
import type { History } from './history.js';
import { stepRequests } from './runs.js';
import type { AccountingJobRow, JobRequestRow, JobUsageRow } from './schema.js';
import { accountingOf } from './summaries.js';

/**
 * What an efficiency trend reads of one step request (src/summaries/trend.ts): its state, how
 * long it ran, its limits and CPUs, from the request and its accounting record. One function
 * makes it from the detail, for the trends (src/summaries/summarizer.ts) and for the row
 * retention keeps in `job_usage` before it prunes the detail (src/db/retention.ts): a trend
 * answers the same before and after a prune.
 */
export interface JobUsage {
  requestId: string;
  profile: string;
  jobId: number | null;
  runId: string | null;
  step: string | null;
  attempt: number;
  state: JobRequestRow['state'];
  elapsedSec: number | null;
  timeLimitMin: number | 'infinite' | null;
  cpus: number | null;
  cpuTimeSec: number | null;
  peakMemoryMb: number | null;
  /** The spec's `cpus_per_task` and `time_limit` (a resize proposal changes those). */
  spec: Record<string, unknown>;
  endedAt: number | null;
}

function positiveNumber(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : null;
}

/** The usage of an ended request, as jobFacts (src/summaries/facts.ts) reads the same two rows. */
export function usageOf(row: JobRequestRow, acct: AccountingJobRow | undefined): JobUsage {
  const spec = (row.spec ?? {}) as Record<string, unknown>;
  const ran = row.startedAt !== null || (acct?.startTime ?? null) !== null;
  const elapsedSec =
    acct?.elapsedSec ??
    (row.startedAt !== null && row.endedAt !== null
      ? Math.max(0, Math.round((row.endedAt - row.startedAt) / 1000))
      : null);
  const specLimit = spec.time_limit === 'infinite' ? 'infinite' : positiveNumber(spec.time_limit);
  const tasks = positiveNumber(spec.tasks);
  const cpusPerTask = positiveNumber(spec.cpus_per_task);
  const specCpus = tasks !== null || cpusPerTask !== null ? (tasks ?? 1) * (cpusPerTask ?? 1) : null;
  const kept: Record<string, unknown> = {};
  if (spec.cpus_per_task !== undefined) kept.cpus_per_task = spec.cpus_per_task;
  if (spec.time_limit !== undefined) kept.time_limit = spec.time_limit;
  return {
    requestId: row.id,
    profile: row.profile,
    jobId: row.jobId,
    runId: row.runId,
    step: row.step,
    attempt: row.attempt,
    state: row.state,
    elapsedSec: ran ? elapsedSec : null,
    timeLimitMin: specLimit ?? acct?.timeLimitMin ?? null,
    cpus: acct?.cpus ?? specCpus,
    cpuTimeSec: acct?.cpuTimeSec ?? null,
    peakMemoryMb: acct?.peakMemoryMb ?? null,
    spec: kept,
    endedAt: row.endedAt,
  };
}

function toRow(u: JobUsage, keptAt: number): JobUsageRow {
  return {
    requestId: u.requestId,
    profile: u.profile,
    jobId: u.jobId,
    runId: u.runId,
    step: u.step,
    attempt: u.attempt,
    state: u.state,
    elapsedSec: u.elapsedSec,
    timeLimitMin: typeof u.timeLimitMin === 'number' ? u.timeLimitMin : null,
    timeLimitInfinite: u.timeLimitMin === 'infinite',
    cpus: u.cpus,
    cpuTimeSec: u.cpuTimeSec,
    peakMemoryMb: u.peakMemoryMb,
    spec: u.spec,
    endedAt: u.endedAt,
    keptAt,
  };
}

function fromRow(r: JobUsageRow): JobUsage {
  return {
    requestId: r.requestId,
    profile: r.profile,
    jobId: r.jobId,
    runId: r.runId,
    step: r.step,
    attempt: r.attempt,
    state: r.state,
    elapsedSec: r.elapsedSec,
    timeLimitMin: r.timeLimitInfinite ? 'infinite' : r.timeLimitMin,
    cpus: r.cpus,
    cpuTimeSec: r.cpuTimeSec,
    peakMemoryMb: r.peakMemoryMb,
    spec: r.spec,
    endedAt: r.endedAt,
  };
}

/**
 * Keeps the usage of these ended requests (their accounting records read here) before their
 * detail is pruned. A usage kept earlier stands: the first was made while the accounting record
 * was still there (accounting is pruned sooner than requests).
 */
export async function keepJobUsage(h: History, requests: readonly JobRequestRow[], keptAt: number): Promise<number> {
  const steps = requests.filter((r) => r.runId !== null);
  if (steps.length === 0) return 0;
  const { accountingJobs } = h.t;
  const withJob = steps.filter((r) => r.jobId !== null);
  const records = withJob.length
    ? await h.all(
        h.db
          .select()
          .from(accountingJobs)
          .where(
            inArray(
              accountingJobs.requestId,
              withJob.map((r) => r.id),
            ),
          ),
      )
    : [];
  const recordOf = new Map(records.map((a) => [`${a.profile}:${a.jobId}`, a]));
  const rows = steps.map((r) => toRow(usageOf(r, recordOf.get(`${r.profile}:${r.jobId}`)), keptAt));
  return h.run(h.db.insert(h.t.jobUsage).values(rows).onConflictDoNothing());
}

/** The usage kept for a run's step requests whose detail was pruned (or is about to be). */
export async function keptUsageOfRun(h: History, runId: string): Promise<Map<string, JobUsage>> {
  const t = h.t.jobUsage;
  const rows = await h.all(h.db.select().from(t).where(eq(t.runId, runId)).orderBy(asc(t.step), asc(t.attempt)));
  return new Map(rows.map((r) => [r.requestId, fromRow(r)]));
}

/** Each step's latest attempt (retries make new requests), as the pipeline engine picks them. */
export function latestUsages(usages: Iterable<JobUsage>): Map<string, JobUsage> {
  const latest = new Map<string, JobUsage>();
  for (const u of usages) {
    if (!u.step) continue;
    const seen = latest.get(u.step);
    if (!seen || u.attempt > seen.attempt) latest.set(u.step, u);
  }
  return latest;
}

/**
 * The usage of a run's steps, each step's latest attempt: kept usage (job_usage) where retention
 * kept one, from the request and its accounting record otherwise. What a pipeline's trend reads
 * of an earlier run, the same before and after a prune.
 */
export async function usageOfRunSteps(h: History, runId: string): Promise<JobUsage[]> {
  const usages = new Map(await keptUsageOfRun(h, runId));
  for (const req of await stepRequests(h, runId)) {
    if (usages.has(req.id)) continue;
    usages.set(req.id, usageOf(req, await accountingOf(h, req.profile, req.jobId)));
  }
  return [...latestUsages(usages.values()).values()];
}
