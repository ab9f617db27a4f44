/**
 * schedflow's error base. Every error a user can meet has a stable code
 * (`SCHEDFLOW_ERR_…`), says whether trying again can help, and carries the
 * upstream's status and message as data rather than only inside the text.
 */
export abstract class SchedflowError extends Error {
  abstract readonly code: string;
  /** True when the same operation may succeed later (outage, rate limit, timeout). */
  abstract readonly retryable: boolean;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A mistake in configuration or input: fix it and run again. Never retried. */
export class ConfigError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_CONFIG';
  readonly retryable = false;
}

/**
 * A job spec no scheduler will take (an unknown member, a value out of range or of the wrong
 * type): the request fails at once, never retried, with the member and the reason.
 */
export class InvalidJobSpecError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_INVALID_SPEC';
  readonly retryable = false;
}

/** The daemon's Redis did not answer: nothing was queued; the same call may work once it is back. */
export class RedisUnavailableError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_REDIS_UNAVAILABLE';
  readonly retryable = true;
}

/** Wraps a thrown non-Error once, so everything downstream handles Errors only. */
export function toError(value: unknown): Error {
  if (value instanceof Error) return value;
  return new Error(typeof value === 'string' ? value : JSON.stringify(value), { cause: value });
}
