import { getProfileSync, recordAccountingAnswer, updateProfileSync } from '../db/accounting.js';
import type { History } from '../db/history.js';
import {
  missingFactsLocked,
  submissionsInFlight,
  type TrackedRequest,
  trackedRequests,
  updateRequest,
} from '../db/requests.js';
import type { TransitionSource } from '../db/schema.js';
import { inJobIdOrder, writeInSlices } from '../db/write-in-slices.js';
import { SchedflowError } from '../errors.js';
import type { HeapCollector } from '../lib/heap-collector.js';
import type { Logger } from '../logger.js';
import { chunkJobIds, type SchedClient } from '../sched/client.js';
import type { Freshness } from '../sched/freshness.js';
import type { JobStateEntry, SchedJob } from '../sched/job-model.js';
import { AccountingNotServedError } from '../sched/sched-errors.js';
import {
  applyArrayRecords,
  applyControllerTaskRecords,
  arraysNeedingController,
  markMissingTasks,
  planArrays,
  summarizeArrays,
} from './array-poll.js';
import type { ArraySummary } from './array-state.js';
import { describeOtherJob, jobIdentity, ownRecord } from './job-identity.js';
import { isTerminalRequest, requestStateFor } from './request-state.js';
import { endLostByController, patchEnded, transition } from './transition.js';

/** Slurm states of a job that has not ended. */
const ACTIVE_SLURM_STATES = ['PENDING', 'RUNNING', 'SUSPENDED'] as const;

export interface PollSettings {
  /** How long a job may be missing from both controller and accounting before it is `lost`. @defaultValue 300000 */
  lostGraceMs: number;
  /** How often a profile with nothing to track is checked (the poll interval's ceiling). @defaultValue 60000 */
  pollCeilingMs?: number;
  /**
   * How long an array task's end, shown by the controller, waits for accounting's record before
   * the controller's full record gives it. @defaultValue 30000
   */
  arrayEndPatienceMs?: number;
}

export interface PollDeps {
  store: History;
  client: SchedClient;
  logger: Logger;
  settings: PollSettings;
  signal?: AbortSignal;
  /** The daemon's heap collector, told when a cycle wrote a mass start or end. */
  heap?: Pick<HeapCollector, 'afterBurst'>;
}

/** Changes one cycle wrote above which it was a burst (a mass start or end) for the heap collector. */
const BURST_CHANGES = 1000;

export interface PollReport {
  tracked: number;
  /**
   * Upstream requests this cycle made: with nothing to track 1 when it checked the controller
   * and 0 when the last check is recent. Otherwise one `jobs/state` request per chunk of tracked
   * job ids (one up to 500 jobs), one accounting request per chunk of jobs that changed, finished
   * or left the controller (one when up to 500 did; more in a mass end, within the request
   * budget), one controller listing when accounting could not describe an ended job (or an array
   * task's end: at once when accounting did not answer, after ARRAY_END_PATIENCE_MS when it
   * answered without it), and one when a record may be another job's.
   */
  requests: number;
  changed: number;
  stale: boolean;
  accounting: 'not-needed' | 'ok' | 'unavailable';
}

/**
 * What one answer says of a job: at least its state. The light `jobs/state` listing has
 * nothing else, and a member it lacks (`undefined`) leaves what the history knows as it is.
 */
export type JobObservation = Pick<SchedJob, 'state' | 'state_flags'> &
  Partial<
    Pick<SchedJob, 'reason' | 'start_time' | 'end_time' | 'exit_code' | 'signal' | 'stdout_path' | 'stderr_path'>
  >;

/**
 * Applies what the scheduler says of a job to its request: state, and the
 * details the record has. Writes nothing when nothing changed, so a cycle over
 * thousands of unchanged jobs costs no writes (their freshness is the poll's,
 * kept per profile).
 *
 * What to write is decided on `row`, read before the scheduler was asked: another writer (the
 * reconciler, a submit worker ending the request as lost by the controller, another host's
 * poll) may have moved the request since. So a move is made only from the state `row` has, and
 * a patch written only while the request is still in it; what no longer holds waits for the next
 * cycle, which reads the request again: no stale answer moves a request back (running to pending
 * is a move the state machine allows, for a requeue), nor writes a raw state or a sighting over
 * a request that has ended.
 */
