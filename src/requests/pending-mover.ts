import { getRequest, insertTransition, type MovableRequest, movableRequests, patchRequest } from '../db/requests.js';
import type { JobRequestRow, PendingMove } from '../db/schema.js';
import { systemClock } from '../lib/clock.js';
import type { Logger } from '../logger.js';
import type { SchedClient } from '../sched/client.js';
import type { JobSpec } from '../sched/job-spec.js';
import { JobNotFoundError, JobUpdateRefusedError } from '../sched/sched-errors.js';
import { type AcceptDeps, accept, recordRequest } from './accept.js';
import { attemptRequest } from './attempts.js';
import { afterMove, type MoveHow, moveDecision, moveReason, pendingMoveOf } from './pending-move.js';
import { transition } from './transition.js';

/**
 * Moving a job that waits too long (`on_pending`, src/sched/on-pending.ts). Each pipeline tick,
 * every request past its wait in its partition is moved to the next of its list:
 *
 * - by an update of its job (`POST {ctl}/job/{id}`, `partition`): the same job, the same
 *   request; the move is a transition `pending → pending` (source `move`) with its reason;
 * - where Slurm refuses the update, by cancel and submission again there: still one live job
 *   for the request. The job is held first, so it cannot start between the check and the
 *   cancel (a hold of a job that has started is refused, and then nothing is cancelled); the
 *   request's end (`cancelled`, source `move`) and its next attempt, in the new partition, are
 *   recorded in one commit, and that end sends no `job.finished`: the request goes on.
 *
 * A job that started is never moved: its state is read from the controller just before, and the
 * writes themselves guard the race with a start (Slurm refuses to move or hold a running job),
 * since a read through the proxy may be some seconds old.
 */

/** The scheduler calls a move makes. */
export type MoverScheduler = Pick<SchedClient, 'getJob' | 'updateJob' | 'cancel'>;

export interface PendingMoverDeps extends AcceptDeps {
  logger: Logger;
  /** The profile's scheduler client (throws while the profile is not connected). */
  scheduler(profile: string): MoverScheduler;
}

/** Requests looked at in one call, at most: the next tick takes the rest. */
const BATCH = 500;

/** What one pass did: requests moved (by update or resubmission) and new attempts made. */
export interface MoverOutcome {
  moved: string[];
  resubmitted: string[];
}

/** Moves every request whose wait in its partition is over. */
export async function movePendingJobs(deps: PendingMoverDeps): Promise<MoverOutcome> {
  const clock = deps.clock ?? systemClock;
  const outcome: MoverOutcome = { moved: [], resubmitted: [] };
  for (const row of await movableRequests(deps.store, BATCH)) {
    try {
      if (row.state === 'cancelled') {
        // A move by resubmission stopped after its cancel was recorded (by the poller, say).
        const next = await finishResubmission(deps, row, clock.now());
        if (next) outcome.resubmitted.push(next);
        continue;
      }
      if (row.pendingMove?.movingTo) {
        const next = await resubmit(deps, row, row.pendingMove.movingTo, null);
        if (next) outcome.resubmitted.push(next);
        continue;
      }
      const decision = moveDecision(row, clock.now());
      if (decision.kind !== 'move') continue;
      const done = await moveOne(deps, row, decision.to, decision.waitedSec);
      if (done === 'update') outcome.moved.push(row.id);
      else if (done !== null) outcome.resubmitted.push(done);
    } catch (error) {
      // Nothing recorded: the next tick looks again.
      deps.logger.warn({ requestId: row.id, err: error }, 'could not move a job that waits too long');
    }
  }
  return outcome;
}

