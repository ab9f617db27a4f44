import { recordAccountingAnswer, updateProfileSync } from '../db/accounting.js';
import type { Db } from '../db/database.js';
import { patchRequest, type TrackedRequest, trackedRequests, transition } from '../db/requests.js';
import type { TransitionSource } from '../db/schema.js';
import { SchedflowError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { SchedClient } from '../sched/client.js';
import type { Freshness } from '../sched/freshness.js';
import type { SchedJob } from '../sched/job-model.js';
import { isTerminalRequest, requestStateFor } from './request-state.js';

/** Slurm states of a job that has not ended. */
const ACTIVE_SLURM_STATES = ['PENDING', 'RUNNING', 'SUSPENDED'] as const;

/** Job ids a query names at most (`job_id=1,2,…`, `step=…`); URLs have a length limit. */
export const MAX_IDS_IN_QUERY = 500;

export interface PollSettings {
  /** How long a job may be missing from both controller and accounting before it is `lost`. @defaultValue 300000 */
  lostGraceMs: number;
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
  /** Upstream requests this cycle made: 0 with nothing to track, else 1 or 2. */
  requests: number;
  changed: number;
  stale: boolean;
  accounting: 'not-needed' | 'ok' | 'unavailable';
}

/**
 * Applies what the scheduler says of a job to its request: state, and the
 * details the record has. Writes nothing when nothing changed, so a cycle over
 * thousands of unchanged jobs costs no writes (their freshness is the poll's,
 * kept per profile).
 */
export function applyJob(
  db: Db,
  row: TrackedRequest,
  job: SchedJob,
  source: TransitionSource,
  freshness: Freshness,
): boolean {
  const details = {
    ...(job.start_time !== null && { startedAt: job.start_time * 1000 }),
    ...(job.end_time !== null && { endedAt: job.end_time * 1000 }),
    ...(job.exit_code !== null && { exitCode: job.exit_code }),
    ...(job.signal !== null && { signal: job.signal.id }),
  };
  const rawState = job.state_flags.join(',');
  const to = requestStateFor(job.state);
  const moves = to !== null && to !== row.state;
  const unchanged =
    !moves &&
    row.rawState === rawState &&
    row.reason === job.reason &&
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
    patchRequest(db, row.id, { ...seen, rawState, reason: job.reason });
    return false;
  }
  return transition(db, row.id, {
    to,
    source,
    at: Date.now(),
    rawState,
    reason: job.reason,
    stale: freshness.stale,
    patch: seen,
  });
}

/**
 * One poll cycle for one profile, whatever the number of tracked jobs: one
 * `jobs/state` request for all of them, and one accounting request for those
 * that finished or left the controller (details such as the exit code come
 * from there). A job found in neither is never taken to have completed; after
 * a grace period it is `lost`, and accounting may still resolve it later.
 */
