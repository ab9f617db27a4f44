import { taskCounts } from '../db/array-tasks.js';
import type { History } from '../db/history.js';
import {
  getRequest,
  insertTransition,
  patchRequest,
  requestByJobId,
  transitionFactsOf,
  updateRequest,
} from '../db/requests.js';
import type { AttemptPolicy, JobRequestRow, RequestState, TransitionSource } from '../db/schema.js';
import { addDelivery } from '../db/webhooks.js';
import { assertNever } from '../lib/assert-never.js';
import { jobFinishedBody } from '../notify/events.js';
import { backoffMs, exhaustedReason, retryMatch } from './attempt-policy.js';
import { LOST_BY_CONTROLLER_CODE, LOST_BY_CONTROLLER_REASON } from './job-identity.js';
import type { AccountingEvidence } from './lost-evidence.js';
import { LOST_BEFORE_START_CODE, lostMessage, lostResubmitPlan } from './lost-resubmit.js';
import { canTransition, isTerminalRequest } from './request-state.js';

/**
 * The one way a request changes state: the state machine's check, the new state, its line in
 * the transition log and the outbox rows it brings (webhook deliveries), in one transaction.
 * src/db/requests.ts holds the plain queries it is made of.
 */

export interface TransitionInput {
  to: RequestState;
  source: TransitionSource;
  at: number;
  rawState?: string | null;
  reason?: string | null;
  stale?: boolean;
  detail?: string | null;
  /** Other columns to set with the move (job id, exit code, times, errors). */
  patch?: Partial<Omit<JobRequestRow, 'id' | 'state'>>;
  /**
   * Move (and patch) only from this state, the one the caller decided on: another process or
   * host may have moved it since. Nothing is written when it has.
   */
  from?: RequestState;
  /**
   * The spec's change time as the caller read it, for a move to `submitting`: refused when the
   * spec has changed since (an update before submission, src/requests/job-control.ts), so what
   * is posted is never an older spec than the history's.
   */
  specAsRead?: number | null;
  /**
   * The request goes on in a new attempt, due at this time (a job the controller lost before it
   * started, src/requests/lost-resubmit.ts): neither its retry policy nor its webhook decides on
   * this end, which is not the request's last.
   */
  resubmitAt?: number;
}

/**
 * Moves a request to a new state and records the transition, in one
 * transaction. A move the state machine does not allow (backwards, or out of a
 * terminal state) changes nothing but the patch, and returns false; one from a state the
 * request has left (`from`) changes nothing.
 */
