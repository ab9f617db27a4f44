import { getProfileSync, recordAccountingAnswer, updateProfileSync } from '../db/accounting.js';
import type { Db } from '../db/database.js';
import { endLostByController, patchRequest, type TrackedRequest, trackedRequests, transition } from '../db/requests.js';
import type { TransitionSource } from '../db/schema.js';
import { SchedflowError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { SchedClient } from '../sched/client.js';
import type { Freshness } from '../sched/freshness.js';
import type { JobStateEntry, SchedJob } from '../sched/job-model.js';
import { AccountingNotServedError } from '../sched/sched-errors.js';
import { describeOtherJob, jobIdentity, ownRecord } from './job-identity.js';
import { isTerminalRequest, requestStateFor } from './request-state.js';

/** Slurm states of a job that has not ended. */
const ACTIVE_SLURM_STATES = ['PENDING', 'RUNNING', 'SUSPENDED'] as const;

/** Job ids a query names at most (`job_id=1,2,…`, `step=…`); URLs have a length limit. */
export const MAX_IDS_IN_QUERY = 500;

export interface PollSettings {
  /** How long a job may be missing from both controller and accounting before it is `lost`. @defaultValue 300000 */
  lostGraceMs: number;
  /** How often a profile with nothing to track is checked (the poll interval's ceiling). @defaultValue 60000 */
  pollCeilingMs?: number;
}

export interface PollDeps {
  db: Db;
  client: SchedClient;
  logger: Logger;
  settings: PollSettings;
  signal?: AbortSignal;
}

export interface PollReport {
  tracked: number;
  /**
   * Upstream requests this cycle made: with nothing to track 1 when it checked the controller
   * and 0 when the last check is recent; 1 when nothing changed, 2 with
   * changes (accounting), 3 when accounting could not describe an ended job or a record may be
   * another job's (a controller listing), 4 when both happen in one cycle.
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
  Partial<Pick<SchedJob, 'reason' | 'start_time' | 'end_time' | 'exit_code' | 'signal'>>;

/**
 * Applies what the scheduler says of a job to its request: state, and the
 * details the record has. Writes nothing when nothing changed, so a cycle over
 * thousands of unchanged jobs costs no writes (their freshness is the poll's,
 * kept per profile).
 */
export function applyJob(
  db: Db,
  row: TrackedRequest,
  job: JobObservation,
  source: TransitionSource,
  freshness: Freshness,
): boolean {
  const details = {
    ...(job.start_time != null && { startedAt: job.start_time * 1000 }),
    ...(job.end_time != null && { endedAt: job.end_time * 1000 }),
    ...(job.exit_code != null && { exitCode: job.exit_code }),
    ...(job.signal != null && { signal: job.signal.id }),
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
    patchRequest(db, row.id, { ...seen, rawState, reason });
    return false;
  }
  return transition(db, row.id, {
    to,
    source,
    at: Date.now(),
    rawState,
    reason,
    stale: freshness.stale,
    patch: seen,
  });
}

/**
 * One poll cycle for one profile, whatever the number of tracked jobs: one
 * `jobs/state` request for all of them, and one accounting request for those
 * that changed, finished or left the controller (details such as the exit code
 * come from there). When accounting cannot give an ended job's record (a cluster
 * without slurmdbd, slurmdbd down, or lagging), one full controller listing does.
 * A job found nowhere is never taken to have completed; after a grace period it
 * is `lost`, and accounting may still resolve it later.
 */
export async function pollProfile(deps: PollDeps, profile: string): Promise<PollReport> {
  const { db, client, logger } = deps;
  const tracked = trackedRequests(db, profile);
  if (tracked.length === 0) return checkIdleProfile(deps, profile);

  // Few jobs: ask for just those. Many: their ids would not fit in a URL, so take every job's state.
  const ids = tracked.length <= MAX_IDS_IN_QUERY ? tracked.map((r) => r.jobId as number) : [];
  const states = await client.listJobStates(ids, { forPolling: true, signal: deps.signal });
  let requests = 1;
  const byId = new Map(states.data.map((job) => [job.job_id, job]));
  const producedNoEarlierThan = states.freshness.fetchedAt.getTime() - (states.freshness.ageSec + 1) * 1000;
  let changed = 0;
  const needAccounting: TrackedRequest[] = [];
  const changedRows: TrackedRequest[] = [];
  let activeOnly = false;
  for (const row of tracked) {
    const job = byId.get(row.jobId as number);
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
    } else if (!states.freshness.stale && producedNoEarlierThan > (row.submittedAt ?? 0)) {
      // Absent from an answer produced after the submission: it has left the controller.
      needAccounting.push(row);
    }
  }

  // One transaction per batch of writes: thousands of small commits would dominate the cycle.
  db.transaction(() => {
    // Full records only while the accounting query can name its jobs: a mass start of thousands
    // would otherwise pull every full record of the account into memory at once. Those get the
    // light record now, and the rest with their end.
    if (needAccounting.length + changedRows.length <= MAX_IDS_IN_QUERY) {
      activeOnly = needAccounting.length === 0 && changedRows.length > 0;
      needAccounting.push(...changedRows);
    } else {
      for (const row of changedRows) {
        const job = byId.get(row.jobId as number);
        if (job && applyJob(db, row, job, 'poll', states.freshness)) changed++;
      }
    }
  });

  let accounting: PollReport['accounting'] = 'not-needed';
  let needController: TrackedRequest[] = [];
  if (needAccounting.length > 0) {
    requests++;
    const query = { rows: needAccounting, activeOnly };
    try {
      const result = await resolveThroughAccounting(deps, profile, query, byId, states.freshness);
      changed += result.changed;
      needController = result.endedWithoutRecord;
      if (result.suspects.length > 0) {
        requests++;
        changed += await checkSuspects(deps, profile, result.suspects);
      }
      recordAccountingAnswer(db, profile, null);
      accounting = 'ok';
    } catch (error) {
      if (!(error instanceof SchedflowError)) throw error;
      // Said once when it starts (or its reason changes), not on every cycle of a long outage.
      if (recordAccountingAnswer(db, profile, error.message)) {
        logger.warn(
          { profile, code: error.code, err: error.message },
          'accounting unavailable: following jobs with controller data only',
        );
      }
      needController = needAccounting.filter((row) => byId.has(row.jobId as number));
      // A cluster without accounting will never describe a job that left the controller unseen
      // (a daemon down past MinJobAge): it goes the way of any job found nowhere.
      if (error instanceof AccountingNotServedError && !states.freshness.stale) {
        const now = Date.now();
        db.transaction(() => {
          for (const row of needAccounting) {
            if (!byId.has(row.jobId as number) && markMissing(deps, profile, row, now)) changed++;
          }
        });
      }
      accounting = 'unavailable';
    }
  }
  if (needController.length > 0) {
    requests++;
    changed += await resolveThroughController(deps, needController, byId, states.freshness);
  }
  updateProfileSync(db, profile, {
    lastPollAt: Date.now(),
    ...pollOutcome(states.freshness),
    lastPollAgeSec: states.freshness.ageSec,
    lastPollStale: states.freshness.stale,
    lastMaxAgeSec: states.freshness.maxAgeSec,
  });
  return { tracked: tracked.length, requests, changed, stale: states.freshness.stale, accounting };
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
  const { db } = deps;
  const sync = getProfileSync(db, profile);
  const checkEveryMs = deps.settings.pollCeilingMs ?? 60_000;
  if (sync?.lastPollOk && sync.lastPollAt !== null && Date.now() - sync.lastPollAt < checkEveryMs) {
    return { tracked: 0, requests: 0, changed: 0, stale: false, accounting: 'not-needed' };
  }
  const ping = await deps.client.pingController({ forPolling: true, signal: deps.signal });
  updateProfileSync(db, profile, {
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
 * A job that has already left the controller keeps the light listing's state.
 */
async function resolveThroughController(
  deps: PollDeps,
  rows: TrackedRequest[],
  light: Map<number, JobStateEntry>,
  lightFreshness: Freshness,
): Promise<number> {
  const { db, client } = deps;
  const listing = await client.listJobs({ forPolling: true, signal: deps.signal }).catch((error: unknown) => {
    if (!(error instanceof SchedflowError)) throw error;
    deps.logger.warn({ code: error.code, err: error.message }, 'controller listing unavailable: states only');
    return null;
  });
  const full = new Map(listing?.data.jobs.map((job) => [job.job_id, job]));
  let changed = 0;
  db.transaction(() => {
    for (const row of rows) {
      const record = full.get(row.jobId as number);
      const entry = light.get(row.jobId as number);
      // Never another job's record: a crashed slurmctld gives lost jobs' ids again. A fresh
      // listing showing another job under the id says the controller lost this one.
      if (record && jobIdentity(record, row) === 'other') {
        if (listing && !listing.freshness.stale) {
          const why = describeOtherJob(record, "the controller's");
          if (endLostByController(db, row.id, { at: Date.now(), source: 'poll', why })) changed++;
        }
        continue;
      }
      if (record && listing) {
        if (applyJob(db, row, record, 'poll', listing.freshness)) changed++;
        continue;
      }
      // Without the full record an end would be recorded without its exit code and times, for
      // good: only a state that has not ended is taken from the light listing; ends wait.
      const ended = entry !== undefined && isTerminalRequest(requestStateFor(entry.state) ?? 'running');
      if (entry && (listing || !ended) && applyJob(db, row, entry, 'poll', lightFreshness)) changed++;
    }
  });
  return changed;
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
  const { db, client, logger } = deps;
  const listing = await client.listJobs({ forPolling: true, signal: deps.signal }).catch((error: unknown) => {
    if (!(error instanceof SchedflowError)) throw error;
    logger.warn({ code: error.code, err: error.message }, 'controller listing unavailable: jobs left to check');
    return null;
  });
  if (!listing || listing.freshness.stale) return 0;
  const full = new Map(listing.data.jobs.map((job) => [job.job_id, job]));
  let changed = 0;
  const now = Date.now();
  db.transaction(() => {
    for (const { row } of suspects) {
      const inController = full.get(row.jobId as number);
      if (!inController) {
        // Left the controller between the two reads: nothing certain is known of it.
        if (markMissing(deps, profile, row, now)) changed++;
        continue;
      }
      if (jobIdentity(inController, row) === 'ours') {
        patchRequest(db, row.id, { jobConfirmedAt: now });
        if (applyJob(db, row, inController, 'poll', listing.freshness)) changed++;
        continue;
      }
      logger.warn({ requestId: row.id, job_id: row.jobId }, 'the controller lost this job: its id is another job now');
      const why = describeOtherJob(inController, "the controller's");
      if (endLostByController(db, row.id, { at: now, source: 'poll', why })) changed++;
    }
  });
  return changed;
}

interface Suspect {
  row: TrackedRequest;
}

/**
 * A job the controller no longer has, of which accounting knows nothing certain (no record, a
 * record still active, or records that may be other jobs'): its absence is noted, and after
 * the grace period it is `lost` (never taken to have finished). True when the request moved.
 */
function markMissing(
  deps: PollDeps,
  profile: string,
  row: TrackedRequest,
  now: number,
  /** Accounting's state when it still has the job as active, absent from the controller. */
  accountingState?: string,
): boolean {
  const { db, settings, logger } = deps;
  if (row.missingSince === null) {
    patchRequest(db, row.id, { missingSince: now });
    return false;
  }
  if (now - row.missingSince < settings.lostGraceMs || row.state === 'lost') return false;
  const seconds = Math.round((now - row.missingSince) / 1000);
  const where =
    accountingState === undefined
      ? 'from the controller and from accounting'
      : `from the controller (accounting still says ${accountingState}: slurmctld lost it in a crash?)`;
  logger.warn({ profile, requestId: row.id, job_id: row.jobId, accountingState }, `job missing ${where}`);
  return transition(db, row.id, {
    to: 'lost',
    source: 'poll',
    at: now,
    detail: `job ${row.jobId} has been missing ${where} for ${seconds} s; it is not assumed finished and will be resolved if accounting shows it ended`,
  });
}

async function resolveThroughAccounting(
  deps: PollDeps,
  profile: string,
  { rows, activeOnly }: { rows: TrackedRequest[]; activeOnly: boolean },
  controller: Map<number, JobStateEntry>,
  controllerFreshness: Freshness,
): Promise<{ changed: number; endedWithoutRecord: TrackedRequest[]; suspects: Suspect[] }> {
  const { db, client } = deps;
  // The request's creation bounds its job's submit time from below, also for an
  // adopted job, whose recorded submittedAt is when schedflow found it.
  const earliestSubmitSec = Math.min(...rows.map((r) => Math.floor(r.createdAt / 1000)));
  const account = client.profile.account;
  const history = await client.listAccountingJobs(
    {
      jobIds: rows.length <= MAX_IDS_IN_QUERY ? rows.map((r) => r.jobId as number) : undefined,
      accounts: account ? [account] : undefined,
      startTime: earliestSubmitSec - 60,
      // Only started jobs: ask for active records only. The proxy caches answers by URL, so the
      // answer to this query can never stand in, later, for the one that asks how they ended.
      ...(activeOnly && { states: [...ACTIVE_SLURM_STATES] }),
    },
    { forPolling: true, signal: deps.signal },
  );
  // Several records can share an id: a requeued job (a new submit time each time) and, after a
  // crash of slurmctld, a job it lost and the one that has its id now.
  const found = new Map<number, SchedJob[]>();
  for (const job of history.data) found.set(job.job_id, [...(found.get(job.job_id) ?? []), job]);
  let changed = 0;
  const endedWithoutRecord: TrackedRequest[] = [];
  const suspects: Suspect[] = [];
  const now = Date.now();
  db.transaction(() => {
    for (const row of rows) {
      const own = ownRecord(found.get(row.jobId as number) ?? [], row);
      const inController = controller.get(row.jobId as number);
      // Accounting's only records under the id are other jobs' submitted since (the controller
      // lost this one and gave its id again?), or its record may be another's: the controller's
      // record, which keeps the marker, decides. Gone from the controller too: missing, as a
      // job of which nothing is known (a name alone never ends a request).
      if (own.kind === 'reused' || own.kind === 'suspect') {
        if (history.freshness.stale) continue;
        if (inController) suspects.push({ row });
        else if (markMissing(deps, profile, row, now)) changed++;
        continue;
      }
      const record = own.kind === 'ours' ? own.record : undefined;
      const controllerState = inController ? requestStateFor(inController.state) : null;
      const endedInController = controllerState !== null && isTerminalRequest(controllerState);
      const recordEnded = record !== undefined && isTerminalRequest(requestStateFor(record.state) ?? 'running');
      if (endedInController && !recordEnded) {
        // Accounting lags behind (or its answer was cached before the end): the controller's
        // full record has the exit code and times.
        endedWithoutRecord.push(row);
      } else if (record && inController && !endedInController) {
        // The controller's state; accounting's details only when its record has caught up with
        // that state (an answer from before the change would say pending, without a start).
        const observed =
          record.state === inController.state ? { ...record, state_flags: inController.state_flags } : inController;
        if (applyJob(db, row, observed, 'poll', controllerFreshness)) changed++;
      } else if (record && !recordEnded && !inController) {
        // Active in accounting, absent from a controller answer produced after the submission:
        // accounting lags behind an end, or slurmctld lost the job in a crash and slurmdbd keeps
        // it pending forever (a runaway job). Not taken as running: missing, then lost.
        if (!history.freshness.stale && markMissing(deps, profile, row, now, record.state)) changed++;
      } else if (record) {
        if (applyJob(db, row, record, 'accounting', history.freshness)) changed++;
      } else if (inController) {
        // Accounting has no record yet of a job that has not ended: the controller's state.
        if (applyJob(db, row, inController, 'poll', controllerFreshness)) changed++;
      } else if (!history.freshness.stale && markMissing(deps, profile, row, now)) {
        // (An answer kept from before an outage cannot say a job is missing.)
        changed++;
      }
    }
  });
  return { changed, endedWithoutRecord, suspects };
}