export async function applyJob(
  h: History,
  row: TrackedRequest,
  job: JobObservation,
  source: TransitionSource,
  freshness: Freshness,
): Promise<boolean> {
  const details = {
    ...(job.start_time != null && { startedAt: job.start_time * 1000 }),
    ...(job.end_time != null && { endedAt: job.end_time * 1000 }),
    ...(job.exit_code != null && { exitCode: job.exit_code }),
    ...(job.signal != null && { signal: job.signal.id }),
    // The scheduler's own expansion of the output paths wins over the one computed at submission.
    // No stderr path means stderr goes to the stdout file.
    ...(job.stdout_path != null && { stdoutPath: job.stdout_path, stderrPath: job.stderr_path ?? job.stdout_path }),
  };
  const rawState = job.state_flags.join(',');
  const reason = job.reason === undefined ? row.reason : job.reason;
  const to = requestStateFor(job.state);
  const moves = to !== null && to !== row.state;
  const unchanged =
    !moves &&
    row.rawState === rawState &&
    row.reason === reason &&
    row.missingSince === null &&
    Object.entries(details).every(([key, value]) => row[key as keyof TrackedRequest] === value);
  if (unchanged) return false;
  const seen = {
    ...details,
    lastSeenAt: Date.now(),
    lastSeenAgeSec: freshness.ageSec,
    lastSeenStale: freshness.stale,
    missingSince: null,
  };
  if (!moves) {
    // An ended request's exit code, come after its end: its retry is decided now (patchEnded).
    // (An ended request's state cannot change: patchEnded reads it again as it decides.)
    if (row.exitCode === null && details.exitCode !== undefined && isTerminalRequest(row.state)) {
      await patchEnded(h, row.id, { ...seen, rawState, reason }, Date.now());
    } else {
      await updateRequest(h, row.id, { ...seen, rawState, reason }, row.state);
    }
    return false;
  }
  return transition(h, row.id, {
    to,
    source,
    at: Date.now(),
    rawState,
    reason,
    stale: freshness.stale,
    patch: seen,
    from: row.state,
  });
}

/**
 * One poll cycle for one profile, whatever the number of tracked jobs: `jobs/state` for them
 * (one request up to 500 jobs, one per chunk of ids beyond), and accounting for those that
 * changed, finished or left the controller (details such as the exit code come from there): one
 * request up to 500 jobs; beyond, chunks of 500 within the request budget, the longest waiting
 * first, the rest in the next cycles. Both always name their jobs: never every job of the
 * controller (every user's), nor every record of the account (issue 14). When accounting cannot
 * give an ended job's record (a cluster without slurmdbd, slurmdbd down, or lagging), one full
 * controller listing does. A job found nowhere is never taken to have completed; after a grace
 * period it is `lost`, and accounting may still resolve it later.
 */
