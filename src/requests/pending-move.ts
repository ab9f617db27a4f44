import type { PendingMove } from '../db/schema.js';
import { formatDuration } from '../lib/duration.js';
import type { JobSpec } from '../sched/job-spec.js';

export type { PendingMove } from '../db/schema.js';

/**
 * The arithmetic of `on_pending` (src/sched/on-pending.ts), pure: what a new request follows,
 * when its job is due to move and where to. The moves themselves are src/requests/pending-mover.ts's.
 */

/** A new request's move, from its spec: none made yet, waiting since its submission. Null without on_pending. */
export function pendingMoveOf(spec: Pick<JobSpec, 'on_pending' | 'partition'> | null | undefined): PendingMove | null {
  const onPending = spec?.on_pending;
  if (!onPending) return null;
  return {
    afterSec: onPending.after,
    partitions: [...onPending.partitions],
    next: 0,
    partition: spec.partition ?? null,
    since: null,
  };
}

/** What the mover does with a request now. */
export type MoveDecision =
  /** Not yet: it may wait until `dueAt`. */
  | { kind: 'wait'; dueAt: number }
  /** Past its wait: to `to`, having waited `waitedSec` where it is. */
  | { kind: 'move'; to: string; waitedSec: number }
  /** Nothing left to do: every partition tried, or not waiting in the scheduler. */
  | { kind: 'none' };

/** Where a request waits and since when, as the history has it. */
export interface WaitingRequest {
  state: string;
  jobId: number | null;
  startedAt: number | null;
  submittedAt: number | null;
  pendingMove: PendingMove | null;
}

/**
 * Whether the request's job is due to move at `nowMs`. Counted from its submission, or from its
 * last move: each partition gets the whole `after`. Only a job the scheduler has (a job id) and
 * that never started is moved; a request not yet submitted has nothing to move.
 */
export function moveDecision(request: WaitingRequest, nowMs: number): MoveDecision {
  const move = request.pendingMove;
  if (!move || move.note || move.next >= move.partitions.length) return { kind: 'none' };
  if (request.state !== 'submitted' && request.state !== 'pending') return { kind: 'none' };
  if (request.jobId === null || request.startedAt !== null) return { kind: 'none' };
  const since = move.since ?? request.submittedAt;
  if (since === null) return { kind: 'none' };
  const dueAt = since + move.afterSec * 1000;
  if (nowMs < dueAt) return { kind: 'wait', dueAt };
  return { kind: 'move', to: move.partitions[move.next] as string, waitedSec: (nowMs - since) / 1000 };
}

/** The move done: the next partition ahead, and the wait counted from now. */
export function afterMove(move: PendingMove, to: string, atMs: number): PendingMove {
  return { ...move, next: move.next + 1, partition: to, since: atMs, movingTo: null, movingReason: null };
}

/** How a move was made. */
export type MoveHow = 'update' | 'resubmit';

/**
 * The transition's reason, in words: `waited 30m in b (Resources); moved to c`. The wait as it
 * was, in whole seconds below two minutes and whole minutes above (the mover looks every few
 * seconds: `30m`, not `30m2s`).
 */
export function moveReason(input: {
  waitedSec: number;
  from: string | null;
  slurmReason: string | null;
  to: string;
  how: MoveHow;
}): string {
  const where = input.from ?? 'its partition';
  const why = input.slurmReason ? ` (${input.slurmReason})` : '';
  const how = input.how === 'resubmit' ? ' (Slurm refused the update: cancelled and submitted again there)' : '';
  const waited = input.waitedSec < 120 ? Math.round(input.waitedSec) : Math.round(input.waitedSec / 60) * 60;
  return `waited ${formatDuration(waited)} in ${where}${why}; moved to ${input.to}${how}`;
}
