import { type Clock, systemClock } from '../lib/clock.js';
import type { SchedJob } from './job-model.js';
import type { Profile } from './profile.js';
import type { AccountingQuery, JobListing, Read, ReadOptions } from './reads.js';
import { AccountingNotServedError, AmbiguousJobError } from './sched-errors.js';

/**
 * How a retry finds the job an interrupted submission may have made: by the marker the
 * submission carried in its comment (src/sched/exactly-once-submit.ts), in the controller's
 * listing and then in accounting; lookups asked for at once share one listing and one query.
 */

/** The marker a submission carries in its comment, so a retry can find the job it created. */
export function markerFor(requestId: string): string {
  return `schedflow:${requestId}`;
}

export function hasMarker(comment: string, requestId: string): boolean {
  const marker = markerFor(requestId);
  return comment === marker || comment.startsWith(`${marker} `);
}

/** Seconds slurmctld's clock may be behind the daemon's when matching a job by its submit time. */
const SUBMIT_CLOCK_LEEWAY_SEC = 5;

/** The reads a lookup makes, through the profile's client (its budget, its decoding). */
export interface MarkerLookupReads {
  readonly profile: Profile;
  /** `/slurmdb/v0.0.44` (or the proxy's `/scheddb/…`): where accounting answers, for an error's words. */
  readonly accountingPath: string;
  listJobs(options: ReadOptions): Promise<Read<JobListing>>;
  listAccountingJobs(query: AccountingQuery, options: ReadOptions): Promise<Read<SchedJob[]>>;
  /** Resolves once no Retry-After holds the profile's requests back. */
  whenOpen(): Promise<void>;
  /** The client's clock, for waiting for a fresher answer. @defaultValue systemClock */
  readonly clock?: Clock;
}

/** What a lookup is told of the attempt it looks for. */
export interface MarkerHint {
  submittedAfter?: number;
  jobName?: string;
  notBeforeMs?: number;
  signal?: AbortSignal;
  isKnownJob?: (jobId: number, job: SchedJob) => boolean | Promise<boolean>;
}

/** The marker lookups of one profile's client. */
export class MarkerLookup {
  /** The lookup that has not started yet, which more lookups may join. */
  #open: LookupBatch | null = null;

  constructor(private readonly reads: MarkerLookupReads) {}

  /**
   * Finds the job a request created, by the marker in its comment: the
   * controller first (pending and recent jobs), then accounting (jobs that have
   * left the controller). With `notBeforeMs`, an answer the proxy cached before
   * that moment is not trusted to say "absent": the lookup waits for a fresher one.
   *
   * slurmdbd keeps a job's comment only where the cluster sets
   * `AccountingStoreFlags=job_comment` (Slurm's default is not to). Without it, an
   * accounting record with no comment, the request's job name, and a submit time within
   * the attempt is taken for the job, unless `isKnownJob` says another request has it;
   * two such records are ambiguous, and the lookup refuses to guess.
   */
  async find(requestId: string, hint: MarkerHint = {}): Promise<SchedJob | null> {
    const { listing, history } = await this.#lookupData(hint);
    const inController = listing.data.jobs.find((job) => hasMarker(job.comment, requestId));
    if (inController) return inController;
    const user = this.reads.profile.auth.type === 'header-pair' ? this.reads.profile.auth.user : undefined;
    // Without accounting the controller is all there is; it keeps an ended job for MinJobAge.
    if (history === null) return null;
    const marked = history.data.find((job) => hasMarker(job.comment, requestId));
    if (marked) return marked;
    if (hint.notBeforeMs === undefined || !hint.jobName) return null;
    // Jobs the controller still shows carry their own comment: if not ours, they are another's.
    const inControllerIds = new Set(listing.data.jobs.map((job) => job.job_id));
    // Submit times are whole seconds from slurmctld's clock: a few seconds' leeway for skew.
    const attemptSec = Math.floor(hint.notBeforeMs / 1000) - SUBMIT_CLOCK_LEEWAY_SEC;
    const possible = history.data.filter(
      (job) =>
        job.comment === '' &&
        job.name === hint.jobName &&
        (user === undefined || job.user === user) &&
        (job.submit_time ?? 0) >= attemptSec &&
        !inControllerIds.has(job.job_id),
    );
    // Asked of the history one record at a time, and only of the few that match the rest.
    const candidates: SchedJob[] = [];
    for (const job of possible) if (!(await hint.isKnownJob?.(job.job_id, job))) candidates.push(job);
    if (candidates.length > 1) {
      const ids = candidates.map((job) => job.job_id).join(', ');
      throw new AmbiguousJobError(
        `jobs ${ids} all match request ${requestId} (name "${hint.jobName}", submitted during its attempt) and accounting keeps no comments to tell them apart (set AccountingStoreFlags=job_comment); not submitting again: cancel the extra job and resubmit if needed`,
        { status: null, message: null, slurmErrors: [], request: `GET ${this.reads.accountingPath}/jobs` },
      );
    }
    return candidates[0] ?? null;
  }

