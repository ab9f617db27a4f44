import type { Queue } from 'bullmq';
import { type AuditContext, appendAudit, auditEntryOf } from '../db/audit.js';
import type { History } from '../db/history.js';
import { getRequest } from '../db/requests.js';
import type { JobRequestRow } from '../db/schema.js';
import { toError } from '../errors.js';
import { type Clock, systemClock } from '../lib/clock.js';
import { answerWithin } from '../lib/with-timeout.js';
import type { Logger } from '../logger.js';
import type { ClientRegistry } from '../sched/client-registry.js';
import { CancelFailedError } from '../sched/sched-errors.js';
import { withdrawDueAttempt } from './attempts.js';
import { isTerminalRequest } from './request-state.js';
import { transition } from './transition.js';

export interface CancelDeps {
  store: History;
  /** The `submit` queue: a request not yet submitted is cancelled by taking its job out. */
  submitQueue: Queue;
  clients: ClientRegistry;
  logger: Logger;
  /** When the cancel happens. @defaultValue systemClock */
  clock?: Clock;
}

/** Slurm's ESLURM_ALREADY_DONE: the job ended before the cancel reached it. */
const SLURM_ALREADY_DONE = 2021;
/** How soon to ask again while a submission is under way: it takes a second or two. */
const SUBMITTING_RETRY_AFTER_SEC = 2;
/** While a submission is retried with backoff after an ambiguous failure: its next attempt decides. */
const SUBMIT_RETRYING_RETRY_AFTER_SEC = 10;

export type CancelOutcome =
  /** Not submitted yet: its submit job is gone and the request is `cancelled` in the history. */
  | { kind: 'cancelled'; row: JobRequestRow }
  /** Submitted: the scheduler accepted the cancel; the poller records CANCELLED. */
  | { kind: 'requested'; row: JobRequestRow }
  /** A submission is under way (or being retried): the job may exist upstream any moment; ask again later. */
  | { kind: 'submitting'; row: JobRequestRow; retryAfterSec: number }
  /** Already in a final state here, or upstream says the job has ended (`upstream` is its message). */
  | { kind: 'ended'; row: JobRequestRow; upstream: string | null }
  | { kind: 'not_found' };

/**
 * Cancels a job request, whatever point of its life it is at.
 *
 * Before submission the request's BullMQ submit job is removed; BullMQ refuses
 * to remove a job a worker holds, which is how a cancel and a submission that
 * start together are kept apart: one of them wins, and the other sees it.
 * A request in `submitting` may already have a job upstream that the history
 * does not know yet (an ambiguous failure is retried by marker lookup), so it
 * is not cancelled locally: the caller is told to ask again.
 *
 * Scheduler errors (unreachable, refused) are thrown as they come, so the
 * caller can report the upstream's status and message.
 */
export async function cancelRequest(deps: CancelDeps, requestId: string, by: CancelBy): Promise<CancelOutcome> {
  const audit = auditOf(deps, requestId, by);
  const outcome = await cancelRequestOnce(deps, requestId, by, audit);
  switch (outcome.kind) {
    case 'not_found':
      await audit.alone(null, 'refused', 'no such request');
      break;
    case 'ended':
      await audit.alone(
        outcome.row.owner,
        'refused',
        outcome.upstream ? `already ended upstream: ${outcome.upstream}` : `already ended: ${outcome.row.state}`,
      );
      break;
    case 'submitting':
      await audit.alone(outcome.row.owner, 'refused', 'being submitted right now: ask again');
      break;
    case 'requested':
      // The scheduler took the cancel; the history changes when the poller records CANCELLED.
      await audit.alone(outcome.row.owner, 'ok', `cancel of job ${outcome.row.jobId} sent to the scheduler`);
      break;
    case 'cancelled':
      // Written in the transaction that cancelled it (below).
      break;
  }
  return outcome;
}

/** Who cancels: in words for the transition's source and detail, and for the audit log (absent: the daemon itself). */
export interface CancelBy {
  source: 'api' | 'cli' | 'pipeline';
  who: string;
  audit?: AuditContext;
}

/** The cancel's audit row: `within` a transaction that changes the history, or `alone` when nothing changed. */
interface CancelAudit {
  within(tx: History, owner: string): Promise<void>;
  alone(owner: string | null, outcome: 'ok' | 'refused' | 'failed', detail: string): Promise<void>;
}

function auditOf(deps: CancelDeps, requestId: string, by: CancelBy): CancelAudit {
  const at = () => (deps.clock ?? systemClock).now();
  const target = `request:${requestId}`;
  const action = 'request.cancel';
  const ctx = by.audit;
  return {
    async within(tx, owner) {
      if (ctx) await appendAudit(tx, auditEntryOf(ctx, { at: at(), owner, action, target, outcome: 'ok' }));
    },
    async alone(owner, outcome, detail) {
      if (!ctx) return;
      try {
        await appendAudit(deps.store, auditEntryOf(ctx, { at: at(), owner, action, target, outcome, detail }));
      } catch (error) {
        // The cancel's answer stands; the history not taking a row is logged where it is seen.
        deps.logger.error({ requestId, err: toError(error) }, 'audit row of a cancel not written');
      }
    },
  };
}

