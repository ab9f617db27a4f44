import type { History } from '../db/history.js';
import {
  getRequest,
  missingFactsLocked,
  submissionsInFlight,
  type TrackedRequest,
  updateRequest,
} from '../db/requests.js';
import type { TransitionSource } from '../db/schema.js';
import { inJobIdOrder, writeInSlices } from '../db/write-in-slices.js';
import { type Clock, systemClock } from '../lib/clock.js';
import type { Freshness } from '../sched/freshness.js';
import type { SchedJob } from '../sched/job-model.js';
import type { JobListing, Read } from '../sched/reads.js';
import { type ArrayPlan, summarizeArrays } from './array-poll.js';
import type { ArraySummary } from './array-state.js';
import { describeOtherJob, jobIdentity, ownRecord } from './job-identity.js';
import { type AccountingEvidence, UNKNOWN_ACCOUNTING } from './lost-evidence.js';
import { DEFAULT_LOST_RESUBMITS, lostResubmitPlan } from './lost-resubmit.js';
import type { AccountingAnswer, AccountingChunk, LightStates } from './poll-ask.js';
import type { PollDeps } from './poll-deps.js';
import { isTerminalRequest, requestStateFor } from './request-state.js';
import { endLostByController, patchEnded, transition } from './transition.js';

/**
 * The applying of a poll cycle (src/requests/poller.ts): what the answers poll-ask.ts got say
 * of each tracked request, written to the history. Nothing here asks the scheduler.
 */

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
  /** The caller's clock: when the job was seen and moved. */
  clock: Clock = systemClock,
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
    lastSeenAt: clock.now(),
    lastSeenAgeSec: freshness.ageSec,
    lastSeenStale: freshness.stale,
    missingSince: null,
  };
  if (!moves) {
    // An ended request's exit code, come after its end: its retry is decided now (patchEnded).
    // (An ended request's state cannot change: patchEnded reads it again as it decides.)
    if (row.exitCode === null && details.exitCode !== undefined && isTerminalRequest(row.state)) {
      await patchEnded(h, row.id, { ...seen, rawState, reason }, clock.now());
    } else {
      await updateRequest(h, row.id, { ...seen, rawState, reason }, row.state);
    }
    return false;
  }
  return transition(h, row.id, {
    to,
    source,
    at: clock.now(),
    rawState,
    reason,
    stale: freshness.stale,
    patch: seen,
    from: row.state,
  });
}

/**
 * What one accounting answer says of each request of its chunk (asked by askAccounting), written
 * in slices: the record that is the request's own applied, an end accounting has not caught up
 * with left for the controller's record, a record that may be another job's left to the suspects'
 * check, a job found nowhere noted missing.
 */
export async function applyAccounting(
  deps: PollDeps,
  profile: string,
  { rows, arrayIds = [] }: AccountingChunk,
  { freshness, found, arrayRecords }: AccountingAnswer,
  light: LightStates,
): Promise<{
  changed: number;
  endedWithoutRecord: TrackedRequest[];
  suspects: Suspect[];
  arrayRecords: SchedJob[] | null;
}> {
  const { store } = deps;
  const endedWithoutRecord: TrackedRequest[] = [];
  const suspects: Suspect[] = [];
  const now = (deps.clock ?? systemClock).now();
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
      const records = found.get(row.jobId as number) ?? [];
      if (own.kind === 'reused' || own.kind === 'suspect') {
        if (freshness.stale) return false;
        // Reused: accounting's records under the id are all other jobs', its answer the ground
        // for a resubmit. A suspect's record may be its job's: nothing is proven (stays `lost`).
        if (!inController) {
          return markMissing(tx, deps, profile, row, now, {
            accounting: own.kind === 'reused' ? { kind: 'answered', records } : UNKNOWN_ACCOUNTING,
          });
        }
        suspects.push({ row, accounting: { kind: 'answered', records } });
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
        return applyJob(tx, row, observed, 'poll', controllerFreshness, deps.clock);
      }
      if (record && !recordEnded && !inController) {
        // Active in accounting, absent from a controller answer produced after the submission:
        // accounting lags behind an end, or slurmctld lost the job in a crash and slurmdbd keeps
        // it pending forever (a runaway job). Not taken as running: missing, then lost.
        return (
          !freshness.stale &&
          markMissing(tx, deps, profile, row, now, { accounting: UNKNOWN_ACCOUNTING, accountingState: record.state })
        );
      }
      if (record) return applyJob(tx, row, record, 'accounting', freshness, deps.clock);
      // Accounting has no record yet of a job that has not ended: the controller's state.
      if (inController) return applyJob(tx, row, inController, 'poll', controllerFreshness, deps.clock);
      // (An answer kept from before an outage cannot say a job is missing.) A fresh answer with no
      // record of the job is accounting's word that it is gone.
      return (
        !freshness.stale && markMissing(tx, deps, profile, row, now, { accounting: { kind: 'answered', records } })
      );
    },
  );
  return {
    changed,
    endedWithoutRecord,
    suspects,
    arrayRecords: arrayIds.length > 0 && !freshness.stale ? arrayRecords : null,
  };
}

