import { type RequestState, TERMINAL_REQUEST_STATES } from '../db/schema.js';
import { assertNever } from '../lib/assert-never.js';
import type { JobState } from '../sched/job-model.js';

const TERMINAL: ReadonlySet<RequestState> = new Set(TERMINAL_REQUEST_STATES);

/** Terminal: nothing will change it. `lost` is not: accounting may still resolve it. */
export function isTerminalRequest(state: RequestState): boolean {
  return TERMINAL.has(state);
}

/**
 * Ended without completing, or lost: a request someone may submit again, as a new request with
 * the same spec (the web UI's Retry). From the states' own lists, so a new state is decided here.
 */
export function mayResubmit(state: RequestState): boolean {
  return state === 'lost' || (isTerminalRequest(state) && state !== 'completed');
}

/** Order of the non-terminal states, so an old (stale, reordered) answer never moves a request back. */
const RANK: Record<RequestState, number> = {
  accepted: 0,
  queued: 1,
  waiting: 1.5,
  submitting: 2,
  submitted: 3,
  pending: 4,
  running: 5,
  lost: 6,
  completed: 7,
  failed: 7,
  timeout: 7,
  cancelled: 7,
  node_fail: 7,
  out_of_memory: 7,
  preempted: 7,
  boot_fail: 7,
  deadline: 7,
  submit_failed: 7,
};

/**
 * Whether a request may move from one state to another. Terminal states are
 * final; a lost job may be found again (in any state); otherwise only forward.
 */
export function canTransition(from: RequestState, to: RequestState): boolean {
  if (from === to) return false;
  if (isTerminalRequest(from)) return false;
  if (from === 'lost') return to !== 'lost';
  // Slurm can requeue a running job (PENDING again): allow running → pending.
  // A submission refused over a submit limit waits, and is tried again.
  if (from === 'submitting' && to === 'waiting') return true;
  if (from === 'running' && to === 'pending') return true;
  return RANK[to] > RANK[from];
}

/** The request state for Slurm's base job state; null when this build does not know the state. */
export function requestStateFor(state: JobState): RequestState | null {
  switch (state) {
    case 'PENDING':
      return 'pending';
    case 'RUNNING':
    case 'SUSPENDED':
      return 'running';
    case 'COMPLETED':
      return 'completed';
    case 'FAILED':
      return 'failed';
    case 'TIMEOUT':
      return 'timeout';
    case 'CANCELLED':
      return 'cancelled';
    case 'NODE_FAIL':
      return 'node_fail';
    case 'OUT_OF_MEMORY':
      return 'out_of_memory';
    case 'PREEMPTED':
      return 'preempted';
    case 'BOOT_FAIL':
      return 'boot_fail';
    case 'DEADLINE':
      return 'deadline';
    case 'UNKNOWN':
      return null;
    default:
      return assertNever(state);
  }
}
