import { type ErrorCode, isErrorCode, SchedflowError } from '../errors.js';

/**
 * Exit codes of schedflow commands, for scripts:
 * 0 success; 1 internal error; 2 usage or configuration error (fix the command,
 * the config or the file); 3 the scheduler refused or the job failed (fix the
 * request); 4 the scheduler could not be reached in time (try again later).
 */
export const EXIT = {
  ok: 0,
  internal: 1,
  usage: 2,
  refused: 3,
  unavailable: 4,
} as const;

/**
 * Codes whose fix is the caller's: the command, a file or setting, the request named (all
 * of them ConfigError once). redis-server not starting is among them: its log names the
 * setting or the port at fault.
 */
const USAGE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'SCHEDFLOW_ERR_CONFIG',
  'SCHEDFLOW_ERR_INVALID_JOB_UPDATE',
  // The daemon's API named a value the command passed on (a profile, a run parameter): fix the command.
  'SCHEDFLOW_ERR_VALIDATION',
  'SCHEDFLOW_ERR_NOT_FOUND',
  'SCHEDFLOW_ERR_NO_SUGGESTION',
  'SCHEDFLOW_ERR_PIPELINE_NOT_FOUND',
  'SCHEDFLOW_ERR_SUMMARY_PENDING',
  'SCHEDFLOW_ERR_REDIS_START',
  // Output asked for without the array's task, or with one it does not have: fix the command.
  'SCHEDFLOW_ERR_OUTPUT_TASK',
  // Refused at the door: fix the job file, or the profile's token.
  'SCHEDFLOW_ERR_ACCOUNT_MISMATCH',
  'SCHEDFLOW_ERR_ACCOUNT_NOT_ASSOCIATED',
  'SCHEDFLOW_ERR_ARRAY_TOO_LARGE',
  'SCHEDFLOW_ERR_PROFILE_SCOPE_MISSING',
  // The profile cannot work as written (its token, flavor, version or url): fix the profile.
  'SCHEDFLOW_ERR_PROFILE_UNUSABLE',
]);

/** The exit code for an error that ends a command: otherwise a retryable error may pass, anything else is a refusal. */
export function exitCodeFor(error: unknown): number {
  if (error instanceof SchedflowError) return exitCodeForCode(error.code, error.retryable);
  return EXIT.internal;
}

/** The same for an error the daemon answered with (its code and whether it may pass), as the CLI's jobs carry it back. */
export function exitCodeForCode(code: string | null, retryable: boolean): number {
  if (isErrorCode(code) && USAGE_CODES.has(code)) return EXIT.usage;
  return retryable ? EXIT.unavailable : EXIT.refused;
}