export function transition(h: History, requestId: string, input: TransitionInput): Promise<boolean> {
  return h.transaction(async (tx) => {
    // Locked (on PostgreSQL) until the move is written: another host's move waits for it.
    const row = await transitionFactsOf(tx, requestId);
    if (!row) throw new Error(`no job request ${requestId}`);
    // Moved by another writer since the caller read it: what the caller saw is gone, and so
    // is its patch (another job's times, a stale raw state).
    if (input.from !== undefined && input.from !== row.state) return false;
    // A request held before submission is kept back (src/requests/job-control.ts): nothing is
    // sent until it is released, and a submission that read it before the hold sends nothing.
    if (input.to === 'submitting' && row.state !== 'submitting') {
      if (row.heldAt !== null) return false;
      if (input.specAsRead !== undefined && input.specAsRead !== row.specChangedAt) return false;
    }
    const moves = canTransition(row.state, input.to);
    // A job moved by its on_pending (src/requests/pending-mover.ts) is cancelled to be submitted
    // again elsewhere: that end is the move's, and the request goes on in its next attempt.
    const movesOn = Boolean(row.pendingMove?.movingTo) && input.to === 'cancelled';
    // A job that starts or ends is never moved: its pending_move goes, so the mover's partial
    // index holds only the requests it may act on.
    const settled = row.pendingMove && !movesOn && (input.to === 'running' || isTerminalRequest(input.to));
    const patch = { ...input.patch, ...(settled && { pendingMove: null }), updatedAt: input.at };
    await updateRequest(
      tx,
      requestId,
      moves
        ? {
            ...patch,
            state: input.to,
            rawState: input.rawState ?? row.rawState,
            reason: input.reason ?? null,
            // A forecast is of a pending job's start: gone once it started (or ended, or went back to waiting).
            expectedStartAt: null,
          }
        : patch,
    );
    if (!moves) return false;
    await insertTransition(tx, {
      requestId,
      fromState: row.state,
      toState: input.to,
      at: input.at,
      source: input.source,
      rawState: input.rawState ?? null,
      reason: input.reason ?? null,
      stale: input.stale ?? false,
      detail: input.detail ?? null,
    });
    if (!isTerminalRequest(input.to) || movesOn) return true;
    if (input.resubmitAt !== undefined) {
      // Made by the attempts' tick (src/requests/attempts.ts), as a policy's retry is.
      await patchRequest(tx, requestId, { retryDueAt: input.resubmitAt });
      return true;
    }
    // An end its retry policy names is not the request's end: the next attempt is due after the
    // backoff (a time in the row, so a restart keeps it), and the webhook waits for the last one.
    if (row.retryPolicy && (await scheduleRetry(tx, requestId, input.at))) return true;
    // The outbox: written in the transaction of the final state, so neither exists without the other.
    if (row.webhookUrl) await addFinishedDelivery(tx, (await getRequest(tx, requestId)) as JobRequestRow, input.at);
    return true;
  });
}

/**
 * After an attempt's end: when its policy retries it, the next attempt's due time (true);
 * when the policy named the end but its limit is reached, the note saying so (false).
 */
async function scheduleRetry(tx: History, requestId: string, at: number): Promise<boolean> {
  const after = (await getRequest(tx, requestId)) as JobRequestRow;
  const policy = after.retryPolicy as AttemptPolicy;
  const end = { state: after.state, exitCode: after.exitCode, attempt: after.attempt };
  const match = retryMatch(policy, end);
  switch (match) {
    case 'yes': {
      // An array some of whose tasks were cancelled (the request by schedflow, or tasks by
      // scancel) ends here: a retry would run again tasks beside ones a person stopped.
      const cancelled = after.arrayTaskCount === null ? 0 : ((await taskCounts(tx, requestId)).cancelled ?? 0);
      if (cancelled > 0) {
        await patchRequest(tx, requestId, { retryNote: cancelledTasksNote(cancelled) });
        return false;
      }
      await patchRequest(tx, requestId, { retryDueAt: at + backoffMs(policy, after.attempt) });
      return true;
    }
    case 'exhausted':
      await patchRequest(tx, requestId, { retryNote: exhaustedReason(policy, end) });
      return false;
    case 'no':
      return false;
    default:
      return assertNever(match);
  }
}

/**
 * Records what the scheduler says of an ended request (its exit code, times), and, when that
 * brings the exit code its end was recorded without, decides its retry then. An end can be
 * recorded from the light state listing alone, when no full record of the job is at hand (it
 * has left the controller while accounting lags, or the controller's listing at hand does not
 * have it). A policy that lists exit codes answered "no retry" to the unknown code, and the
 * code accounting gave a moment later was never asked about. The job.finished webhook has gone
 * out by then; a retry made now still beats a listed exit code left unretried.
 */
export async function patchEnded(
  h: History,
  requestId: string,
  patch: Partial<Omit<JobRequestRow, 'id' | 'state'>>,
  at: number,
): Promise<void> {
  await h.transaction(async (tx) => {
    const before = await getRequest(tx, requestId, { lock: true });
    await patchRequest(tx, requestId, patch);
    const undecided =
      before !== undefined &&
      before.retryPolicy !== null &&
      before.exitCode === null &&
      patch.exitCode != null &&
      isTerminalRequest(before.state) &&
      before.retryDueAt === null &&
      before.nextAttemptId === null &&
      before.retryNote === null;
    if (undecided) await scheduleRetry(tx, requestId, at);
  });
}