export async function pollProfile(deps: PollDeps, profile: string): Promise<PollReport> {
  const { store, client, logger } = deps;
  const tracked = await trackedRequests(store, profile);
  if (tracked.length === 0) return checkIdleProfile(deps, profile);

  const light = await readLightStates(deps, tracked);
  let requests = light.requests;
  let changed = 0;
  const needAccounting: TrackedRequest[] = [];
  const changedRows: TrackedRequest[] = [];
  // Array jobs: their tasks are followed through the same two requests (array-poll.ts).
  const arrays = tracked.filter((row) => row.arrayTaskCount !== null);
  const arrayPlan = arrays.length > 0 ? await planArrays(store, arrays, light.taskEntries, light.freshnessOf) : null;
  let arrayRecords: SchedJob[] | null = null;
  for (const row of tracked) {
    if (row.arrayTaskCount !== null) continue;
    const job = light.byId.get(row.jobId as number);
    if (job) {
      const to = requestStateFor(job.state);
      // Finished: the accounting record carries exit code, times and elapsed. A state that
      // changed (pending to running): the light listing has no reason, start time or nodes,
      // so the full record comes with the same accounting request, not one more per job.
      if (to !== null && isTerminalRequest(to)) needAccounting.push(row);
      // A running job whose start the history lacks (accounting was behind last time) is asked again.
      else if (
        job.state_flags.join(',') !== row.rawState ||
        row.missingSince !== null ||
        (to === 'running' && row.startedAt === null)
      ) {
        changedRows.push(row);
      }
    } else {
      // Absent from an answer produced after the submission: it has left the controller.
      const freshness = light.freshnessOf(row);
      const producedNoEarlierThan = freshness.fetchedAt.getTime() - (freshness.ageSec + 1) * 1000;
      if (!freshness.stale && producedNoEarlierThan > (row.submittedAt ?? 0)) needAccounting.push(row);
    }
  }

  const queue = accountingQueueOf(client, needAccounting);
  let queries: AccountingChunk[];
  const arrayIds = arrayPlan?.accountingIds ?? [];
  // An array that waited last cycle for accounting to show a task's end asks again under a new
  // URL: the proxy keeps an answer for up to a minute (30 s on the simulator's accounting), and
  // the one it kept, made before the end reached slurmdbd, would say the same until the patience
  // ran out (an array of quick tasks took 32 s to conclude where its tasks took 1).
  const waits = arrayWaitsOf(client);
  const arrayChunk = { arrays, arrayIds, afresh: arrays.some((row) => waits.has(row.id)) };
  const allIds = [...needAccounting, ...changedRows].map((row) => row.jobId as number).concat(arrayIds);
  if (chunkJobIds(allIds, 'step').length <= 1) {
    // One query names them all: started jobs get their full record with the ends. Only started
    // jobs: it asks for active records alone (see resolveThroughAccounting).
    const rows = [...needAccounting, ...changedRows];
    const activeOnly = needAccounting.length === 0 && !arrayPlan?.ended;
    queries = allIds.length > 0 ? [{ rows, activeOnly, ...arrayChunk }] : [];
  } else {
    // A mass start or end: ends go to accounting in chunks, the longest waiting first, as many
    // as the budget allows this cycle (the rest in the next ones). Started jobs get the light
    // record now, and the rest with their end: their full records would cost a chunk each.
    changed += await writeInSlices(
      store,
      inJobIdOrder(changedRows, (row) => row.jobId),
      async (tx, row) => {
        const job = light.byId.get(row.jobId as number);
        return job !== undefined && applyJob(tx, row, job, 'poll', light.freshnessOf(row));
      },
    );
    queries = queue.next(accountingChunksPerCycle(client)).map((rows) => ({ rows, activeOnly: false }));
    if (arrayIds.length > 0) queries.unshift({ rows: [], activeOnly: false, ...arrayChunk });
  }

  let accounting: PollReport['accounting'] = 'not-needed';
  const needController: TrackedRequest[] = [];
  const suspects: Suspect[] = [];
  const answered = new Set<string>();
  let failure: SchedflowError | null = null;
  for (const query of queries) {
    requests++;
    // Asked, answered or not: a chunk that keeps failing (a record schedflow cannot read) must
    // not hold the others back; it goes behind them.
    queue.asked(query.rows);
    try {
      const result = await resolveThroughAccounting(deps, profile, query, light);
      if (result.arrayRecords) arrayRecords = [...(arrayRecords ?? []), ...result.arrayRecords];
      changed += result.changed;
      needController.push(...result.endedWithoutRecord);
      suspects.push(...result.suspects);
      for (const row of query.rows) answered.add(row.id);
    } catch (error) {
      if (!(error instanceof SchedflowError)) throw error;
      failure = error;
      break;
    }
  }
  if (suspects.length > 0) {
    requests++;
    changed += await checkSuspects(deps, profile, suspects);
  }
  if (queries.length > 0 && failure === null) {
    await recordAccountingAnswer(store, profile, null);
    accounting = 'ok';
  } else if (failure !== null) {
    // Said once when it starts (or its reason changes), not on every cycle of a long outage.
    if (await recordAccountingAnswer(store, profile, failure.message)) {
      logger.warn(
        { profile, code: failure.code, err: failure },
        'accounting unavailable: following jobs with controller data only',
      );
    }
    // Every job accounting did not answer for, asked this cycle or waiting its turn: one
    // controller listing serves them all, however many.
    const unanswered = queries.flatMap((q) => q.rows).concat(needAccounting);
    const unresolved = [...new Set(unanswered)].filter((row) => !answered.has(row.id));
    needController.push(...unresolved.filter((row) => light.byId.has(row.jobId as number)));
    // A cluster without accounting will never describe a job that left the controller unseen
    // (a daemon down past MinJobAge): it goes the way of any job found nowhere.
    if (failure instanceof AccountingNotServedError) {
      const now = Date.now();
      const gone = unresolved.filter((row) => !light.byId.has(row.jobId as number) && !light.freshnessOf(row).stale);
      changed += await writeInSlices(
        store,
        inJobIdOrder(gone, (row) => row.jobId),
        (tx, row) => markMissing(tx, deps, profile, row, now),
      );
    }
    accounting = 'unavailable';
  }
  // Arrays: the light states and accounting's records first; the tasks these leave unsettled get
  // the controller's records, in the one listing single jobs take (array-poll.ts).
  const now = Date.now();
  const arraySettled = arrayPlan ? await applyArrayRecords(store, arrays, arrayPlan, arrayRecords) : new Set<string>();
  const arrayIdsForController = arrayPlan
    ? arraysNeedingController(arrays, arrayPlan, arraySettled, arrayWaitsOf(client), {
        now,
        atOnce: failure !== null,
        patienceMs: deps.settings.arrayEndPatienceMs ?? ARRAY_END_PATIENCE_MS,
      })
    : new Set<number>();
  let taskListing: { records: SchedJob[]; fresh: boolean } | null = null;
  if (needController.length > 0 || arrayIdsForController.size > 0) {
    requests++;
    const result = await resolveThroughController(deps, needController, light, arrayIdsForController);
    changed += result.changed;
    taskListing = result.taskListing;
  }
  if (arrayPlan) {
    for (const key of await applyControllerTaskRecords(store, arrays, arrayPlan, taskListing, now)) {
      arraySettled.add(key);
    }
    // Only an answer that could have named them says tasks are missing: accounting's, fresh, or
    // none at all on a cluster without it (as for single jobs: a slurmdbd down says nothing).
    const canTell = arrayRecords !== null || failure instanceof AccountingNotServedError;
    await markMissingTasks(store, arrays, arrayPlan, arraySettled, {
      now,
      graceMs: deps.settings.lostGraceMs,
      canTell,
    });
    const summaries = summarizeArrays(arrays, arrayPlan);
    changed += await writeInSlices(
      store,
      inJobIdOrder(arrays, (row) => row.jobId),
      async (tx, row) => {
        const summary = summaries.get(row.id);
        if (!summary) return false;
        if (summary.lost > 0) return markArrayLost(tx, deps, profile, row, summary, now);
        const observation: JobObservation = {
          state: summary.state,
          state_flags: [summary.state],
          reason: summary.reason,
          ...(summary.startedAt !== null && { start_time: Math.floor(summary.startedAt / 1000) }),
          ...(summary.endedAt !== null && { end_time: Math.floor(summary.endedAt / 1000) }),
          ...(summary.exitCode !== null && { exit_code: summary.exitCode }),
        };
        const source = summary.endedAt !== null && arrayRecords !== null ? 'accounting' : 'poll';
        return applyJob(tx, row, observation, source, light.freshnessOf(row));
      },
    );
  }
  await updateProfileSync(store, profile, {
    lastPollAt: Date.now(),
    ...pollOutcome(light.overall),
    lastPollAgeSec: light.overall.ageSec,
    lastPollStale: light.overall.stale,
    lastMaxAgeSec: light.overall.maxAgeSec,
  });
  if (changed >= BURST_CHANGES) deps.heap?.afterBurst();
  return { tracked: tracked.length, requests, changed, stale: light.overall.stale, accounting };
}

