import { getProfileSync, recordAccountingAnswer, updateProfileSync } from '../db/accounting.js';
import { type TrackedRequest, trackedRequests } from '../db/requests.js';
import { inJobIdOrder, writeInSlices } from '../db/write-in-slices.js';
import { SchedflowError } from '../errors.js';
import { systemClock } from '../lib/clock.js';
import type { Freshness } from '../sched/freshness.js';
import type { SchedJob } from '../sched/job-model.js';
import { AccountingNotServedError } from '../sched/sched-errors.js';
import {
  applyArrayRecords,
  applyControllerTaskRecords,
  arraysNeedingController,
  markMissingTasks,
} from './array-poll.js';
import { UNKNOWN_ACCOUNTING } from './lost-evidence.js';
import { refreshPendingDetails } from './pending-details.js';
import {
  applyAccounting,
  applyArraySummaries,
  applyController,
  applyLightStates,
  applySuspects,
  markMissing,
  type Suspect,
} from './poll-apply.js';
import {
  type AccountingAnswer,
  type AccountingChunk,
  askAccounting,
  askController,
  type LightStates,
  readLightStates,
} from './poll-ask.js';
import type { PollDeps } from './poll-deps.js';
import { arrayWaitsOf, type CyclePlan, endWaitsOf, planCycle } from './poll-plan.js';

// applyJob is also the reconciler's way to apply what accounting says of a job.
export { applyJob, type JobObservation } from './poll-apply.js';
export type { PollDeps, PollSettings } from './poll-deps.js';

/** Changes one cycle wrote above which it was a burst (a mass start or end) for the heap collector. */
const BURST_CHANGES = 1000;

export interface PollReport {
  tracked: number;
  /**
   * Upstream requests this cycle made: with nothing to track 1 when it checked the controller
   * and 0 when the last check is recent. Otherwise one `jobs/state` request per chunk of tracked
   * job ids (one up to 500 jobs), one accounting request per chunk of jobs that changed, finished
   * or left the controller (one when up to 500 did; more in a mass end, within the request
   * budget), one controller listing when accounting could not describe an ended job or an array
   * task's end (at once when accounting did not answer; after END_PATIENCE_MS, or
   * ARRAY_END_PATIENCE_MS for a task, when it answered without it), and one when a record may
   * be another job's. The pending jobs' full
   * records (pending-details.ts) are read beside the cycle, not counted here.
   */
  requests: number;
  changed: number;
  stale: boolean;
  accounting: 'not-needed' | 'ok' | 'unavailable';
}

/**
 * One poll cycle for one profile, whatever the number of tracked jobs: `jobs/state` for them
 * (one request up to 500 jobs, one per chunk of ids beyond), and accounting for those that
 * changed, finished or left the controller (details such as the exit code come from there): one
 * request up to 500 jobs; beyond, chunks of 500 within the request budget, the longest waiting
 * first, the rest in the next cycles. Both always name their jobs: never every job of the
 * controller (every user's), nor every record of the account (issue 14). When accounting cannot
 * give an ended job's record (a cluster without slurmdbd, slurmdbd down, or lagging past
 * END_PATIENCE_MS), one full controller listing does. A job found nowhere is never taken to have completed; after a grace
 * period it is `lost`, and accounting may still resolve it later.
 */
export async function pollProfile(deps: PollDeps, profile: string): Promise<PollReport> {
  const { store } = deps;
  const tracked = await trackedRequests(store, profile);
  if (tracked.length === 0) return checkIdleProfile(deps, profile);

  // Ask: the light states of every tracked job. Plan: what accounting must describe, in which
  // requests. Then each answer is applied as it comes: accounting's chunk by chunk, then one
  // controller listing for what they left unresolved, then the arrays' own states.
  const light = await readLightStates(deps, tracked);
  const plan = await planCycle(deps, tracked, light);
  let changed = await applyLightStates(deps, plan.fromLightStates, light);
  const accounting = await resolveThroughAccounting(deps, profile, plan, light);
  changed += accounting.changed;
  const controller = await resolveThroughController(deps, profile, plan, light, accounting);
  changed += controller.changed;
  // Last, and not waited for: why the jobs still pending wait, and when they are expected to start.
  refreshPendingDetailsApart(deps, tracked, light);
  const requests = light.requests + accounting.requests + controller.requests;
  await updateProfileSync(store, profile, {
    lastPollAt: (deps.clock ?? systemClock).now(),
    ...pollOutcome(light.overall),
    lastPollAgeSec: light.overall.ageSec,
    lastPollStale: light.overall.stale,
    lastMaxAgeSec: light.overall.maxAgeSec,
  });
  if (changed >= BURST_CHANGES) deps.heap?.afterBurst();
  return { tracked: tracked.length, requests, changed, stale: light.overall.stale, accounting: accounting.outcome };
}