  /**
   * The controller listing and accounting records a marker lookup reads, shared: lookups asked
   * for while one is waiting to start (behind a Retry-After, or in the same tick, as after an
   * outage when every request in `submitting` is retried at once) join it, and one controller
   * listing and one accounting query answer them all. The shared query is the widest of theirs
   * (earliest start, every job name) and as fresh as the most demanding needs. `history` is
   * null when the scheduler serves no accounting.
   */
  #lookupData(hint: LookupHint): Promise<LookupData> {
    let batch = this.#open;
    if (!batch) {
      const abort = new AbortController();
      batch = { hints: [], abort, callers: 0, result: Promise.resolve(null as unknown as LookupData) };
      const opened = batch;
      this.#open = opened;
      opened.result = (async () => {
        // Let lookups asked for in the same moment join before it starts.
        await new Promise((resolve) => setImmediate(resolve));
        await this.reads.whenOpen();
        if (this.#open === opened) this.#open = null;
        return this.#readLookupData(mergeHints(opened.hints), opened.abort.signal);
      })();
      // A batch every caller has left (aborted) settles unobserved.
      opened.result.catch(() => {});
    }
    const joined = batch;
    joined.hints.push(hint);
    joined.callers++;
    const { signal } = hint;
    if (!signal) return joined.result;
    // One caller's abort (a shutdown) leaves the others their lookup; the last one's stops it.
    return new Promise<LookupData>((resolve, reject) => {
      const onAbort = () => {
        if (--joined.callers === 0) joined.abort.abort(signal.reason);
        reject(signal.reason);
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      joined.result.then(
        (data) => {
          signal.removeEventListener('abort', onAbort);
          resolve(data);
        },
        (error: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      );
    });
  }

  async #readLookupData(hint: LookupHint, signal: AbortSignal): Promise<LookupData> {
    const listing = await freshEnough(() => this.reads.listJobs({ signal }), { ...hint, signal }, this.reads.clock);
    const user = this.reads.profile.auth.type === 'header-pair' ? this.reads.profile.auth.user : undefined;
    try {
      const history = await freshEnough(
        () =>
          this.reads.listAccountingJobs(
            {
              startTime: hint.submittedAfter,
              jobNames: hint.jobName ? [hint.jobName] : hint.jobNames,
              accounts: this.reads.profile.account ? [this.reads.profile.account] : undefined,
              users: user ? [user] : undefined,
            },
            { signal },
          ),
        { ...hint, signal },
        this.reads.clock,
      );
      return { listing, history };
    } catch (error) {
      if (error instanceof AccountingNotServedError) return { listing, history: null };
      throw error;
    }
  }
}

/** Repeats a read until the proxy's answer was produced at or after `notBeforeMs` (at most ~a minute). */
async function freshEnough<T>(
  read: () => Promise<Read<T>>,
  hint: { notBeforeMs?: number; signal?: AbortSignal },
  clock: Clock = systemClock,
): Promise<Read<T>> {
  const deadline = clock.now() + 65_000;
  for (;;) {
    const result = await read();
    const { fetchedAt, ageSec, expiresAt } = result.freshness;
    // Age is whole seconds, so the answer may be up to a second older than it says.
    const producedNoEarlierThan = fetchedAt.getTime() - (ageSec + 1) * 1000;
    if (hint.notBeforeMs === undefined || producedNoEarlierThan >= hint.notBeforeMs) return result;
    if (clock.now() > deadline) return result;
    const waitMs = Math.max(100, (expiresAt?.getTime() ?? clock.now() + 1000) - clock.now() + 50);
    await clock.sleep(Math.min(waitMs, 5000), hint.signal);
  }
}

interface LookupHint {
  submittedAfter?: number;
  jobName?: string;
  /** Several names (a shared lookup); used when `jobName` is absent. */
  jobNames?: string[];
  notBeforeMs?: number;
  signal?: AbortSignal;
}

interface LookupData {
  listing: Read<JobListing>;
  history: Read<SchedJob[]> | null;
}

interface LookupBatch {
  hints: LookupHint[];
  abort: AbortController;
  /** Callers still waiting for it. */
  callers: number;
  result: Promise<LookupData>;
}

/**
 * The query that answers every lookup of a batch: from the earliest start, for every name
 * (any name when one lookup has none), and produced after the latest attempt.
 */
function mergeHints(hints: LookupHint[]): LookupHint {
  const starts = hints.map((h) => h.submittedAfter);
  const names = hints.map((h) => h.jobName || undefined);
  const notBefore = hints.map((h) => h.notBeforeMs).filter((ms): ms is number => ms !== undefined);
  return {
    submittedAfter: starts.includes(undefined) ? undefined : Math.min(...(starts as number[])),
    jobNames: names.includes(undefined) ? undefined : [...new Set(names as string[])].sort(),
    notBeforeMs: notBefore.length > 0 ? Math.max(...notBefore) : undefined,
  };
}
