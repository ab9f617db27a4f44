import { type TrackedRequest, updateRequest } from '../db/requests.js';
import { SchedflowError } from '../errors.js';
import { systemClock } from '../lib/clock.js';
import type { SchedClient } from '../sched/client.js';
import type { SchedJob } from '../sched/job-model.js';
import { JobNotFoundError } from '../sched/sched-errors.js';
import type { LightStates } from './poll-ask.js';
import type { PollDeps } from './poll-deps.js';

/**
 * Why a pending job waits, while it waits: Slurm's reason and the scheduler's forecast of its
 * start, read from the controller's full record (the light `jobs/state` listing has neither, and
 * accounting keeps no forecast) and kept on the request. A job that leaves pending has its
 * forecast cleared by its transition (src/requests/transition.ts).
 *
 * Cheaply: a pending job's record is read at most every `pendingDetailsEveryMs` (30 s), and a
 * job just submitted, that slurmctld has not looked at yet (no reason), 5 s later. While a job's
 * reason and forecast stay the same, it is read half as often each time, down to every
 * {@link BACKOFF_MAX}th interval (4 minutes at the default); a change brings it back to every
 * interval. Thousands of jobs held or queued behind a long job keep the same reason for hours,
 * and their listing (every user's jobs: 6.7 s of slurmrestd for 5,000 on a real Slurm 25.11.7)
 * every 30 s took a fifth of a core of the cluster's, for nothing new. Up to
 * {@link ONE_BY_ONE_MAX} due jobs are read one by one (`GET …/job/{id}`, small answers); beyond,
 * one controller listing serves them all, and every other pending job, due or not. Never while
 * the proxy rate-limits the profile. While this process's submissions wait for the request
 * budget (or, for a listing, while they flow), not for up to BACKOFF_MAX intervals: a forecast
 * can wait, a submission should not.
 */

/** Due jobs read one `GET …/job/{id}` each; more than this, and one listing is cheaper. */
const ONE_BY_ONE_MAX = 3;
const DEFAULT_EVERY_MS = 30_000;
/**
 * A job read before slurmctld gave it a reason (`None` right after its submission, on a real
 * Slurm 25.11.7 for a few seconds, until its scheduler's next pass) is read again this soon.
 */
const NO_REASON_AGAIN_MS = 5000;

/** How far a job's reads are spaced while its record says the same: this many intervals at most. */
export const BACKOFF_MAX = 8;

/** When a pending request's record was last read, and how long after it is read again. */
export interface LastRead {
  at: number;
  everyMs: number;
}

/** What one read found of a job: whether its reason and forecast were as recorded, and whether it had a reason. */
export interface ReadOutcome {
  id: string;
  /** False too when the job was not found, or no longer pending: read again at the base spacing. */
  unchanged: boolean;
  noReason: boolean;
}

/** The pending jobs whose next read is due at `now` (every job never read is). */
export function dueForRead<R extends { id: string }>(
  pending: readonly R[],
  read: ReadonlyMap<string, LastRead>,
  now: number,
): R[] {
  return pending.filter((row) => {
    const last = read.get(row.id);
    return last === undefined || now - last.at >= last.everyMs;
  });
}

/**
 * When each job read at `now` is read next. A change (or a first read) starts again at the base
 * spacing: `everyMs`, or sooner for a job slurmctld has not given a reason yet (its first one
 * comes within seconds). While a job's record says the same, each read that was due doubles its
 * spacing, up to BACKOFF_MAX intervals; a read before it was due (a listing made for others)
 * keeps it. The unchanged jobs of one listing (`together`) share the longest of their spacings,
 * so that jobs first read at different times come due at once: one listing, not one each.
 */
export function nextReads(
  outcomes: readonly ReadOutcome[],
  read: ReadonlyMap<string, LastRead>,
  now: number,
  everyMs: number,
  together: boolean,
): Map<string, LastRead> {
  const next = new Map<string, LastRead>();
  let shared = 0;
  for (const { id, unchanged, noReason } of outcomes) {
    const base = noReason ? Math.min(everyMs, NO_REASON_AGAIN_MS) : everyMs;
    const last = read.get(id);
    let spacing = base;
    if (unchanged && last !== undefined) {
      const wasDue = now - last.at >= last.everyMs;
      spacing = wasDue ? Math.min(Math.max(last.everyMs * 2, base), everyMs * BACKOFF_MAX) : last.everyMs;
      if (together) shared = Math.max(shared, spacing);
    }
    next.set(id, { at: now, everyMs: spacing });
  }
  if (together && shared > 0) {
    for (const { id, unchanged } of outcomes) if (unchanged && read.has(id)) next.set(id, { at: now, everyMs: shared });
  }
  return next;
}

/** How long after this worker process's last submission a listing still gives way to the next. */
const SUBMITTING_WINDOW_MS = 5000;

/** Since when each profile connection's pending details have given way to its submissions. */
const givingWaySince = new WeakMap<object, number>();

/**
 * Whether the due reads wait for the submissions: while these wait for the request budget, and
 * while they flow for a listing (thousands of pending jobs take slurmrestd seconds, out of a
 * burst's own rate). No longer than BACKOFF_MAX intervals at a time, the longest a forecast
 * waits anyway: a steady stream of submissions does not starve the forecasts.
 */