async function cancelRequestOnce(
  deps: CancelDeps,
  requestId: string,
  by: CancelBy,
  audit: CancelAudit,
): Promise<CancelOutcome> {
  const { store, logger } = deps;
  const row = await getRequest(store, requestId);
  if (!row) return { kind: 'not_found' };
  if (isTerminalRequest(row.state)) {
    // Ended, with a retry policy's next attempt waiting out its backoff: cancelling withdraws it
    // (unless the attempt is being made right now: withdrawDueAttempt decides in a transaction).
    if (
      row.retryDueAt !== null &&
      (await store.transaction(async (tx) => {
        const withdrawn = await withdrawDueAttempt(tx, row.id, by.who, (deps.clock ?? systemClock).now());
        if (withdrawn) await audit.within(tx, row.owner);
        return withdrawn;
      }))
    ) {
      return { kind: 'cancelled', row: (await getRequest(store, row.id)) ?? row };
    }
    return { kind: 'ended', row, upstream: null };
  }

  if (row.jobId !== null) {
    // submitted, pending, running, or lost: only the scheduler can end it.
    const client = deps.clients.get(row.profile);
    try {
      await client.cancel(row.jobId);
    } catch (error) {
      if (error instanceof CancelFailedError && error.slurmCode === SLURM_ALREADY_DONE) {
        return { kind: 'ended', row, upstream: error.detail.message ?? error.message };
      }
      // Failed on the way (the scheduler refused or did not answer): nothing changed here. A
      // failure of the history itself rolls the cancel back with its row, and writes none.
      await audit.alone(row.owner, 'failed', toError(error).message);
      throw error;
    }
    logger.info({ requestId, job_id: row.jobId, by: by.who }, 'cancel sent to the scheduler');
    return { kind: 'requested', row };
  }

  // A request held by a submit limit is tried again from `waiting`; one whose try was under way
  // at a crash (its attempt time kept) may have a job upstream, like one `submitting`.
  if (row.state === 'submitting' || (row.state === 'waiting' && row.submitAttemptAt !== null)) {
    const active = await inRedis(deps, async () => {
      const job = await deps.submitQueue.getJob(requestId);
      return job ? (await job.getState()) === 'active' : false;
    });
    return {
      kind: 'submitting',
      row,
      retryAfterSec: active === true ? SUBMITTING_RETRY_AFTER_SEC : SUBMIT_RETRYING_RETRY_AFTER_SEC,
    };
  }

  // accepted or queued: take the submit job out before a worker takes it.
  const taken = await inRedis(deps, async () => {
    const job = await deps.submitQueue.getJob(requestId);
    if (!job) return false;
    if ((await job.getState()) === 'active') return true;
    try {
      await job.remove();
      return false;
    } catch (error) {
      // A worker took it between the two calls: the submission won.
      logger.debug({ requestId, err: toError(error) }, 'submit job could not be removed');
      return true;
    }
  });
  // A request held by a submit limit is tried again from `waiting`, never moving to
  // `submitting`: without Redis's word that no worker holds it, it may be posting right now.
  if (row.state === 'waiting' && taken !== false) {
    return { kind: 'submitting', row, retryAfterSec: SUBMITTING_RETRY_AFTER_SEC };
  }
  // Accepted or queued, the cancelled state alone is enough, whether a worker holds its job or
  // not (it may only be re-checking a step's dependency, every few seconds) and with no job at
  // all (not added yet, lost in a crash, Redis not answering): a worker moves a request to
  // `submitting` in a commit of its own before its POST, and refuses to once it has ended. Only
  // from the state read here: a worker that moved it to `submitting` since may be posting.
  // The transition reads the state and writes it in one transaction, as the worker's move to
  // `submitting` does: of the two, one wins and the other is refused.
  // Its audit row in the same transaction: a cancel that rolls back leaves none.
  const moved = await store.transaction(async (tx) => {
    const done = await transition(tx, requestId, {
      to: 'cancelled',
      source: by.source,
      at: (deps.clock ?? systemClock).now(),
      detail: `cancelled before submission by ${by.who}`,
      from: row.state,
    });
    if (done) await audit.within(tx, row.owner);
    return done;
  });
  const after = (await getRequest(store, requestId)) ?? row;
  if (!moved) {
    // Something moved it first: report what it is now.
    if (isTerminalRequest(after.state)) return { kind: 'ended', row: after, upstream: null };
    return { kind: 'submitting', row: after, retryAfterSec: SUBMITTING_RETRY_AFTER_SEC };
  }
  logger.info({ requestId, by: by.who }, 'request cancelled before submission');
  return { kind: 'cancelled', row: after };
}

/** How long a cancel waits on Redis: the history decides, so a Redis that does not answer must not hold it up. */
const REDIS_ANSWER_MS = 1000;

/** The answer of a Redis step, or `undefined` when Redis did not give one in time (or failed it). */
async function inRedis<T>(deps: CancelDeps, op: () => Promise<T>): Promise<T | undefined> {
  try {
    const answer = await answerWithin(op(), REDIS_ANSWER_MS);
    if (answer.answered) return answer.value;
    deps.logger.warn({ waitedMs: REDIS_ANSWER_MS }, 'cancel: Redis did not answer; deciding from the history');
  } catch (error) {
    deps.logger.warn({ err: toError(error) }, 'cancel: Redis refused; deciding from the history');
  }
  return undefined;
}