/** Moves one job by update, or by resubmission where the update is refused. The update's 'update', a new attempt's id, or null. */
async function moveOne(
  deps: PendingMoverDeps,
  row: MovableRequest,
  to: string,
  waitedSec: number,
): Promise<'update' | string | null> {
  const jobId = row.jobId as number;
  const scheduler = deps.scheduler(row.profile);
  const job = await freshRecord(scheduler, jobId);
  if (job?.state !== 'PENDING') {
    // Started or ended meanwhile: the poller records it, and a started job is never moved.
    deps.logger.info({ requestId: row.id, jobId, state: job?.state ?? 'gone' }, 'not moved: no longer pending');
    return null;
  }
  const move = row.pendingMove as PendingMove;
  const from = job.partition || move.partition;
  const reasonOf = (how: MoveHow) => moveReason({ waitedSec, from, slurmReason: job.reason, to, how });
  try {
    await scheduler.updateJob(jobId, { partition: to });
  } catch (error) {
    if (!(error instanceof JobUpdateRefusedError)) throw error;
    deps.logger.info(
      { requestId: row.id, jobId, to, slurmCode: error.slurmCode, words: error.slurmWords },
      'Slurm refused to move the job by update: cancelling it and submitting it again there',
    );
    return resubmit(deps, row, to, { reason: reasonOf('resubmit'), refused: error.message });
  }
  const at = (deps.clock ?? systemClock).now();
  const reason = reasonOf('update');
  await deps.store.transaction(async (tx) => {
    const now = await getRequest(tx, row.id, { lock: true });
    if (!now) return;
    // Moved in Slurm whatever the history says since (the poller may have seen it start in its
    // new partition): the move is recorded, the next one counted from it.
    await insertTransition(tx, {
      requestId: row.id,
      fromState: now.state,
      toState: now.state,
      at,
      source: 'move',
      rawState: 'PENDING',
      reason,
      detail: `job ${jobId} moved from partition ${from ?? '(default)'} to ${to} by update`,
    });
    const pendingMove = now.pendingMove ? afterMove(now.pendingMove, to, at) : null;
    await patchRequest(tx, row.id, { pendingMove, updatedAt: at });
  });
  deps.logger.info({ requestId: row.id, jobId, to, reason }, 'moved a job that waited too long');
  return 'update';
}

/** The controller's record of the job now; null once it has left the controller. */
async function freshRecord(scheduler: MoverScheduler, jobId: number) {
  try {
    return (await scheduler.getJob(jobId)).data;
  } catch (error) {
    if (error instanceof JobNotFoundError) return null;
    throw error;
  }
}

/**
 * Cancels the job to submit it again in `to`, as a new attempt of the request. `first` is the
 * move's reason when it starts here; null when an earlier tick held and marked the job.
 *
 * The job is held first: a held job cannot start. Slurm holds a running job too (its hold flag
 * is set, and it runs on), so the hold alone says nothing of whether it had started; a record
 * that shows the hold (PENDING, reason JobHeldUser) was made after it, and a job pending then
 * never runs: only such a job is cancelled. A record without it is an older answer (the proxy
 * caches reads for a few seconds): the next tick reads again. No time is compared, so no clock
 * of ours or of the proxy's is trusted.
 */
