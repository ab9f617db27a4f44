import { hash } from 'node:crypto';
import {
  advanceAccountingSync,
  getProfileSync,
  recordAccountingAnswer,
  unchangedAccountingJobs,
  upsertAccountingJob,
} from '../db/accounting.js';
import type { History } from '../db/history.js';
import { getRequest, requestByJobId, submissionsInFlight } from '../db/requests.js';
import { inJobIdOrder, writeInSlices } from '../db/write-in-slices.js';
import { type Clock, systemClock } from '../lib/clock.js';
import { nextTurn } from '../lib/turns.js';
import type { Logger } from '../logger.js';
import type { SchedClient } from '../sched/client.js';
import type { Freshness } from '../sched/freshness.js';
import { KILLED_BY_CONTROLLER, type SchedJob } from '../sched/job-model.js';
import { jobIdentity, ownRecord } from './job-identity.js';
import { COMPLETING_PATIENCE_MS } from './poll-plan.js';
import { applyJob } from './poller.js';
import { isTerminalRequest, requestStateFor } from './request-state.js';

export interface ReconcileSettings {
  /** On the first run, import this far back. @defaultValue 86400 */
  initialLookbackSec: number;
  /** Each run starts this long before the last one ended, so late records are not missed. @defaultValue 600 */
  overlapSec: number;
}

export interface ReconcileReport {
  /** Records written: new, or changed since the last import (a running job's running time aside). */
  imported: number;
  linked: number;
  external: number;
}

const MARKER = /^schedflow:(\S+)/;

/**
 * The longest stretch of time one accounting request of reconcile covers. The first import
 * (a day back and the overlap) goes in 7 requests of up to four hours: one answer holding a day
 * of a busy account could exceed what the process can hold (past ~137,000 records, more than
 * V8's longest string; issue 14), and hourly slices made 25 requests of a fresh daemon's start,
 * which spilled into its first submissions behind a rate-limited proxy. A run every minute
 * covers 11 minutes (overlap included): one request.
 */
export const RECONCILE_SLICE_SEC = 4 * 3600;

/** Records looked up at once to tell which changed since their last import. */
const COMPARE_BATCH_RECORDS = 500;

/**
 * The records each profile's last run found stored as they are (or stored), by a fingerprint of
 * their bytes: the next run leaves out those that come again byte for byte without parsing or
 * decoding them. Every run gets every record of its window (an ended job's comes in each run for
 * a minute after its end, an active job's in every run): with reconcile every 10 s during a
 * stream of submissions, decoding them again was an eighth of the daemon's CPU, and its longest
 * turns (issue 14). Kept in memory: the first run of a process reads every record.
 */
export class KnownRecords {
  readonly #byProfile = new Map<string, Set<string>>();

  /** A skip for `listAccountingJobs`, noting what it sees in `seen`. */
  skipFor(profile: string, seen: Set<string>): (raw: Buffer) => boolean {
    const known = this.#byProfile.get(profile);
    return (raw) => {
      const fingerprint = hash('sha1', raw, 'base64');
      seen.add(fingerprint);
      return known?.has(fingerprint) ?? false;
    };
  }

  /** After a run that stored every record it saw: those are what the next run may leave out. */
  stored(profile: string, seen: Set<string>): void {
    this.#byProfile.set(profile, seen);
  }
}

/**
 * Imports the accounting records of the profile's account since the last sync, those new or
 * changed since they were last imported:
 * jobs schedflow submitted are linked to their requests (by the marker in the
 * comment) and give them accounting fields; the others are kept as external.
 * The window goes in slices of at most RECONCILE_SLICE_SEC, each written in batches,
 * and the sync point moves after each, so a failure resumes where it stopped.
 */