function cancelledTasksNote(cancelled: number): string {
  const tasks = cancelled === 1 ? '1 task was' : `${cancelled} tasks were`;
  return `${tasks} cancelled: an array with cancelled tasks is not retried by its policy (a cancel is never undone); its failed tasks can be run again by hand (schedflow jobs retry-tasks)`;
}

/** `job.finished` of a request's last attempt, in the outbox (the caller's transaction). */
export async function addFinishedDelivery(tx: History, row: JobRequestRow, at: number): Promise<void> {
  if (!row.webhookUrl) return;
  await addDelivery(tx, {
    event: 'job.finished',
    url: row.webhookUrl,
    requestId: row.id,
    runId: row.runId,
    payload: jobFinishedBody(row),
    at,
  });
}

/**
 * Ends a request whose job the controller lost (slurmctld back from a crash without it, its id
 * given to another job, or gone from the controller and from accounting): `node_fail` with
 * reason JobLostByController and the job id in its message, and its claim on the id released
 * (job_id null) for the job that has the id now. A job that never started is submitted again as
 * a new attempt, within `resubmits` per request, and only when accounting, asked directly,
 * answered (src/requests/lost-resubmit.ts); the message says which. A request already ended only lets the id go. True when the request moved.
 */
export function endLostByController(
  h: History,
  requestId: string,
  input: {
    at: number;
    source: TransitionSource;
    why: string;
    /** SCHEDFLOW_LOST_RESUBMITS: how many times a request is submitted again after such a loss. */
    resubmits: number;
    /** Accounting's direct answer for the job id (lost-evidence.ts); `unknown` never resubmits. */
    accounting: AccountingEvidence;
  },
): Promise<boolean> {
  return h.transaction(async (tx) => {
    const row = await getRequest(tx, requestId, { lock: true });
    if (!row || row.jobId === null) return false;
    if (isTerminalRequest(row.state)) {
      await patchRequest(tx, requestId, { jobId: null, updatedAt: input.at });
      return false;
    }
    const plan = await lostResubmitPlan(tx, row, input.resubmits, input.accounting);
    const message = lostMessage(row.jobId, input.why, plan);
    const again = plan.kind === 'resubmit';
    return transition(tx, requestId, {
      to: 'node_fail',
      source: input.source,
      at: input.at,
      reason: LOST_BY_CONTROLLER_REASON,
      detail: message,
      from: row.state,
      ...(again && { resubmitAt: input.at }),
      patch: {
        jobId: null,
        endedAt: input.at,
        missingSince: null,
        errorCode: again ? LOST_BEFORE_START_CODE : LOST_BY_CONTROLLER_CODE,
        errorMessage: message,
      },
    });
  });
}

/**
 * Makes `jobId` recordable for `requestId`, whose job it is now (slurmctld's answer to its
 * submission, or found by its marker): another request still holding the id had its job lost by
 * the controller, which then gave the id again, and is ended so (see endLostByController).
 */
export async function claimJobId(
  h: History,
  input: {
    profile: string;
    jobId: number;
    requestId: string;
    at: number;
    source: TransitionSource;
    /** SCHEDFLOW_LOST_RESUBMITS (see endLostByController). */
    lostResubmits: number;
    /** Accounting's direct answer for `jobId`, asked before the commit when another request held it (lost-evidence.ts). */
    accounting: AccountingEvidence;
  },
): Promise<void> {
  const holder = await requestByJobId(h, input.profile, input.jobId);
  if (!holder || holder.id === input.requestId) return;
  await endLostByController(h, holder.id, {
    at: input.at,
    source: input.source,
    why: `slurmctld has since given job id ${input.jobId} to request ${input.requestId}'s job`,
    resubmits: input.lostResubmits,
    accounting: input.accounting,
  });
}