async function resubmit(
  deps: PendingMoverDeps,
  row: MovableRequest,
  to: string,
  first: { reason: string; refused: string } | null,
): Promise<string | null> {
  const jobId = row.jobId as number;
  const scheduler = deps.scheduler(row.profile);
  const clock = deps.clock ?? systemClock;
  const move = row.pendingMove as PendingMove;
  if (first) {
    try {
      await scheduler.updateJob(jobId, { hold: true });
    } catch (error) {
      if (!(error instanceof JobUpdateRefusedError)) throw error;
      // Neither moved nor held: no move can be made safely, and asking each tick changes nothing.
      const note = `not moved: Slurm refused to update the job's partition (${first.refused}) and to hold it (${error.message})`;
      await patchRequest(deps.store, row.id, { pendingMove: { ...move, note }, updatedAt: clock.now() });
      deps.logger.warn({ requestId: row.id, jobId }, note);
      return null;
    }
    // Marked once held: its cancel is then the move's, and a mover that stops half-way (or reads
    // an older record below) finds the move to finish (movableRequests).
    await patchRequest(deps.store, row.id, {
      pendingMove: { ...move, movingTo: to, movingReason: first.reason },
      updatedAt: clock.now(),
    });
  }
  const job = await freshRecord(scheduler, jobId);
  if (job && job.state !== 'CANCELLED') {
    if (job.state !== 'PENDING') {
      // It started before the hold: it is never moved. Its hold is let go (a requeue would keep it).
      await scheduler.updateJob(jobId, { hold: false }).catch(() => undefined);
      await patchRequest(deps.store, row.id, {
        pendingMove: { ...move, movingTo: null, movingReason: null, note: 'not moved: it started before it could be' },
        updatedAt: clock.now(),
      });
      deps.logger.info({ requestId: row.id, jobId, state: job.state }, 'not moved: the job started first');
      return null;
    }
    if (job.reason !== 'JobHeldUser') {
      deps.logger.debug({ requestId: row.id, jobId }, 'the record read predates the hold: the next tick reads again');
      return null;
    }
    try {
      await scheduler.cancel(jobId);
    } catch (error) {
      if (!(error instanceof JobNotFoundError)) throw error;
    }
  }
  const at = clock.now();
  const reason = first?.reason ?? move.movingReason ?? `moved to ${to}`;
  const ended = await transition(deps.store, row.id, {
    to: 'cancelled',
    source: 'move',
    at,
    rawState: 'CANCELLED',
    reason,
    detail: `job ${jobId} cancelled (held first, it never started) to be submitted again in partition ${to}`,
    patch: { endedAt: at },
  });
  if (!ended) {
    // Recorded cancelled already (the poller saw the cancel first): the move goes on all the same.
    const now = await getRequest(deps.store, row.id);
    if (now?.state !== 'cancelled') return null;
  }
  return finishResubmission(deps, { ...row, state: 'cancelled' }, at, reason);
}

/** Makes the move's next attempt, in the partition it was moving to, once its job is cancelled. */
async function finishResubmission(
  deps: PendingMoverDeps,
  row: MovableRequest,
  at: number,
  reason?: string,
): Promise<string | null> {
  const full = await getRequest(deps.store, row.id);
  const move = full?.pendingMove;
  const to = move?.movingTo;
  if (!full || !move || !to || full.nextAttemptId !== null) return null;
  // The new attempt's spec is where it goes, with what is left of its list (none: no
  // on_pending), as a spec written so would be: it is checked again when it is submitted, and
  // its own partition may not be one of the list. It waits from its own submission.
  const { on_pending: onPending, ...rest } = full.spec as JobSpec;
  const left = onPending?.partitions.slice(onPending.partitions.indexOf(to) + 1) ?? [];
  const spec: JobSpec = {
    ...rest,
    partition: to,
    ...(onPending && left.length > 0 && { on_pending: { after: onPending.after, partitions: left } }),
  };
  const input = {
    ...attemptRequest(
      full,
      spec,
      {
        previousId: full.id,
        after: full.state,
        exitCode: null,
        escalated: [],
        reason: reason ?? move.movingReason ?? `moved to ${to}`,
      },
      at,
    ),
    source: 'move' as const,
    pendingMove: pendingMoveOf(spec),
  };
  const recorded = await deps.store.transaction(async (tx) => {
    const now = (await getRequest(tx, row.id, { lock: true })) as JobRequestRow;
    if (now.nextAttemptId !== null) return false;
    await recordRequest(tx, input);
    // The move is over: this attempt has nothing left to move.
    await patchRequest(tx, row.id, { nextAttemptId: input.id, pendingMove: null, updatedAt: at });
    return true;
  });
  if (!recorded) return null;
  await accept(deps, input);
  deps.logger.info(
    { requestId: input.id, previousId: row.id, partition: to, attempt: input.attempt },
    'moved a job that waited too long: submitted again in the next partition',
  );
  return input.id;
}
