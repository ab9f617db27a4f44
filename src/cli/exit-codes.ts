import { ConfigError, SchedflowError } from '../errors.js';
import { SourceError } from '../lib/yaml-source.js';
import { StateDirLockedError } from '../sim/job-store.js';
import { SimConfigError } from '../sim/sim-config.js';

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

/** The exit code for an error that ends a command. */
export function exitCodeFor(error: unknown): number {
  if (
    error instanceof SourceError ||
    error instanceof ConfigError ||
    error instanceof SimConfigError ||
    error instanceof StateDirLockedError
  ) {
    return EXIT.usage;
  }
  if (error instanceof SchedflowError) return error.retryable ? EXIT.unavailable : EXIT.refused;
  return EXIT.internal;
}
