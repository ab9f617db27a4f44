import { SchedflowError, type UpstreamDetail, UpstreamError } from '../errors.js';

/** What the scheduler said: HTTP status, its message, and Slurm's errors[] when present. */
export interface SchedUpstreamDetail extends UpstreamDetail {
  slurmErrors: SlurmErrorEntry[];
}

/** One element of a slurmrestd `errors[]` array. */
export interface SlurmErrorEntry {
  error_number: number | null;
  error: string | null;
  description: string | null;
  source: string | null;
}

/** Any failure talking to the scheduler API: an {@link UpstreamError} whose detail holds Slurm's errors[]. */
export abstract class SchedApiError extends UpstreamError<SchedUpstreamDetail> {
  readonly upstream = 'scheduler';
}

/** 400: the API version in the path is not served. Pin a supported one. */
export class UnsupportedVersionError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_UNSUPPORTED_VERSION';
}

/** Another 4xx the request caused (bad query, malformed body, 404 on a path). */
export class BadRequestError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_BAD_REQUEST';
}

/** 404 for a job the controller does not (or no longer) know. */
export class JobNotFoundError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_JOB_NOT_FOUND';
}

/** 401: the credential was refused (expired, malformed, unknown). */
export class AuthenticationError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_UNAUTHORIZED';
}

/** 403: the token lacks a scope, or the request targets an account other than the token's. */
export class ForbiddenError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_FORBIDDEN';
  constructor(
    message: string,
    detail: SchedUpstreamDetail,
    /** Which rule was hit, as far as the upstream message tells. */
    readonly reason: 'scope' | 'account' | 'unknown',
  ) {
    super(message, detail);
  }
}

/** 429: too many requests from this address. Back off; `retryAfterMs` is the upstream's hint. */
export class RateLimitedError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_RATE_LIMITED';
}

/** 5xx without a Slurm error: the scheduler is unreachable or the proxy failed. Try again later. */
export class UpstreamUnavailableError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_UNAVAILABLE';
}

/**
 * Slurm refused the request (a 500 carrying `errors[].error_number`, e.g. 2045 for
 * an account/partition combination): the same request will be refused again.
 */
export class SlurmRefusedError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_SLURM_REFUSED';

  get errorNumber(): number | null {
    return this.detail.slurmErrors[0]?.error_number ?? null;
  }
}

/**
 * Slurm error 2050 (ESLURM_ACCOUNTING_POLICY): the submission is over an association's or
 * QOS's limit (MaxSubmitJobs, …). Not a bad job: the same submission succeeds once other
 * jobs of the user end. The client does not retry it; the submit queue holds the request.
 */
export class SubmitLimitError extends SchedApiError {
  static readonly CODE = 'SCHEDFLOW_ERR_SCHED_SUBMIT_LIMIT';
  readonly code = SubmitLimitError.CODE;
}

/** A cancel answered 200 whose `status[]` holds an error (2017 unknown job, 2021 already done). */
export class CancelFailedError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_CANCEL_FAILED';
  constructor(
    message: string,
    detail: SchedUpstreamDetail,
    readonly slurmCode: number | null,
  ) {
    super(message, detail);
  }
}

/**
 * Slurm refused a job update (`POST {ctl}/job/{id}`: a 500 with `errors[]`, e.g. 2073 "Job is
 * no longer pending execution" for a running job's partition, 2002 "Access/permission denied"
 * for a time limit a user may not set), or schedflow refused it at the door with the words
 * Slurm would have used. Sending it again changes nothing.
 */
export class JobUpdateRefusedError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_UPDATE_REFUSED';
  constructor(
    message: string,
    detail: SchedUpstreamDetail,
    /** Slurm's error number (2073, 2002, 2051, …); null when it gave none. */
    readonly slurmCode: number | null,
    /** Slurm's words for it ("Job is no longer pending execution"). */
    readonly slurmWords: string | null,
    options?: { cause?: unknown },
  ) {
    super(message, detail, options);
  }
}

/** No answer: connection refused or reset, DNS failure. */
export class NetworkError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_NETWORK';
}

/** No answer in time (connect, headers or body timeout). */
export class RequestTimeoutError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_TIMEOUT';
}

/**
 * The profile's request budget shared in Redis did not answer in time: the request was not
 * sent (it never left this process), so it may be sent again like a 429.
 */
export class BudgetUnavailableError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_BUDGET_UNAVAILABLE';
}

/** The answer was not what the API documents (not JSON, a required member missing). */
export class UnexpectedResponseError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_UNEXPECTED_RESPONSE';
}

/**
 * After an interrupted submission, more than one job could be the request's and nothing tells
 * which (accounting without comments): schedflow will not submit again, nor guess.
 */
export class AmbiguousJobError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_AMBIGUOUS_JOB';
}

/**
 * The scheduler serves no accounting endpoints (slurmrestd answers 404 for `/slurmdb/...`: a
 * cluster without slurmdbd). Jobs are followed from the controller alone; nothing to retry.
 */
export class AccountingNotServedError extends SchedApiError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_NO_ACCOUNTING';
}

/** MUNGE credentials cannot be made here (munge missing, munged not running). */
export class MungeError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_SCHED_MUNGE';
}