/**
 * Applies full controller records (`GET …/jobs`, askController) to jobs whose change accounting could not
 * describe: without them an ended job would have its state but not its exit code or times.
 * A job that has already left the controller keeps the light listing's state. One listing
 * however many jobs need it (Slurm cannot filter it by id); only their records are decoded,
 * and they are written in batches.
 */
export async function applyController(
  deps: PollDeps,
  rows: TrackedRequest[],
  light: LightStates,
  arrayIds: ReadonlySet<number>,
  /** askController's answer; null when it was unavailable. */
  listing: Read<JobListing> | null,
): Promise<{ changed: number; taskListing: { records: SchedJob[]; fresh: boolean } | null }> {
  const { store } = deps;
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
        // No fresh accounting answer for the id here (it lagged, or is unavailable): not resubmitted.
        return endLostByController(tx, row.id, {
          at: (deps.clock ?? systemClock).now(),
          source: 'poll',
          why,
          resubmits: lostResubmitsOf(deps),
          accounting: UNKNOWN_ACCOUNTING,
        });
      }
      if (record && listing) return applyJob(tx, row, record, 'poll', listing.freshness, deps.clock);
      // Without the full record an end would be recorded without its exit code and times, for
      // good: only a state that has not ended is taken from the light listing; ends wait.
      const ended = entry !== undefined && isTerminalRequest(requestStateFor(entry.state) ?? 'running');
      return (
        entry !== undefined &&
        (listing !== null || !ended) &&
        applyJob(tx, row, entry, 'poll', light.freshnessOf(row), deps.clock)
      );
    },
  );
  return { changed, taskListing };
}

/**
 * Settles the requests whose accounting record may be another job's (see ownRecord) by one
 * controller listing for them all (askController), whose records keep the marker. Their own job (a requeue):
 * confirmed and applied. Another job under the id: the controller lost theirs and gave the id
 * again, and they end (node_fail, JobLostByController). Gone from the controller meanwhile:
 * missing, then `lost` after the grace period, since nothing certain is known of them. Only
 * these few ever cost the listing: a job id is checked when its record gives cause, not every
 * new job on every cycle.
 */
export async function applySuspects(
  deps: PollDeps,
  profile: string,
  suspects: Suspect[],
  /** askController's listing of the suspects' ids; null when it was unavailable. */
  listing: Read<JobListing> | null,
): Promise<number> {
  const { store, logger } = deps;
  if (!listing || listing.freshness.stale) return 0;
  const full = new Map(listing.data.jobs.map((job) => [job.job_id, job]));
  const now = (deps.clock ?? systemClock).now();
  return writeInSlices(
    store,
    inJobIdOrder(suspects, ({ row }) => row.jobId),
    async (tx, { row, accounting }) => {
      const inController = full.get(row.jobId as number);
      // Left the controller between the two reads: nothing certain is known of it.
      if (!inController) return markMissing(tx, deps, profile, row, now, { accounting: UNKNOWN_ACCOUNTING });
      if (jobIdentity(inController, row) === 'ours') {
        // As applyJob's writes, only in the state it was read in (see there).
        await updateRequest(tx, row.id, { jobConfirmedAt: now }, row.state);
        return applyJob(tx, row, inController, 'poll', listing.freshness, deps.clock);
      }
      logger.warn({ requestId: row.id, job_id: row.jobId }, 'the controller lost this job: its id is another job now');
      const why = describeOtherJob(inController, "the controller's");
      return endLostByController(tx, row.id, {
        at: now,
        source: 'poll',
        why,
        resubmits: lostResubmitsOf(deps),
        accounting,
      });
    },
  );
}