export async function pollProfile(deps: PollDeps, profile: string): Promise<PollReport> {
  const { db, client, logger } = deps;
  const tracked = trackedRequests(db, profile);
  if (tracked.length === 0) return { tracked: 0, requests: 0, changed: 0, stale: false, accounting: 'not-needed' };

  // Few jobs: ask for just those. Many: their ids would not fit in a URL, so take every job's state.
  const ids = tracked.length <= MAX_IDS_IN_QUERY ? tracked.map((r) => r.jobId as number) : [];
  const states = await client.listJobStates(ids, { forPolling: true, signal: deps.signal });
  const byId = new Map(states.data.map((job) => [job.job_id, job]));
  const producedNoEarlierThan = states.freshness.fetchedAt.getTime() - (states.freshness.ageSec + 1) * 1000;
  let changed = 0;
  const needAccounting: TrackedRequest[] = [];
  const changedRows: TrackedRequest[] = [];
  let activeOnly = false;
  // One transaction per batch of writes: thousands of small commits would dominate the cycle.
  db.transaction(() => {
    for (const row of tracked) {
      const job = byId.get(row.jobId as number);
      if (job) {
        const to = requestStateFor(job.state);
        // Finished: the accounting record carries exit code, times and elapsed. A state that
        // changed (pending to running): the light listing has no reason, start time or nodes,
        // so the full record comes with the same accounting request, not one more per job.
        if (to !== null && isTerminalRequest(to)) needAccounting.push(row);
        else if (job.state_flags.join(',') !== row.rawState || row.missingSince !== null) changedRows.push(row);
      } else if (!states.freshness.stale && producedNoEarlierThan > (row.submittedAt ?? 0)) {
        // Absent from an answer produced after the submission: it has left the controller.
        needAccounting.push(row);
      }
    }
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
  if (needAccounting.length > 0) {
    const query = { rows: needAccounting, activeOnly };
    accounting = await resolveThroughAccounting(deps, profile, query, byId, states.freshness).then(
      (n) => {
        changed += n;
        recordAccountingAnswer(db, profile, null);
        return 'ok' as const;
      },
      (error: unknown) => {
        if (!(error instanceof SchedflowError)) throw error;
        logger.warn(
          { profile, code: error.code, err: error.message },
          'accounting unavailable: following jobs with controller data only',
        );
        recordAccountingAnswer(db, profile, error.message);
        // Without accounting, a finished job still gets its final state from the controller.
        for (const row of needAccounting) {
          const job = byId.get(row.jobId as number);
          if (job && applyJob(db, row, job, 'poll', states.freshness)) changed++;
        }
        return 'unavailable' as const;
      },
    );
  }
  updateProfileSync(db, profile, {
    lastPollAt: Date.now(),
    lastPollOk: true,
    lastPollError: null,
    lastPollAgeSec: states.freshness.ageSec,
    lastPollStale: states.freshness.stale,
    lastMaxAgeSec: states.freshness.maxAgeSec,
  });
  return {
    tracked: tracked.length,
    requests: needAccounting.length > 0 ? 2 : 1,
    changed,
    stale: states.freshness.stale,
    accounting,
  };
}

async function resolveThroughAccounting(
  deps: PollDeps,
  profile: string,
  { rows, activeOnly }: { rows: TrackedRequest[]; activeOnly: boolean },
  controller: Map<number, SchedJob>,
  controllerFreshness: Freshness,
): Promise<number> {
  const { db, client, settings, logger } = deps;
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
  const found = new Map(history.data.map((job) => [job.job_id, job]));
  let changed = 0;
  const now = Date.now();
  db.transaction(() => {
    for (const row of rows) {
      const record = found.get(row.jobId as number);
      const inController = controller.get(row.jobId as number);
      const stillActive = inController && !isTerminalRequest(requestStateFor(inController.state) ?? 'running');
      if (record && inController && stillActive) {
        // Accounting may lag behind a job that just started: the controller's state, accounting's details.
        const merged = { ...record, state: inController.state, state_flags: inController.state_flags };
        if (applyJob(db, row, merged, 'poll', controllerFreshness)) changed++;
      } else if (record) {
        if (applyJob(db, row, record, 'accounting', history.freshness)) changed++;
      } else if (inController) {
        // Accounting lags behind the controller: take the controller's state now.
        if (applyJob(db, row, inController, 'poll', controllerFreshness)) changed++;
      } else if (history.freshness.stale) {
        // An answer kept from before an outage cannot say a job is missing.
      } else if (row.missingSince === null) {
        patchRequest(db, row.id, { missingSince: now });
      } else if (now - row.missingSince >= settings.lostGraceMs && row.state !== 'lost') {
        const seconds = Math.round((now - row.missingSince) / 1000);
        logger.warn({ profile, requestId: row.id, job_id: row.jobId }, 'job is in neither controller nor accounting');
        if (
          transition(db, row.id, {
            to: 'lost',
            source: 'poll',
            at: now,
            detail: `job ${row.jobId} has been missing from the controller and from accounting for ${seconds} s; it is not assumed finished and will be resolved if accounting shows it`,
          })
        ) {
          changed++;
        }
      }
    }
  });
  return changed;
}