/** The pending details' read under way, per profile connection: one at a time. */
const pendingDetailsUnderWay = new WeakSet<PollDeps['client']>();

/**
 * Reads the pending jobs' details beside the poll cycles, not in them: the controller's listing
 * of thousands of pending jobs takes slurmrestd seconds (7.8 s for 5,000 on a real Slurm
 * 25.11.7), and a cycle that waited for it saw the end of those 5,000 that much later (five
 * poll intervals instead of two). A forecast can wait; a state cannot. One read at a time per
 * profile: a cycle that finds one under way leaves the due jobs to the next.
 */
function refreshPendingDetailsApart(deps: PollDeps, tracked: readonly TrackedRequest[], light: LightStates): void {
  if (pendingDetailsUnderWay.has(deps.client)) return;
  pendingDetailsUnderWay.add(deps.client);
  refreshPendingDetails(deps, tracked, light)
    .then(({ changed }) => {
      if (changed >= BURST_CHANGES) deps.heap?.afterBurst();
    })
    .catch((error: unknown) => {
      // Its own upstream failures are handled inside; what is left is the history closing under
      // a shutdown, or a fault the next cycle meets again.
      deps.logger[deps.signal?.aborted ? 'debug' : 'warn']({ err: error }, 'pending details not recorded');
    })
    .finally(() => pendingDetailsUnderWay.delete(deps.client));
}

/** What accounting resolved, and what it left to the controller's listing. */
interface AccountingResolution {
  outcome: PollReport['accounting'];
  requests: number;
  changed: number;
  /** Jobs whose change accounting could not describe: the controller's full records do. */
  needController: TrackedRequest[];
  /** The array tasks' records accounting gave; null when it gave none it could vouch for. */
  arrayRecords: SchedJob[] | null;
  /** Why accounting did not answer this cycle; null when it did (or was not asked). */
  failure: SchedflowError | null;
}

/**
 * Asks accounting the planned requests, two under way at once, and applies each answer as it
 * comes, in order; then settles the records that may be other jobs' (one controller listing).
 * When accounting does not answer, the jobs it left go to the controller's listing at once;
 * ends it has not caught up with, once they have waited END_PATIENCE_MS.
 */
async function resolveThroughAccounting(
  deps: PollDeps,
  profile: string,
  plan: CyclePlan,
  light: LightStates,
): Promise<AccountingResolution> {
  const { store, logger } = deps;
  const { needAccounting, queries, queue } = plan;
  let outcome: PollReport['accounting'] = 'not-needed';
  let requests = 0;
  let changed = 0;
  let arrayRecords: SchedJob[] | null = null;
  const needController: TrackedRequest[] = [];
  const suspects: Suspect[] = [];
  const answered = new Set<string>();
  let failure: SchedflowError | null = null;
  const endedWithoutRecord: TrackedRequest[] = [];
  // Asked ACCOUNTING_IN_FLIGHT at a time, each answer applied as it comes, in order: slurmrestd
  // and slurmdbd answer the next chunk while this one is written.
  const asks: Promise<Asked>[] = [];
  const ask = (index: number) => {
    const query = queries[index];
    if (!query || failure !== null) return;
    requests++;
    // Asked, answered or not: a chunk that keeps failing (a record schedflow cannot read) must
    // not hold the others back; it goes behind them.
    queue.asked(query.rows);
    asks[index] = askAccounting(deps, query).then(
      (answer) => ({ answer }),
      (error: unknown) => ({ error }),
    );
  };
  for (let i = 0; i < ACCOUNTING_IN_FLIGHT; i++) ask(i);
  for (let i = 0; i < queries.length && asks[i]; i++) {
    const query = queries[i] as AccountingChunk;
    const asked = (await asks[i]) as Asked;
    if ('error' in asked) {
      if (!(asked.error instanceof SchedflowError)) throw asked.error;
      failure = asked.error;
      break;
    }
    ask(i + ACCOUNTING_IN_FLIGHT);
    const result = await applyAccounting(deps, profile, query, asked.answer, light);
    if (result.arrayRecords) arrayRecords = [...(arrayRecords ?? []), ...result.arrayRecords];
    changed += result.changed;
    endedWithoutRecord.push(...result.endedWithoutRecord);
    suspects.push(...result.suspects);
    for (const row of query.rows) answered.add(row.id);
  }
  // An end accounting has not caught up with waits for it a while, asked again each cycle under
  // a new URL (poll-plan.ts): slurmdbd is a moment behind a single end, and seconds behind a mass
  // end (the last of 5,000 jobs cancelled at once reached it 3.9 s after the cancel, on a real
  // Slurm 25.11.7). The controller's listing of every job would give them at once, but costs
  // slurmrestd ~0.8 ms a job of the controller's, whoever's (3.8 s for 5,000), and holds the cycle.
  const waits = endWaitsOf(deps.client);
  const now = (deps.clock ?? systemClock).now();
  const patienceMs = deps.settings.endPatienceMs ?? END_PATIENCE_MS;
  for (const row of endedWithoutRecord) {
    const since = waits.get(row.id) ?? now;
    waits.set(row.id, since);
    if (now - since >= patienceMs) needController.push(row);
  }
  if (suspects.length > 0) {
    requests++;
    const wanted = new Set(suspects.map(({ row }) => row.jobId as number));
    const listing = await askController(deps, wanted, undefined, 'controller listing unavailable: jobs left to check');
    changed += await applySuspects(deps, profile, suspects, listing);
  }
  if (queries.length > 0 && failure === null) {
    await recordAccountingAnswer(store, profile, null);
    outcome = 'ok';
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
      const now = (deps.clock ?? systemClock).now();
      const gone = unresolved.filter((row) => !light.byId.has(row.jobId as number) && !light.freshnessOf(row).stale);
      changed += await writeInSlices(
        store,
        inJobIdOrder(gone, (row) => row.jobId),
        // No accounting to say the job never ran (it may have run and ended unseen): `lost`,
        // never submitted again.
        (tx, row) => markMissing(tx, deps, profile, row, now, { accounting: UNKNOWN_ACCOUNTING }),
      );
    }
    outcome = 'unavailable';
  }
  return { outcome, requests, changed, needController, arrayRecords, failure };
}