export interface Suspect {
  row: TrackedRequest;
  /** Accounting's answer for its job id, in the cycle that found it suspect. */
  accounting: AccountingEvidence;
}

/**
 * A job the controller no longer has, of which accounting knows nothing certain (no record, a
 * record still active, or records that may be other jobs'): its absence is noted, and after
 * the grace period it is `lost` (never taken to have finished), unless accounting answered
 * afresh without a record of it and it never started: then it is submitted again
 * (lost-resubmit.ts). True when the request moved. `tx` is the transaction of the slice being
 * written.
 */
export async function markMissing(
  tx: History,
  deps: PollDeps,
  profile: string,
  row: TrackedRequest,
  now: number,
  seen: {
    /**
     * `answered` only when accounting's fresh answer for the id has no record that is this job
     * (none, or other jobs' only); `unknown` when accounting is not served (a cluster without
     * slurmdbd: a job may have run and ended unseen), failed, or has a record that may be it.
     */
    accounting: AccountingEvidence;
    /** Accounting's state when it still has the job as active, absent from the controller. */
    accountingState?: string;
  },
): Promise<boolean> {
  const { accounting, accountingState } = seen;
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
  if (accounting.kind === 'answered') {
    // The controller and accounting agree the job is gone: one that never started is
    // submitted again (within the budget, see lost-resubmit.ts), not left `lost`.
    const full = await getRequest(tx, row.id);
    const plan = full && (await lostResubmitPlan(tx, full, lostResubmitsOf(deps), accounting));
    if (plan?.kind === 'resubmit') {
      logger.warn({ profile, requestId: row.id, job_id: row.jobId }, 'job lost before it started: submitted again');
      return endLostByController(tx, row.id, {
        at: now,
        source: 'poll',
        why: `job ${row.jobId} has been missing from the controller and from accounting for ${seconds} s`,
        resubmits: lostResubmitsOf(deps),
        accounting,
      });
    }
  }
  const where =
    accountingState !== undefined
      ? `from the controller (accounting still says ${accountingState}: slurmctld lost it in a crash?)`
      : accounting.kind === 'answered'
        ? 'from the controller and from accounting'
        : 'from the controller (accounting has no certain record of it, or is not served)';
  logger.warn({ profile, requestId: row.id, job_id: row.jobId, accountingState }, `job missing ${where}`);
  return transition(tx, row.id, {
    to: 'lost',
    source: 'poll',
    at: now,
    from: row.state,
    detail: `job ${row.jobId} has been missing ${where} for ${seconds} s; it is not assumed finished and will be resolved if accounting shows it ended`,
  });
}

/**
 * An array request whose tasks not ended are all lost (missing from the controller and from
 * accounting past the grace): `lost`, as a single job would be, with how many and since when,
 * resolved when accounting shows them. True when the request moved.
 */
export async function markArrayLost(
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

/**
 * Each array request's own state, summed up from its tasks' (array-poll.ts): `lost` when its
 * tasks not ended are all lost, else as a job would be, from accounting when its records gave
 * the end.
 */
export async function applyArraySummaries(
  deps: PollDeps,
  profile: string,
  arrays: TrackedRequest[],
  arrayPlan: ArrayPlan,
  arrayRecords: SchedJob[] | null,
  light: LightStates,
  now: number,
): Promise<number> {
  const { store } = deps;
  const summaries = summarizeArrays(arrays, arrayPlan);
  return writeInSlices(
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
      return applyJob(tx, row, observation, source, light.freshnessOf(row), deps.clock);
    },
  );
}

/** Jobs written from the light states alone (a mass start: see planCycle), in slices. */
export function applyLightStates(deps: PollDeps, rows: TrackedRequest[], light: LightStates): Promise<number> {
  return writeInSlices(
    deps.store,
    inJobIdOrder(rows, (row) => row.jobId),
    async (tx, row) => {
      const job = light.byId.get(row.jobId as number);
      return job !== undefined && applyJob(tx, row, job, 'poll', light.freshnessOf(row), deps.clock);
    },
  );
}

/** SCHEDFLOW_LOST_RESUBMITS as the poll was given it. */
function lostResubmitsOf(deps: PollDeps): number {
  return deps.settings.lostResubmits ?? DEFAULT_LOST_RESUBMITS;
}