export function givesWay(
  client: Pick<SchedClient, 'submissionsWaiting' | 'submittingWithin'>,
  due: number,
  now: number,
  everyMs: number,
): boolean {
  const busy = client.submissionsWaiting() || (due > ONE_BY_ONE_MAX && client.submittingWithin(SUBMITTING_WINDOW_MS));
  const since = givingWaySince.get(client);
  if (busy && since === undefined) givingWaySince.set(client, now);
  if (busy && (since === undefined || now - since < everyMs * BACKOFF_MAX)) return true;
  givingWaySince.delete(client);
  return false;
}

/** Each pending request's last read, per profile connection (in memory: a restart reads them again). */
const lastRead = new WeakMap<SchedClient, Map<string, LastRead>>();

function lastReadOf(client: SchedClient): Map<string, LastRead> {
  let read = lastRead.get(client);
  if (!read) {
    read = new Map();
    lastRead.set(client, read);
  }
  return read;
}

/**
 * Reads the due pending jobs' records and writes their reason and expected start where they
 * changed. `tracked` as read at the start of the cycle, `light` its light states: only jobs the
 * controller showed pending this cycle are read, and only requests still `pending` are written.
 */
export async function refreshPendingDetails(
  deps: PollDeps,
  tracked: readonly TrackedRequest[],
  light: LightStates,
): Promise<{ requests: number; changed: number }> {
  const { client } = deps;
  const everyMs = deps.settings.pendingDetailsEveryMs ?? DEFAULT_EVERY_MS;
  const none = { requests: 0, changed: 0 };
  if (everyMs <= 0) return none;
  const now = (deps.clock ?? systemClock).now();
  const read = lastReadOf(client);
  // Single jobs pending in the controller (an array's tasks share its record: not read here).
  const pending = tracked.filter(
    (row) => row.arrayTaskCount === null && light.byId.get(row.jobId as number)?.state === 'PENDING',
  );
  const still = new Set(pending.map((row) => row.id));
  for (const id of read.keys()) if (!still.has(id)) read.delete(id);
  const due = dueForRead(pending, read, now);
  if (due.length === 0 || client.isRateLimited()) {
    // Nothing to read, or nothing may be: a later wait for the submissions counts from then.
    givingWaySince.delete(client);
    return none;
  }
  if (givesWay(client, due.length, now, everyMs)) return none;

  const records = new Map<number, SchedJob>();
  let requests = 0;
  let listed = false;
  if (due.length <= ONE_BY_ONE_MAX) {
    for (const row of due) {
      requests++;
      try {
        const record = await client.getJob(row.jobId as number, { forPolling: true, signal: deps.signal });
        records.set(record.data.job_id, record.data);
      } catch (error) {
        // Gone meanwhile: the next cycle's light states say so. Another failure ends this round;
        // the forecast is only ever a moment late.
        if (error instanceof JobNotFoundError) continue;
        if (!(error instanceof SchedflowError)) throw error;
        deps.logger.debug({ code: error.code, err: error }, 'pending details unavailable');
        break;
      }
    }
  } else {
    requests++;
    try {
      // `update_time=0`: not the plain listing's URL, whose copy in a proxy's cache the poll's
      // conclusion of an end must not be served (see src/sched/cluster-view.ts, readSource).
      const listing = await client.listJobs({
        updateTime: 0,
        forPolling: true,
        signal: deps.signal,
        jobIds: new Set(pending.map((row) => row.jobId as number)),
      });
      for (const job of listing.data.jobs) records.set(job.job_id, job);
      listed = true;
    } catch (error) {
      if (!(error instanceof SchedflowError)) throw error;
      deps.logger.debug({ code: error.code, err: error }, 'pending details unavailable');
    }
  }

  // A listing that answered has every pending job's record, due or not: each is taken as read
  // (one it lacks too, or it would be due again every cycle), so that jobs submitted over a
  // while come due together, one listing an interval, not one every cycle.
  const together = due.length > ONE_BY_ONE_MAX;
  const readNow = together ? (listed ? pending : []) : due.filter((row) => records.has(row.jobId as number));
  const outcomes: ReadOutcome[] = [];
  const writes: { row: TrackedRequest; reason: string | null; expectedStartAt: number | null }[] = [];
  for (const row of readNow) {
    const job = records.get(row.jobId as number);
    if (job?.state !== 'PENDING' || job.array_job_id !== null) {
      outcomes.push({ id: row.id, unchanged: false, noReason: false });
      continue;
    }
    const expectedStartAt = job.expected_start != null ? job.expected_start * 1000 : null;
    const unchanged = row.reason === job.reason && row.expectedStartAt === expectedStartAt;
    outcomes.push({ id: row.id, unchanged, noReason: job.reason === null });
    if (!unchanged) writes.push({ row, reason: job.reason, expectedStartAt });
  }
  for (const [id, next] of nextReads(outcomes, read, now, everyMs, together)) read.set(id, next);
  let changed = 0;
  for (const { row, reason, expectedStartAt } of writes) {
    // Only while the request is still pending: a start written meanwhile wins.
    changed += await updateRequest(deps.store, row.id, { reason, expectedStartAt }, 'pending');
  }
  return { requests, changed };
}
