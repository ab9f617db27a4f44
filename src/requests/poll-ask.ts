import type { TrackedRequest } from '../db/requests.js';
import { SchedflowError } from '../errors.js';
import { systemClock } from '../lib/clock.js';
import { chunkJobIds } from '../sched/client.js';
import type { Freshness } from '../sched/freshness.js';
import type { JobStateEntry, SchedJob } from '../sched/job-model.js';
import type { JobListing, Read } from '../sched/reads.js';
import type { PollDeps } from './poll-deps.js';

/**
 * The asking of a poll cycle (src/requests/poller.ts): the requests it makes of the scheduler,
 * and their answers as data. Nothing here writes the history; poll-apply.ts does.
 */

/** Slurm states of a job that has not ended. */
const ACTIVE_SLURM_STATES = ['PENDING', 'RUNNING', 'SUSPENDED'] as const;

/** The light listing of the tracked jobs: each entry, and the freshness of the answer that had it. */
export interface LightStates {
  byId: Map<number, JobStateEntry>;
  /** Entries of array tasks (`"5_3"`), which are not keyed by id: an array's pending tasks share one. */
  taskEntries: JobStateEntry[];
  /** The freshness of the answer that was asked for the row's job. */
  freshnessOf(row: TrackedRequest): Freshness;
  /** The least fresh of the answers: a cycle with one stale chunk is a stale poll. */
  overall: Freshness;
  requests: number;
}

/**
 * `jobs/state` for every tracked job, their ids named in chunks that fit a URL, one request
 * after the other (each waits its turn in the request budget). Never every job's state: on a
 * real cluster that is every user's jobs.
 */
export async function readLightStates(deps: PollDeps, tracked: TrackedRequest[]): Promise<LightStates> {
  const ids = [...new Set(tracked.map((row) => row.jobId as number))];
  const byId = new Map<number, JobStateEntry>();
  const taskEntries: JobStateEntry[] = [];
  const freshnessById = new Map<number, Freshness>();
  let overall: Freshness | undefined;
  let requests = 0;
  for (const chunk of chunkJobIds(ids, 'job_id')) {
    const states = await deps.client.listJobStates(chunk, { forPolling: true, signal: deps.signal });
    requests++;
    // Only the jobs asked for: an answer never speaks for another chunk's jobs.
    const asked = new Set(chunk);
    for (const job of states.data) {
      // An array's tasks come under their own job ids, not the array's id asked for.
      if (job.array_task_id !== null) taskEntries.push(job);
      else if (asked.has(job.job_id)) byId.set(job.job_id, job);
    }
    for (const id of chunk) freshnessById.set(id, states.freshness);
    overall = overall === undefined ? states.freshness : leastFresh(overall, states.freshness);
  }
  // tracked is not empty, so neither is ids: one request was made.
  const answered = overall as Freshness;
  return {
    byId,
    taskEntries,
    freshnessOf: (row) => freshnessById.get(row.jobId as number) ?? answered,
    overall: answered,
    requests,
  };
}

function leastFresh(a: Freshness, b: Freshness): Freshness {
  if (a.stale !== b.stale) return a.stale ? a : b;
  return b.ageSec > a.ageSec ? b : a;
}

/** One accounting request: the jobs it names, and whether it asks for their active records only. */
export interface AccountingChunk {
  rows: TrackedRequest[];
  activeOnly: boolean;
  /** Array requests, and the ids of theirs to name (array-poll.ts), when this query carries them. */
  arrays?: readonly TrackedRequest[];
  arrayIds?: readonly number[];
  /** Ask past any answer the proxy keeps (see {@link askAccounting}). */
  afresh?: boolean;
}

/** What one accounting request answered. */
export interface AccountingAnswer {
  freshness: Freshness;
  /** Several records can share an id: a requeued job (a new submit time each time) and, after a
   * crash of slurmctld, a job it lost and the one that has its id now. */
  found: Map<number, SchedJob[]>;
  /** The records of array tasks, kept apart (array-poll.ts). */
  arrayRecords: SchedJob[];
}

/** How far past now an accounting query asked afresh ends its window. */
const AFRESH_WINDOW_SEC = 86_400;

/**
 * One accounting request for a chunk of requests, naming their jobs (never the account's every
 * record since a start: 394 MB at 100,000 past records, and past ~137,000 more than V8 can hold
 * as a string); its records grouped by job id, array tasks apart. What they say of each request
 * is applyAccounting's (poll-apply.ts).
 */
export async function askAccounting(
  deps: PollDeps,
  { rows, activeOnly, arrays = [], arrayIds = [], afresh = false }: AccountingChunk,
): Promise<AccountingAnswer> {
  const { client } = deps;
  // The request's creation bounds its job's submit time from below, also for an
  // adopted job, whose recorded submittedAt is when schedflow found it.
  const earliestSubmitSec = Math.min(...[...rows, ...arrays].map((r) => Math.floor(r.createdAt / 1000)));
  const account = client.profile.account;
  const history = await client.listAccountingJobs(
    {
      jobIds: rows.map((r) => r.jobId as number).concat(arrayIds),
      accounts: account ? [account] : undefined,
      startTime: earliestSubmitSec - 60,
      // Only started jobs: ask for active records only. The proxy caches answers by URL, so the
      // answer to this query can never stand in, later, for the one that asks how they ended.
      ...(activeOnly && { states: [...ACTIVE_SLURM_STATES] }),
      // A window ending a day from now names the same records as one without an end (and any
      // clock skew between this host and slurmdbd's), but is a URL the proxy has not answered.
      ...(afresh && { endTime: Math.floor((deps.clock ?? systemClock).now() / 1000) + AFRESH_WINDOW_SEC }),
    },
    { forPolling: true, signal: deps.signal },
  );
  // Several records can share an id: a requeued job (a new submit time each time) and, after a
  // crash of slurmctld, a job it lost and the one that has its id now.
  const found = new Map<number, SchedJob[]>();
  const arrayRecords: SchedJob[] = [];
  for (const job of history.data) {
    if (job.array_job_id !== null) arrayRecords.push(job);
    else found.set(job.job_id, [...(found.get(job.job_id) ?? []), job]);
  }
  return { freshness: history.freshness, found, arrayRecords };
}

/**
 * One controller listing (`GET …/jobs`) decoding only the records of these jobs and these
 * arrays' tasks (Slurm cannot filter it by id), or null when it is unavailable: the cycle goes
 * on with what it has, and `unavailable` says so in the log.
 */
export async function askController(
  deps: PollDeps,
  jobIds: ReadonlySet<number>,
  arrayJobIds: ReadonlySet<number> | undefined,
  unavailable: string,
): Promise<Read<JobListing> | null> {
  return deps.client
    .listJobs({ forPolling: true, signal: deps.signal, jobIds, ...(arrayJobIds && { arrayJobIds }) })
    .catch((error: unknown) => {
      if (!(error instanceof SchedflowError)) throw error;
      deps.logger.warn({ code: error.code, err: error }, unavailable);
      return null;
    });
}