/**
 * How long the end of an array's task may wait for accounting's record while the controller
 * shows it ended, before the controller's full record gives it. A cycle where accounting is a
 * moment behind costs no third request; one where its records never come (a cluster that keeps
 * none for the job, slurmdbd losing them) still ends, well within the controller's MinJobAge
 * (300 s by default) that keeps the ended task's record.
 */
const ARRAY_END_PATIENCE_MS = 30_000;

/** Since when each array request has waited for the controller's records, per profile connection. */
const arrayWaits = new WeakMap<SchedClient, Map<string, number>>();

function arrayWaitsOf(client: SchedClient): Map<string, number> {
  let waits = arrayWaits.get(client);
  if (!waits) {
    waits = new Map();
    arrayWaits.set(client, waits);
  }
  return waits;
}

/**
 * An array request whose tasks not ended are all lost (missing from the controller and from
 * accounting past the grace): `lost`, as a single job would be, with how many and since when,
 * resolved when accounting shows them. True when the request moved.
 */
async function markArrayLost(
  tx: History,
  deps: PollDeps,
  profile: string,
  row: TrackedRequest,
  summary: ArraySummary,
  now: number,
): Promise<boolean> {
  if (row.state === 'lost') return false;
  const total = Object.values(summary.counts).reduce((a, b) => a + (b ?? 0), 0);
  const tasks = summary.lost === total ? `all ${total} tasks` : `${summary.lost} of ${total} tasks (the others ended)`;
  const seconds = Math.round(deps.settings.lostGraceMs / 1000);
  deps.logger.warn({ profile, requestId: row.id, job_id: row.jobId, lost: summary.lost }, 'array tasks missing');
  // Only from the state its tasks were read in: a task seen again since (another host's poll)
  // may have moved it.
  return transition(tx, row.id, {
    to: 'lost',
    source: 'poll',
    at: now,
    from: row.state,
    reason: summary.reason,
    detail: `${tasks} of array job ${row.jobId} have been missing from the controller and from accounting for over ${seconds} s; they are not assumed finished and will be resolved if accounting shows them ended`,
  });
}