export async function reconcileProfile(
  deps: {
    store: History;
    client: SchedClient;
    logger: Logger;
    settings: ReconcileSettings;
    signal?: AbortSignal;
    /** What the last run stored, left out unread when it comes again unchanged. */
    known?: KnownRecords;
    /** The daemon's clock: the window's end and when records were read. @defaultValue systemClock */
    clock?: Clock;
  },
  profile: string,
): Promise<ReconcileReport> {
  const { store, client, settings } = deps;
  const clock = deps.clock ?? systemClock;
  const sync = await getProfileSync(store, profile);
  const nowSec = Math.floor(clock.now() / 1000);
  const account = client.profile.account;
  let from = (sync?.accountingSyncedTo ?? nowSec - settings.initialLookbackSec) - settings.overlapSec;
  let imported = 0;
  let linked = 0;
  let at = clock.now();
  const seen = new Set<string>();
  const skipRecord = deps.known?.skipFor(profile, seen);
  // slurmdbd gives every record whose usage meets the window: an active job comes in every slice.
  do {
    const to = Math.min(nowSec, from + RECONCILE_SLICE_SEC);
    const { data, freshness } = await client.listAccountingJobs(
      { startTime: from, endTime: to, accounts: account ? [account] : undefined },
      { signal: deps.signal, skipRecord },
    );
    at = clock.now();
    // Records already stored as they are now are left out first (a running job comes every run).
    const changed: SchedJob[] = [];
    for (let i = 0; i < data.length; i += COMPARE_BATCH_RECORDS) {
      const batch = data.slice(i, i + COMPARE_BATCH_RECORDS);
      const unchanged = await unchangedAccountingJobs(store, profile, batch);
      for (const job of batch) if (!unchanged.has(job.job_id)) changed.push(job);
      await nextTurn();
    }
    // Read after the answer: a submission whose job it may hold had started before it was made.
    const inFlight = await submissionsInFlight(store, profile);
    linked += await writeInSlices(
      store,
      inJobIdOrder(changed, (job) => job.job_id),
      (tx, job) => importRecord(tx, profile, job, freshness, at, inFlight, clock),
    );
    imported += changed.length;
    await advanceAccountingSync(store, profile, to, at);
    from = to;
  } while (from < nowSec);
  deps.known?.stored(profile, seen);
  await recordAccountingAnswer(store, profile, null, at);
  deps.logger.debug({ profile, imported, linked }, 'accounting reconciled');
  return { imported, linked, external: imported - linked };
}

/**
 * Stores one accounting record, linked to its request when it is one's; true when linked. `tx`
 * is the transaction of the slice being written.
 */
async function importRecord(
  tx: History,
  profile: string,
  job: SchedJob,
  freshness: Freshness,
  at: number,
  inFlight: ReadonlyMap<string, number>,
  clock: Clock,
): Promise<boolean> {
  // By the marker, or else by job id: slurmdbd keeps the comment holding the marker only with
  // AccountingStoreFlags=job_comment, which clusters do not set by default. A job id can come
  // again (a cluster's state reset, a crashed slurmctld), so the job must fit the request: its
  // name, and not older than the request (jobIdentity).
  // A same-name record submitted well after the request's submission is linked, not applied:
  // only the controller's record can say whether it is its job (the poller asks, see ownRecord).
  const requestId = MARKER.exec(job.comment)?.[1] ?? null;
  // Locked until the slice's transaction ends (on PostgreSQL): what is decided on it here, such
  // as leaving alone a job the poller has found missing, holds when it is written.
  const byId = requestId ? undefined : await requestByJobId(tx, profile, job.job_id, { lock: true });
  const identity = byId ? ownRecord([job], byId, inFlight).kind : null;
  const request =
    (requestId ? await getRequest(tx, requestId, { lock: true }) : undefined) ??
    (byId && (identity === 'ours' || identity === 'suspect') ? byId : undefined);
  // A task of an array has its own job id (all but the last to start): its record is the
  // array request's, found by the array's id, never an external job's.
  const array = request ? undefined : await arrayOfTask(tx, profile, job);
  await upsertAccountingJob(tx, profile, job, (request ?? array)?.id ?? null, at);
  if (array) return true;
  if (!request) return false;
  // An array's records are its tasks' (one of them under the array's id): the poller makes the
  // request's state from all of them (array-poll.ts), never from one.
  if (request.arrayTaskCount !== null) return job.array_job_id === request.jobId;
  if (request.jobId !== job.job_id) return false;
  // A job the controller no longer has, which accounting still holds active (lagging, or a
  // runaway slurmctld lost): the poller's grace decides; an import must not reset it.
  const ended = isTerminalRequest(requestStateFor(job.state) ?? 'running');
  // A kill of a moment ago (a cancel, a time limit), of a request the poll follows, is the
  // poll's to record: the controller says whether the job is still completing, its exit not
  // settled yet, which accounting's record does not show. (The record is stored, and not read
  // again unchanged: that end is the poll's. Ends of jobs that ended by themselves are settled.)
  const justEnded =
    KILLED_BY_CONTROLLER.has(job.state) &&
    !isTerminalRequest(request.state) &&
    (job.end_time ?? 0) * 1000 > clock.now() - COMPLETING_PATIENCE_MS;
  if (identity !== 'suspect' && (ended || request.missingSince === null) && !justEnded) {
    await applyJob(tx, request, job, 'accounting', freshness, clock);
  }
  return true;
}

/**
 * The array request a task's record (under the task's own job id) belongs to: the request of
 * the array's job id, when it is an array and the record may be its job (its marker, or its
 * name and submit time, as for any record: a crashed slurmctld gives an array's id again).
 */
async function arrayOfTask(tx: History, profile: string, job: SchedJob) {
  if (job.array_job_id === null || job.array_job_id === job.job_id) return undefined;
  const array = await requestByJobId(tx, profile, job.array_job_id);
  if (!array || array.arrayTaskCount === null) return undefined;
  return jobIdentity(job, array) === 'other' ? undefined : array;
}