/**
 * The controller's full records for what accounting left (ends it could not describe, array
 * tasks it has not shown ended), one listing for all; then each array request's own state from
 * its tasks'.
 */
async function resolveThroughController(
  deps: PollDeps,
  profile: string,
  plan: CyclePlan,
  light: LightStates,
  accounting: AccountingResolution,
): Promise<{ requests: number; changed: number }> {
  // Arrays: the light states and accounting's records first; the tasks these leave unsettled get
  // the controller's records, in the one listing single jobs take (array-poll.ts).
  const { store, client } = deps;
  const { arrays, arrayPlan } = plan;
  const { needController, arrayRecords, failure } = accounting;
  let requests = 0;
  let changed = 0;
  const now = (deps.clock ?? systemClock).now();
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
    const wanted = new Set(needController.map((row) => row.jobId as number));
    const listing = await askController(
      deps,
      wanted,
      arrayIdsForController,
      'controller listing unavailable: states only',
    );
    const result = await applyController(deps, needController, light, arrayIdsForController, listing);
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
    changed += await applyArraySummaries(deps, profile, arrays, arrayPlan, arrayRecords, light, now);
  }
  return { requests, changed };
}

/**
 * How long the end of an array's task may wait for accounting's record while the controller
 * shows it ended, before the controller's full record gives it. A cycle where accounting is a
 * moment behind costs no third request; one where its records never come (a cluster that keeps
 * none for the job, slurmdbd losing them) still ends, well within the controller's MinJobAge
 * (300 s by default) that keeps the ended task's record.
 */
const ARRAY_END_PATIENCE_MS = 30_000;

/**
 * The same for a single job's end: well past the lag of a mass end's records, and well within a
 * MinJobAge as short as a minute (the controller keeps an ended job's record that long).
 */
const END_PATIENCE_MS = 10_000;

/** Accounting requests one cycle has under way at once. */
const ACCOUNTING_IN_FLIGHT = 2;

type Asked = { answer: AccountingAnswer } | { error: unknown };

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
  if (
    sync?.lastPollOk &&
    sync.lastPollAt !== null &&
    (deps.clock ?? systemClock).now() - sync.lastPollAt < checkEveryMs
  ) {
    return { tracked: 0, requests: 0, changed: 0, stale: false, accounting: 'not-needed' };
  }
  const ping = await deps.client.pingController({ forPolling: true, signal: deps.signal });
  await updateProfileSync(store, profile, {
    lastPollAt: (deps.clock ?? systemClock).now(),
    ...pollOutcome(ping.freshness),
    lastPollAgeSec: ping.freshness.ageSec,
    lastPollStale: ping.freshness.stale,
    // No cache lifetime from a ping: the next poll, for a job submitted meanwhile, then waits only
    // the floor interval (the ping's own pace is checkEveryMs, above), so a short job is still seen running.
    lastMaxAgeSec: null,
  });
  return { tracked: 0, requests: 1, changed: 0, stale: ping.freshness.stale, accounting: 'not-needed' };
}