/** The light listing of the tracked jobs: each entry, and the freshness of the answer that had it. */
interface LightStates {
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
async function readLightStates(deps: PollDeps, tracked: TrackedRequest[]): Promise<LightStates> {
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
interface AccountingChunk {
  rows: TrackedRequest[];
  activeOnly: boolean;
  /** Array requests, and the ids of theirs to name (array-poll.ts), when this query carries them. */
  arrays?: readonly TrackedRequest[];
  arrayIds?: readonly number[];
  /** Ask past any answer the proxy keeps (see {@link resolveThroughAccounting}). */
  afresh?: boolean;
}

/**
 * Accounting chunks one cycle may ask for in a mass end: half the profile's burst (its bucket's
 * capacity), so the other half stays for submissions; one while the proxy's rate limit holds the
 * profile. At the default budget (10, 5/s) five chunks: 2,500 ends a cycle.
 */
function accountingChunksPerCycle(client: SchedClient): number {
  if (client.isRateLimited()) return 1;
  return Math.max(1, Math.floor(client.profile.rateLimit.capacity / 2));
}

/**
 * The jobs waiting for accounting, per profile connection: for each request, when it was last
 * asked for, or began to wait. The smallest go first, so a job asked for goes behind every job
 * that has waited since, and none waits forever (jobs accounting never describes, such as lost
 * ones, included). Kept in memory: after a restart every job waits from then, oldest request first.
 */
const accountingQueues = new WeakMap<SchedClient, Map<string, number>>();

function accountingQueueOf(client: SchedClient, waiting: TrackedRequest[]) {
  let since = accountingQueues.get(client);
  if (!since) {
    since = new Map();
    accountingQueues.set(client, since);
  }
  const queue = since;
  const now = Date.now();
  const still = new Set(waiting.map((row) => row.id));
  for (const id of queue.keys()) if (!still.has(id)) queue.delete(id);
  for (const row of waiting) if (!queue.has(row.id)) queue.set(row.id, now);
  return {
    /** The next `count` chunks of requests, the longest waiting first. */
    next(count: number): TrackedRequest[][] {
      const order = [...waiting].sort(
        (a, b) =>
          (queue.get(a.id) ?? now) - (queue.get(b.id) ?? now) ||
          a.createdAt - b.createdAt ||
          (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
      );
      const byJobId = new Map(order.map((row) => [row.jobId as number, row]));
      const chunks = chunkJobIds(
        order.map((row) => row.jobId as number),
        'step',
      ).slice(0, count);
      return chunks.map((ids) => ids.map((id) => byJobId.get(id) as TrackedRequest));
    },
    asked(rows: TrackedRequest[]): void {
      const at = Date.now();
      for (const row of rows) if (queue.has(row.id)) queue.set(row.id, at);
    },
  };
}

/**
 * A poll answered from the proxy's cache past its lifetime (stale-if-error: the scheduler behind
 * it did not answer) is not a successful poll: jobs keep their last known state, and health says
 * the scheduler is down rather than "polled a second ago" (issue 13, weak spot 4).
 */
function pollOutcome(freshness: Freshness): { lastPollOk: boolean; lastPollError: string | null } {
  if (!freshness.stale) return { lastPollOk: true, lastPollError: null };
  return {
    lastPollOk: false,
    lastPollError: `serving stale answers: the scheduler behind the proxy did not answer, and its cached answer is ${freshness.ageSec} s old`,
  };
}

/**
 * A profile with nothing to track still gets its poll recorded, so an idle daemon is not
 * reported overdue: one controller ping per ceiling interval, read and recorded as a poll (a
 * stale answer marked stale, and not ok; a failure recorded by the poll worker, as any poll's). Recording
 * the idle cycle as a poll without asking would cost nothing, but show a scheduler that went
 * down while idle as healthy. After a failed check it asks at every cycle, so recovery shows soon.
 */
async function checkIdleProfile(deps: PollDeps, profile: string): Promise<PollReport> {
  const { store } = deps;
  const sync = await getProfileSync(store, profile);
  const checkEveryMs = deps.settings.pollCeilingMs ?? 60_000;
  if (sync?.lastPollOk && sync.lastPollAt !== null && Date.now() - sync.lastPollAt < checkEveryMs) {
    return { tracked: 0, requests: 0, changed: 0, stale: false, accounting: 'not-needed' };
  }
  const ping = await deps.client.pingController({ forPolling: true, signal: deps.signal });
  await updateProfileSync(store, profile, {
    lastPollAt: Date.now(),
    ...pollOutcome(ping.freshness),
    lastPollAgeSec: ping.freshness.ageSec,
    lastPollStale: ping.freshness.stale,
    // No cache lifetime from a ping: the next poll, for a job submitted meanwhile, then waits only
    // the floor interval (the ping's own pace is checkEveryMs, above), so a short job is still seen running.
    lastMaxAgeSec: null,
  });
  return { tracked: 0, requests: 1, changed: 0, stale: ping.freshness.stale, accounting: 'not-needed' };
}

/**
 * Full controller records (`GET …/jobs`) for jobs whose change accounting could not
 * describe: without them an ended job would have its state but not its exit code or times.
 * A job that has already left the controller keeps the light listing's state. One listing
 * however many jobs need it (Slurm cannot filter it by id); only their records are decoded,
 * and they are written in batches.
 */
async function resolveThroughController(
  deps: PollDeps,
  rows: TrackedRequest[],
  light: LightStates,
  arrayIds: ReadonlySet<number>,
): Promise<{ changed: number; taskListing: { records: SchedJob[]; fresh: boolean } | null }> {
  const { store, client } = deps;
  const wanted = new Set(rows.map((row) => row.jobId as number));
  const listing = await client
    .listJobs({ forPolling: true, signal: deps.signal, jobIds: wanted, arrayJobIds: arrayIds })
    .catch((error: unknown) => {
      if (!(error instanceof SchedflowError)) throw error;
      deps.logger.warn({ code: error.code, err: error }, 'controller listing unavailable: states only');
      return null;
    });
  const full = new Map(listing?.data.jobs.map((job) => [job.job_id, job]));
  const taskListing = listing && {
    records: listing.data.jobs.filter((job) => job.array_job_id !== null && arrayIds.has(job.array_job_id)),
    fresh: !listing.freshness.stale,
  };
  const changed = await writeInSlices(
    store,
    inJobIdOrder(rows, (row) => row.jobId),
    async (tx, row) => {
      const record = full.get(row.jobId as number);
      const entry = light.byId.get(row.jobId as number);
      // Never another job's record: a crashed slurmctld gives lost jobs' ids again. A fresh
      // listing showing another job under the id says the controller lost this one.
      if (record && jobIdentity(record, row) === 'other') {
        if (!listing || listing.freshness.stale) return false;
        const why = describeOtherJob(record, "the controller's");
        return endLostByController(tx, row.id, { at: Date.now(), source: 'poll', why });
      }
      if (record && listing) return applyJob(tx, row, record, 'poll', listing.freshness);
      // Without the full record an end would be recorded without its exit code and times, for
      // good: only a state that has not ended is taken from the light listing; ends wait.
      const ended = entry !== undefined && isTerminalRequest(requestStateFor(entry.state) ?? 'running');
      return (
        entry !== undefined && (listing !== null || !ended) && applyJob(tx, row, entry, 'poll', light.freshnessOf(row))
      );
    },
  );
  return { changed, taskListing };
}

/**
 * Settles the requests whose accounting record may be another job's (see ownRecord): one
 * controller listing for them all, whose records keep the marker. Their own job (a requeue):
 * confirmed and applied. Another job under the id: the controller lost theirs and gave the id
 * again, and they end (node_fail, JobLostByController). Gone from the controller meanwhile:
 * missing, then `lost` after the grace period, since nothing certain is known of them. Only
 * these few ever cost the listing: a job id is checked when its record gives cause, not every
 * new job on every cycle.
 */
async function checkSuspects(deps: PollDeps, profile: string, suspects: Suspect[]): Promise<number> {
  const { store, client, logger } = deps;
  const wanted = new Set(suspects.map(({ row }) => row.jobId as number));
  const listing = await client
    .listJobs({ forPolling: true, signal: deps.signal, jobIds: wanted })
    .catch((error: unknown) => {
      if (!(error instanceof SchedflowError)) throw error;
      logger.warn({ code: error.code, err: error }, 'controller listing unavailable: jobs left to check');
      return null;
    });
  if (!listing || listing.freshness.stale) return 0;
  const full = new Map(listing.data.jobs.map((job) => [job.job_id, job]));
  const now = Date.now();
  return writeInSlices(
    store,
    inJobIdOrder(suspects, ({ row }) => row.jobId),
    async (tx, { row }) => {
      const inController = full.get(row.jobId as number);
      // Left the controller between the two reads: nothing certain is known of it.
      if (!inController) return markMissing(tx, deps, profile, row, now);
      if (jobIdentity(inController, row) === 'ours') {
        // As applyJob's writes, only in the state it was read in (see there).
        await updateRequest(tx, row.id, { jobConfirmedAt: now }, row.state);
        return applyJob(tx, row, inController, 'poll', listing.freshness);
      }
      logger.warn({ requestId: row.id, job_id: row.jobId }, 'the controller lost this job: its id is another job now');
      const why = describeOtherJob(inController, "the controller's");
      return endLostByController(tx, row.id, { at: now, source: 'poll', why });
    },
  );
}

interface Suspect {
  row: TrackedRequest;
}

/**
 * A job the controller no longer has, of which accounting knows nothing certain (no record, a
 * record still active, or records that may be other jobs'): its absence is noted, and after
 * the grace period it is `lost` (never taken to have finished). True when the request moved.
 * `tx` is the transaction of the slice being written.
 */
async function markMissing(
  tx: History,
  deps: PollDeps,
  profile: string,
  row: TrackedRequest,
  now: number,
  /** Accounting's state when it still has the job as active, absent from the controller. */
  accountingState?: string,
): Promise<boolean> {
  const { settings, logger } = deps;
  if (row.missingSince === null) {
    // As applyJob's writes, only in the state it was read in (see there).
    await updateRequest(tx, row.id, { missingSince: now }, row.state);
    return false;
  }
  if (now - row.missingSince < settings.lostGraceMs || row.state === 'lost') return false;
  // Missing since the time read before the scheduler was asked: the job may have been seen since
  // (the reconciler, another host's poll), which clears it, maybe without a move. Read again,
  // locked until the move is written, in the slice's transaction; a rare read (a job missing
  // past the grace), not one per tracked job.
  const current = await missingFactsLocked(tx, row.id);
  if (current?.state !== row.state || current.missingSince !== row.missingSince) return false;
  const seconds = Math.round((now - row.missingSince) / 1000);
  const where =
    accountingState === undefined
      ? 'from the controller and from accounting'
      : `from the controller (accounting still says ${accountingState}: slurmctld lost it in a crash?)`;
  logger.warn({ profile, requestId: row.id, job_id: row.jobId, accountingState }, `job missing ${where}`);
  return transition(tx, row.id, {
    to: 'lost',
    source: 'poll',
    at: now,
    from: row.state,
    detail: `job ${row.jobId} has been missing ${where} for ${seconds} s; it is not assumed finished and will be resolved if accounting shows it ended`,
  });
}

/** How far past now an accounting query asked afresh ends its window. */
const AFRESH_WINDOW_SEC = 86_400;

/**
 * One accounting request for a chunk of requests, naming their jobs (never the account's every
 * record since a start: 394 MB at 100,000 past records, and past ~137,000 more than V8 can hold
 * as a string), and what its answer says of each.
 */
async function resolveThroughAccounting(
  deps: PollDeps,
  profile: string,
  { rows, activeOnly, arrays = [], arrayIds = [], afresh = false }: AccountingChunk,
  light: LightStates,
): Promise<{
  changed: number;
  endedWithoutRecord: TrackedRequest[];
  suspects: Suspect[];
  arrayRecords: SchedJob[] | null;
}> {
  const { store, client } = deps;
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
      ...(afresh && { endTime: Math.floor(Date.now() / 1000) + AFRESH_WINDOW_SEC }),
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
  const endedWithoutRecord: TrackedRequest[] = [];
  const suspects: Suspect[] = [];
  const now = Date.now();
  // Read after the answer: a submission whose job it may hold had started before it was made.
  const inFlight = await submissionsInFlight(store, profile);
  const changed = await writeInSlices(
    store,
    inJobIdOrder(rows, (row) => row.jobId),
    async (tx, row) => {
      const own = ownRecord(found.get(row.jobId as number) ?? [], row, inFlight);
      const inController = light.byId.get(row.jobId as number);
      const controllerFreshness = light.freshnessOf(row);
      // Accounting's only records under the id are other jobs' submitted since (the controller
      // lost this one and gave its id again?), or its record may be another's: the controller's
      // record, which keeps the marker, decides. Gone from the controller too: missing, as a
      // job of which nothing is known (a name alone never ends a request).
      if (own.kind === 'reused' || own.kind === 'suspect') {
        if (history.freshness.stale) return false;
        if (!inController) return markMissing(tx, deps, profile, row, now);
        suspects.push({ row });
        return false;
      }
      const record = own.kind === 'ours' ? own.record : undefined;
      const controllerState = inController ? requestStateFor(inController.state) : null;
      const endedInController = controllerState !== null && isTerminalRequest(controllerState);
      const recordEnded = record !== undefined && isTerminalRequest(requestStateFor(record.state) ?? 'running');
      if (endedInController && !recordEnded) {
        // Accounting lags behind (or its answer was cached before the end): the controller's
        // full record has the exit code and times.
        endedWithoutRecord.push(row);
        return false;
      }
      if (record && inController && !endedInController) {
        // The controller's state; accounting's details only when its record has caught up with
        // that state (an answer from before the change would say pending, without a start).
        const observed =
          record.state === inController.state ? { ...record, state_flags: inController.state_flags } : inController;
        return applyJob(tx, row, observed, 'poll', controllerFreshness);
      }
      if (record && !recordEnded && !inController) {
        // Active in accounting, absent from a controller answer produced after the submission:
        // accounting lags behind an end, or slurmctld lost the job in a crash and slurmdbd keeps
        // it pending forever (a runaway job). Not taken as running: missing, then lost.
        return !history.freshness.stale && markMissing(tx, deps, profile, row, now, record.state);
      }
      if (record) return applyJob(tx, row, record, 'accounting', history.freshness);
      // Accounting has no record yet of a job that has not ended: the controller's state.
      if (inController) return applyJob(tx, row, inController, 'poll', controllerFreshness);
      // (An answer kept from before an outage cannot say a job is missing.)
      return !history.freshness.stale && markMissing(tx, deps, profile, row, now);
    },
  );
  return {
    changed,
    endedWithoutRecord,
    suspects,
    arrayRecords: arrayIds.length > 0 && !history.freshness.stale ? arrayRecords : null,
  };
}
