import type { JobState, RunState } from './api-shapes.js';

/**
 * The states after which nothing changes (docs/http-api.md): a job request's mirror Slurm's ends
 * plus `submit_failed`; `lost` is not one (accounting may still tell how the job ended). Typed
 * by the document's enums, so a state the API renames fails to compile here.
 */
export const TERMINAL_JOB_STATES = [
  'completed',
  'failed',
  'timeout',
  'cancelled',
  'node_fail',
  'out_of_memory',
  'preempted',
  'boot_fail',
  'deadline',
  'submit_failed',
] as const satisfies readonly JobState[];

export const TERMINAL_RUN_STATES = [
  'succeeded',
  'failed',
  'cancelled',
  'skipped',
] as const satisfies readonly RunState[];

export type TerminalJobState = (typeof TERMINAL_JOB_STATES)[number];
export type TerminalRunState = (typeof TERMINAL_RUN_STATES)[number];

export function isTerminalJobState(state: JobState): state is TerminalJobState {
  return (TERMINAL_JOB_STATES as readonly string[]).includes(state);
}

export function isTerminalRunState(state: RunState): state is TerminalRunState {
  return (TERMINAL_RUN_STATES as readonly string[]).includes(state);
}
