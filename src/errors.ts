/**
 * schedflow's error registry: every code schedflow can emit, as data. Each says which HTTP
 * status the local API answers with, whether trying again can help, and what to do. Error
 * classes take their `retryable` from here, the API its status, and docs/errors.md is
 * generated from it (`npm run docs:errors`), so none of them can drift from the others.
 */
export interface ErrorSpec {
  /**
   * The local API's status for it. For a scheduler error this is the status of the
   * `SCHEDFLOW_ERR_UPSTREAM` answer that carries it in `upstream.code`; null for a code
   * only recorded (a summary's or a request's error) or logged, never an answer of its own.
   */
  readonly status: number | null;
  /** True when the same operation may succeed later (outage, rate limit, timeout). */
  readonly retryable: boolean;
  /** What to do about it, in one line. */
  readonly what: string;
  /**
   * For a code whose retryability is the upstream's (`SCHEDFLOW_ERR_UPSTREAM`): the status
   * when the upstream could not be reached, which is retryable; `status` is its refusal's.
   */
  readonly unreachableStatus?: number;
}

/** Every code, grouped as the modules that emit them. Keep the `SCHEDFLOW_ERR_` prefix. */
export const ERROR_CODES = {
  // Configuration and input.
  SCHEDFLOW_ERR_CONFIG: {
    status: 400,
    retryable: false,
    what: 'Fix the setting, file or argument the message names, then run again.',
  },
  SCHEDFLOW_ERR_INVALID_SPEC: {
    status: 400,
    retryable: false,
    what: 'Fix the job spec member the message names (unknown, out of range or of the wrong type).',
  },
  SCHEDFLOW_ERR_INVALID_JOB_UPDATE: {
    status: 400,
    retryable: false,
    what: 'Fix the job id or the field the message names (a time limit in whole minutes, a non-empty name, at least one change).',
  },
  SCHEDFLOW_ERR_REDIS_UNAVAILABLE: {
    status: 503,
    retryable: true,
    what: "The daemon's Redis did not answer and nothing was queued; try again once it is back.",
  },
  SCHEDFLOW_ERR_HISTORY_UNAVAILABLE: {
    status: null,
    retryable: true,
    what: 'The PostgreSQL history (DATABASE_URL) could not be reached or refused the login at start: check the server, the URL and the role, then start again.',
  },
  SCHEDFLOW_ERR_HISTORY_NEWER: {
    status: null,
    retryable: false,
    what: 'The history was migrated by a newer schedflow: run that release on it, or restore the backup taken before the upgrade and start this one (docs/operations.md, "Rolling back").',
  },
  SCHEDFLOW_ERR_REDIS_START: {
    status: null,
    retryable: false,
    what: 'The private redis-server did not start: read redis.log in the data dir (port in use, disk full, permissions).',
  },

  SCHEDFLOW_ERR_ACCOUNT_MISMATCH: {
    status: 422,
    retryable: false,
    what: 'The job names an account the profile’s token is not bound to: leave `account` out, use the profile’s, or use another profile.',
  },
  SCHEDFLOW_ERR_ACCOUNT_NOT_ASSOCIATED: {
    status: 422,
    retryable: false,
    what: 'On plain slurmrestd, the job (or the profile, by default) charges an account the Slurm user has no association with, and Slurm would refuse it (2045): use one the message lists, or ask the Slurm admins for an association (`sacctmgr add user <name> account=<account>`).',
  },
  SCHEDFLOW_ERR_ARRAY_TOO_LARGE: {
    status: 422,
    retryable: false,
    what: 'The job array names an index at or over the profile’s `maxArraySize` (the cluster’s MaxArraySize; 1001 by default), which Slurm refuses (2081): submit several smaller arrays, or raise `maxArraySize` if the cluster allows more.',
  },
  SCHEDFLOW_ERR_PROFILE_SCOPE_MISSING: {
    status: 422,
    retryable: false,
    what: 'The profile’s token lacks a scope submitting needs (`sched:jobs:manage`, `scheddb:read`): ask the operator for one that has it, or use another profile.',
  },
  SCHEDFLOW_ERR_PROFILE_UNUSABLE: {
    status: 422,
    retryable: false,
    what: 'The profile cannot work as written: its credential was refused (401/403), its `flavor` is not what answers at its `url`, it names an API version the scheduler does not serve, or no scheduler API answers there. The message says which and what to change; `schedflow sched --profile <name> check` checks it again.',
  },

  // The local API.
  SCHEDFLOW_ERR_VALIDATION: {
    status: 400,
    retryable: false,
    what: 'Fix the request: `fields` names each field that does not match the route’s schema.',
  },
  SCHEDFLOW_ERR_BAD_REQUEST: {
    status: 400,
    retryable: false,
    what: 'Fix the request as the message says (a body shorter than its Content-Length, …).',
  },
  SCHEDFLOW_ERR_BAD_URL: {
    status: 400,
    retryable: false,
    what: 'Percent-encode the path: a % must start an encoded UTF-8 byte such as %2F.',
  },
  SCHEDFLOW_ERR_MALFORMED_REQUEST: {
    status: 400,
    retryable: false,
    what: 'Send valid HTTP/1.1; the connection is closed after this answer.',
  },
  SCHEDFLOW_ERR_UNAUTHORIZED: {
    status: 401,
    retryable: false,
    what: 'Send a live API token as `Authorization: Bearer <token>` (see `schedflow tokens`).',
  },
  SCHEDFLOW_ERR_FORBIDDEN: {
    status: 403,
    retryable: false,
    what: 'Use a token with the scope the route needs, or ask for one.',
  },
  SCHEDFLOW_ERR_NOT_FOUND: {
    status: 404,
    retryable: false,
    what: 'Check the path or the id: no route, job request or run has it.',
  },
  SCHEDFLOW_ERR_PIPELINE_NOT_FOUND: {
    status: 404,
    retryable: false,
    what: 'Check the pipeline’s name against `GET /api/v1/pipelines` (or `schedflow pipelines list`).',
  },
  SCHEDFLOW_ERR_METHOD_NOT_ALLOWED: {
    status: 405,
    retryable: false,
    what: 'Use one of the methods the `Allow` header lists.',
  },
  SCHEDFLOW_ERR_REQUEST_TIMEOUT: {
    status: 408,
    retryable: true,
    what: 'The request did not arrive in time; send it again.',
  },
  SCHEDFLOW_ERR_IDEMPOTENCY_KEY_REUSED: {
    status: 409,
    retryable: false,
    what: 'Use a new Idempotency-Key for each request; this one was used for another.',
  },
  SCHEDFLOW_ERR_IDEMPOTENCY_KEY_IN_USE: {
    status: 409,
    retryable: true,
    what: 'A request with this Idempotency-Key is still being answered; retry after Retry-After.',
  },
  SCHEDFLOW_ERR_JOB_ENDED: {
    status: 409,
    retryable: false,
    what: 'The job has already ended: nothing to cancel, hold, release or update (`state` says how it ended).',
  },
  SCHEDFLOW_ERR_JOB_SUBMITTING: {
    status: 409,
    retryable: true,
    what: 'The request is being submitted right now; cancel (hold, release, update) again after Retry-After.',
  },
  SCHEDFLOW_ERR_RUN_ENDED: {
    status: 409,
    retryable: false,
    what: 'The run has already ended (`state` says how): nothing to cancel.',
  },
  SCHEDFLOW_ERR_RUN_NOT_RESUMABLE: {
    status: 409,
    retryable: false,
    what: 'The run cannot be resumed (`state` says why): it is still queued or running (resumed already, or by another host just now), it succeeded, it was skipped (nothing ran: trigger the pipeline), or its steps have been pruned from the history.',
  },
  SCHEDFLOW_ERR_NO_SUGGESTION: {
    status: 409,
    retryable: false,
    what: 'Nothing to apply: the request has no summary, no suggestion, or is a pipeline step (change the pipeline file).',
  },
  SCHEDFLOW_ERR_SUMMARY_PENDING: {
    status: 409,
    retryable: true,
    what: 'The summary is still being written; apply its suggestion once it is ready.',
  },
  SCHEDFLOW_ERR_OUTPUT_NOT_YET: {
    status: 409,
    retryable: true,
    what: 'The job has not written this output yet (not submitted, not started, or its path is not known yet); ask again once it runs.',
  },
  SCHEDFLOW_ERR_OUTPUT_NOT_FOUND: {
    status: 404,
    retryable: false,
    what: 'The output file is not on the daemon’s host (`path` and `host` say what was tried): read it on the node the job ran on, or write output to a shared file system.',
  },
  SCHEDFLOW_ERR_OUTPUT_UNREADABLE: {
    status: 403,
    retryable: false,
    what: 'The daemon does not read the output file for you: its permissions, a path inside schedflow’s own folders or through a symbolic link, not a regular file, or not the job’s user’s; `reason` says which.',
  },
  SCHEDFLOW_ERR_STEP_OUTPUTS_UNREADABLE: {
    status: null,
    retryable: false,
    what: 'A pipeline step uses another step’s outputs, whose file the daemon could not read (not visible on its host, or not trusted): the step is not submitted. Put the working directory on a file system the daemon’s host mounts too.',
  },
  SCHEDFLOW_ERR_STEP_OUTPUT_MISSING: {
    status: null,
    retryable: false,
    what: 'A pipeline step uses an output another step did not write to `$SCHEDFLOW_OUTPUTS`, or one that does not fit (an `array:` that is no count or index list): the step is not submitted. The message says what was written.',
  },
  SCHEDFLOW_ERR_OUTPUT_TASK: {
    status: 400,
    retryable: false,
    what: 'Each task of an array job writes its own output: name one of its task indexes (`task=N`, `--task N`); a job that is not an array has no tasks to name.',
  },
  SCHEDFLOW_ERR_NO_TASKS_TO_RETRY: {
    status: 409,
    retryable: false,
    what: 'Nothing to retry: the request is not an array job, no task of it failed, or an index named is not one of its tasks.',
  },
  SCHEDFLOW_ERR_JOB_CONTROL_REFUSED: {
    status: 409,
    retryable: false,
    what: "Slurm refused a hold, release or update because of the job's state (it is running, or ending): the message is Slurm's, with its error number; nothing changed.",
  },
  SCHEDFLOW_ERR_JOB_UPDATE_INVALID: {
    status: 422,
    retryable: false,
    what: "The change cannot be made to this job: Slurm refused its value (a time limit above the partition's MaxTime, a partition or QOS the job may not use), or the spec it would make before submission is not valid; the message says which, in Slurm's words where Slurm said it.",
  },
  SCHEDFLOW_ERR_TASKS_NOT_IN_ARRAY: {
    status: 409,
    retryable: false,
    what: "Tasks were named (`indexes`, `--indexes`) of a request that is not an array job, not submitted yet, outside its indexes, or still in the array's pending record without a job id of their own (slurmrestd updates those only through the array's id): act on the array whole.",
  },
  SCHEDFLOW_ERR_PIPELINE_NOT_SCHEDULED: {
    status: 409,
    retryable: false,
    what: 'The pipeline has no schedule to pause or resume; it runs only when triggered.',
  },
  SCHEDFLOW_ERR_PROFILE_NOT_ALLOWED: {
    status: 403,
    retryable: false,
    what: 'The token is bound to other scheduler profiles (`schedflow tokens create|update --profiles`): name one the message lists (`allowed_profiles`), or ask the operator to allow this one. Nothing was recorded.',
  },
  SCHEDFLOW_ERR_BODY_TOO_LARGE: {
    status: 413,
    retryable: false,
    what: 'Send a body under 1 MiB.',
  },
  SCHEDFLOW_ERR_URI_TOO_LONG: {
    status: 414,
    retryable: false,
    what: 'Shorten the path: no id or name of the API is that long.',
  },
  SCHEDFLOW_ERR_UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    retryable: false,
    what: 'Send the body as JSON with `Content-Type: application/json`.',
  },
  SCHEDFLOW_ERR_RATE_LIMITED: {
    status: 429,
    retryable: true,
    what: 'The requests per minute of the token (of the web UI session) are spent; retry after Retry-After.',
  },
  SCHEDFLOW_ERR_QUOTA_IN_FLIGHT: {
    status: 429,
    retryable: true,
    what: 'The token has as many requests not yet ended as its `--max-in-flight` allows (lost ones count): nothing was recorded; retry after Retry-After, once some have ended, or ask the operator to raise it (`schedflow tokens update <name> --max-in-flight N`).',
  },
  SCHEDFLOW_ERR_QUOTA_PER_DAY: {
    status: 429,
    retryable: true,
    what: 'The token has had as many requests accepted in the last 24 hours as its `--max-per-day` allows: nothing was recorded; retry after Retry-After, when the oldest of them leaves the window, or ask the operator to raise it.',
  },
  SCHEDFLOW_ERR_HEADERS_TOO_LARGE: {
    status: 431,
    retryable: false,
    what: 'Keep the request line and headers under 16 KiB.',
  },
  SCHEDFLOW_ERR_INTERNAL: {
    status: 500,
    retryable: false,
    what: 'A bug or an outage inside the daemon: its log has the details under the answer’s `request_id`.',
  },
  SCHEDFLOW_ERR_UPSTREAM: {
    status: 502,
    unreachableStatus: 503,
    retryable: false,
    what: 'The scheduler refused (502: fix what `upstream` says) or could not be reached (503: retry later).',
  },
  SCHEDFLOW_ERR_UNAVAILABLE: {
    status: 503,
    retryable: true,
    what: 'A part of the daemon the route needs is not ready (pipelines not loaded); retry shortly.',
  },
  SCHEDFLOW_ERR_CLUSTER_VIEW_UNAVAILABLE: {
    status: 503,
    retryable: true,
    what: 'The cluster view (partitions, nodes, reservations, queue) could not be read from the scheduler and no earlier answer is kept: the message says what the scheduler answered (a missing `sched:read` scope, an outage); retry once it is fixed.',
  },
  SCHEDFLOW_ERR_PROFILE_NOT_CONNECTED: {
    status: 503,
    retryable: true,
    what: 'The profile’s scheduler has not answered since the daemon started (the message names the address tried): a new request is refused, nothing queued; one queued before waits and goes once it answers. Check the profile’s `url` and that the scheduler runs there, then retry.',
  },

  // The scheduler (answered by the API as SCHEDFLOW_ERR_UPSTREAM, this code in `upstream.code`).
  SCHEDFLOW_ERR_SCHED_UNSUPPORTED_VERSION: {
    status: 502,
    retryable: false,
    what: 'Pin an API version the scheduler serves in the profile.',
  },
  SCHEDFLOW_ERR_SCHED_BAD_REQUEST: {
    status: 502,
    retryable: false,
    what: 'The scheduler refused the request (a bad query or body, an unknown path); read its message.',
  },
  SCHEDFLOW_ERR_SCHED_JOB_NOT_FOUND: {
    status: 502,
    retryable: false,
    what: 'The controller does not (or no longer) know the job.',
  },
  SCHEDFLOW_ERR_SCHED_UNAUTHORIZED: {
    status: 502,
    retryable: false,
    what: 'The credential was refused: renew the profile’s token (JWT) or check MUNGE.',
  },
  SCHEDFLOW_ERR_SCHED_FORBIDDEN: {
    status: 502,
    retryable: false,
    what: 'The token lacks a scope, or is bound to another account: ask the operator.',
  },
  SCHEDFLOW_ERR_SCHED_RATE_LIMITED: {
    status: 503,
    retryable: true,
    what: 'The scheduler proxy rate-limits this address; schedflow backs off and retries.',
  },
  SCHEDFLOW_ERR_SCHED_UNAVAILABLE: {
    status: 503,
    retryable: true,
    what: 'The scheduler or its proxy is down or cannot reach slurmctld; schedflow retries.',
  },
  SCHEDFLOW_ERR_SCHED_NETWORK: {
    status: 503,
    retryable: true,
    what: 'No connection to the scheduler (refused, reset, DNS); check the profile’s URL and the network.',
  },
  SCHEDFLOW_ERR_SCHED_BUDGET_UNAVAILABLE: {
    status: 503,
    retryable: true,
    what: 'The profile’s request budget, kept in Redis for every process of the deployment, did not answer (Redis down or stalled): the request was not sent, and schedflow retries once Redis answers.',
  },
  SCHEDFLOW_ERR_SCHED_TIMEOUT: {
    status: 503,
    retryable: true,
    what: 'The scheduler did not answer in time; schedflow retries.',
  },
  SCHEDFLOW_ERR_SCHED_SLURM_REFUSED: {
    status: 502,
    retryable: false,
    what: 'Slurm refused the job (its error number and words are in the message): change the spec.',
  },
  SCHEDFLOW_ERR_SCHED_SUBMIT_LIMIT: {
    status: 502,
    retryable: false,
    what: 'Over an association’s or QOS’s submit limit: the request waits and is submitted once other jobs end.',
  },
  SCHEDFLOW_ERR_SCHED_UPDATE_REFUSED: {
    status: 502,
    retryable: false,
    what: 'Slurm refused the job update (its error number and words are in the message): a running job keeps its partition, a user may not raise a running job’s time limit nor go above the partition’s MaxTime.',
  },
  SCHEDFLOW_ERR_SCHED_CANCEL_FAILED: {
    status: 502,
    retryable: false,
    what: 'Slurm did not cancel the job (unknown, or already done); its state is recorded at the next poll.',
  },
  SCHEDFLOW_ERR_SCHED_UNEXPECTED_RESPONSE: {
    status: 502,
    retryable: false,
    what: 'The scheduler’s answer was not what its API documents; check the profile’s API version.',
  },
  SCHEDFLOW_ERR_SCHED_AMBIGUOUS_JOB: {
    status: 502,
    retryable: false,
    what: 'After an interrupted submission more than one job could be the request’s; check with squeue and submit again if none is.',
  },
  SCHEDFLOW_ERR_SCHED_NO_ACCOUNTING: {
    status: 502,
    retryable: false,
    what: 'The cluster serves no accounting (no slurmdbd); jobs are followed from the controller alone.',
  },
  SCHEDFLOW_ERR_SCHED_MUNGE: {
    status: null,
    retryable: false,
    what: 'MUNGE credentials cannot be made here: install munge and start munged.',
  },
  SCHEDFLOW_ERR_JOB_LOST_BY_CONTROLLER: {
    status: null,
    retryable: false,
    what: 'The controller lost the job (restarted without its state) after it started, after the resubmits SCHEDFLOW_LOST_RESUBMITS allows, or when accounting could not be asked whether it ran; submit it again if it should run.',
  },
  SCHEDFLOW_ERR_JOB_LOST_BEFORE_START: {
    status: null,
    retryable: true,
    what: 'The controller lost the job before it started (restarted without its state): schedflow submitted it again as a new attempt (SCHEDFLOW_LOST_RESUBMITS).',
  },

  // The LLM endpoint (recorded on a summary).
  SCHEDFLOW_ERR_LLM_UNREACHABLE: {
    status: null,
    retryable: true,
    what: 'No connection to the LLM endpoint: most often a missing VPN; schedflow retries.',
  },
  SCHEDFLOW_ERR_LLM_UNAUTHORIZED: {
    status: null,
    retryable: false,
    what: 'The LLM API key was refused (wrong, revoked, no allocation): set SCHEDFLOW_LLM_API_KEY.',
  },
  SCHEDFLOW_ERR_LLM_MODEL: {
    status: null,
    retryable: false,
    what: 'The endpoint does not serve the model: set SCHEDFLOW_LLM_MODEL to one it lists.',
  },
  SCHEDFLOW_ERR_LLM_RATE_LIMITED: {
    status: null,
    retryable: true,
    what: 'The LLM endpoint is rate limiting; schedflow retries after its Retry-After.',
  },
  SCHEDFLOW_ERR_LLM_UNAVAILABLE: {
    status: null,
    retryable: true,
    what: 'The LLM service failed or is overloaded (5xx); schedflow retries.',
  },
  SCHEDFLOW_ERR_LLM_TIMEOUT: {
    status: null,
    retryable: true,
    what: 'The LLM endpoint gave no complete answer in time; schedflow retries (or raise the timeout).',
  },
  SCHEDFLOW_ERR_LLM_REFUSED: {
    status: null,
    retryable: false,
    what: 'The LLM endpoint refused the request (a prompt too long for the model’s context, a redirect); read its message.',
  },
  SCHEDFLOW_ERR_LLM_UNEXPECTED_RESPONSE: {
    status: null,
    retryable: false,
    what: 'The endpoint’s answer is not a chat completion; check that the URL is an OpenAI-compatible endpoint.',
  },
  SCHEDFLOW_ERR_SUMMARY: {
    status: null,
    retryable: true,
    what: 'Writing the summary failed for a reason other than the LLM; the template summary stands. See the daemon’s log.',
  },
  SCHEDFLOW_ERR_SUMMARY_GIVEN_UP: {
    status: null,
    retryable: false,
    what: 'The queue gave up on the summary (stalled too often); the template summary stands when it could be made.',
  },

  // Webhooks (recorded on a delivery).
  SCHEDFLOW_ERR_WEBHOOK_UNAVAILABLE: {
    status: null,
    retryable: true,
    what: 'The receiver did not answer, timed out, or answered 408, 429 or 5xx; the delivery is retried.',
  },
  SCHEDFLOW_ERR_WEBHOOK_REFUSED: {
    status: null,
    retryable: false,
    what: 'The receiver refused the delivery (another 4xx, a redirect) or the URL is unusable: fix the receiver or the URL.',
  },
  SCHEDFLOW_ERR_WEBHOOK_TARGET_REFUSED: {
    status: 400,
    retryable: false,
    what: "The webhook URL's host is the daemon's own host or network (loopback, private, link-local, unique-local, multicast, a cloud metadata address or name), or resolves to one: give a receiver outside it, or have the operator name the host in `SCHEDFLOW_WEBHOOK_ALLOW_HOSTS`.",
  },
} as const satisfies Record<`SCHEDFLOW_ERR_${string}`, ErrorSpec>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function errorSpec(code: ErrorCode): ErrorSpec {
  return ERROR_CODES[code];
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

/**
 * schedflow's error base. Every error a user can meet has a stable code from the registry,
 * says whether trying again can help, and carries the upstream's status and message as data
 * rather than only inside the text.
 */
export abstract class SchedflowError extends Error {
  abstract readonly code: ErrorCode;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }

  /** True when the same operation may succeed later (outage, rate limit, timeout): the registry's word. */
  get retryable(): boolean {
    return ERROR_CODES[this.code].retryable;
  }
}

/** Which upstream an {@link UpstreamError} is about. */
export type UpstreamName = 'scheduler' | 'llm' | 'webhook';

/** What an upstream said, kept as data beside the error's own sentence. */
export interface UpstreamDetail {
  /** Its HTTP status; null when it did not answer (network, time-out) or was never asked. */
  status: number | null;
  /** Its own message (the body's, an excerpt), verbatim; null when it said none. */
  message: string | null;
  /** What was asked: `GET /sched/v0.0.44/jobs`, `POST /v1/chat/completions`, `POST https://receiver:8443`; never a secret. */
  request: string;
}

/**
 * The one base of the errors of schedflow's upstreams: the scheduler (src/sched/sched-errors.ts),
 * the LLM endpoint (src/llm/llm-errors.ts) and webhook receivers (src/notify/sender.ts). Each
 * says which upstream, what it answered (`detail`), whether trying again can help (the
 * registry's `retryable`, from its code) and how long the upstream asked to be left alone.
 * Their families add only their codes and what is theirs alone (Slurm's errors[], a model list).
 */
export abstract class UpstreamError<D extends UpstreamDetail = UpstreamDetail> extends SchedflowError {
  abstract readonly upstream: UpstreamName;
  /** The upstream's Retry-After, in ms, when it sent one (a 429, a 503); else null. */
  readonly retryAfterMs: number | null;

  constructor(
    message: string,
    readonly detail: D,
    options?: { cause?: unknown; retryAfterMs?: number | null },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.retryAfterMs = options?.retryAfterMs ?? null;
  }

  /** The upstream's HTTP status; null when it did not answer. */
  get status(): number | null {
    return this.detail.status;
  }
}

/** A mistake in configuration or input: fix it and run again. Never retried. */
export class ConfigError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_CONFIG';
}

/**
 * A job spec no scheduler will take (an unknown member, a value out of range or of the wrong
 * type): the request fails at once, never retried, with the member and the reason.
 */
export class InvalidJobSpecError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_INVALID_SPEC';
}

/** A job update schedflow will not send: a malformed job id, an unknown field, a value Slurm cannot take, or no change at all. */
export class InvalidJobUpdateError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_INVALID_JOB_UPDATE';
}

/** The daemon's Redis did not answer: nothing was queued; the same call may work once it is back. */
export class RedisUnavailableError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_REDIS_UNAVAILABLE';
}

/** The PostgreSQL history did not answer, or refused, at start (its message says which, never the URL's password). */
export class HistoryUnavailableError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_HISTORY_UNAVAILABLE';
}

/**
 * The history holds migrations this release does not know: a newer release migrated it. Started
 * anyway, this release would read and write tables whose meaning it does not know.
 */
export class HistoryNewerError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_HISTORY_NEWER';
}

/** The private redis-server exited or did not answer in time after it was started. */
export class RedisStartError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_REDIS_START';
}

/** A job request the history does not hold (the API answers 404 with the same code as a missing route). */
export class RequestNotFoundError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_NOT_FOUND';
}

/** A request's summary offers nothing to apply: none, no suggestion, or the request is a pipeline step. */
export class NoSuggestionError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_NO_SUGGESTION';
}

/** The request's summary is still being written: its suggestion can be applied once it is ready. */
export class SummaryPendingError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_SUMMARY_PENDING';
}

/**
 * A submission refused for good, never retried; the message names the fix. Either at the door,
 * before anything is recorded or sent (src/requests/door.ts): the job names another account
 * than the one the profile's token is bound to, the profile's token lacks a scope a submission
 * needs, its array goes past the cluster's MaxArraySize, or the profile's check found it cannot
 * work (src/sched/profile-check.ts), so the scheduler would refuse it and saying so now names
 * the fix. Or by the submit worker (src/requests/submitter.ts): the scheduler refused it (a 403,
 * a Slurm error) or the spec cannot be sent, and the request is `submit_failed` with that
 * error's code; or its request is not in the history.
 */
export class SubmissionRefusedError extends SchedflowError {
  constructor(
    readonly code: SubmissionRefusalCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The door's own refusals, and any code of an error the submit worker failed a request with. */
export type SubmissionRefusalCode =
  | 'SCHEDFLOW_ERR_ACCOUNT_MISMATCH'
  | 'SCHEDFLOW_ERR_ACCOUNT_NOT_ASSOCIATED'
  | 'SCHEDFLOW_ERR_ARRAY_TOO_LARGE'
  | 'SCHEDFLOW_ERR_PROFILE_SCOPE_MISSING'
  | 'SCHEDFLOW_ERR_PROFILE_UNUSABLE'
  | 'SCHEDFLOW_ERR_PROFILE_NOT_CONNECTED'
  | ErrorCode;

/** A job's output that cannot be read: not written yet, not on this host, or not readable (the message says which path, where). */
export class JobOutputUnavailableError extends SchedflowError {
  constructor(
    readonly code:
      | 'SCHEDFLOW_ERR_OUTPUT_NOT_YET'
      | 'SCHEDFLOW_ERR_OUTPUT_NOT_FOUND'
      | 'SCHEDFLOW_ERR_OUTPUT_UNREADABLE',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Output asked for without the task an array job's output needs, with a task of a job that is
 * not an array, or with an index that is not one of the array's tasks (the message lists them).
 */
export class OutputTaskError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_OUTPUT_TASK' as const;
}

/** Wraps a thrown non-Error once, so everything downstream handles Errors only. */
export function toError(value: unknown): Error {
  if (value instanceof Error) return value;
  return new Error(typeof value === 'string' ? value : JSON.stringify(value), { cause: value });
}

/**
 * A hold, release or update a request cannot take (src/requests/job-control.ts): refused by
 * Slurm for the job's state (409) or its value (422), in Slurm's words, or tasks it has not.
 */
export class JobControlRefusedError extends SchedflowError {
  constructor(
    readonly code:
      | 'SCHEDFLOW_ERR_JOB_CONTROL_REFUSED'
      | 'SCHEDFLOW_ERR_JOB_UPDATE_INVALID'
      | 'SCHEDFLOW_ERR_TASKS_NOT_IN_ARRAY',
    message: string,
  ) {
    super(message);
  }
}

/**
 * A resume of a pipeline run that cannot be (src/pipelines/run-resume.ts): still active,
 * succeeded, skipped, or its steps pruned. `state` is the run's state when it was refused.
 */
export class RunNotResumableError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_RUN_NOT_RESUMABLE' as const;
  constructor(
    message: string,
    readonly state: string,
  ) {
    super(message);
  }
}

/** A retry of an array's tasks that has nothing to retry (src/requests/array-retry.ts). */
export class NoTasksToRetryError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_NO_TASKS_TO_RETRY' as const;
}

/**
 * A request a token may not make (src/access/quota.ts): to a profile it is not bound to (403),
 * or past one of its quotas (429, with when to try again). Refused before anything is recorded
 * for it, or in the transaction that would have recorded it, which then records nothing.
 */
export class AdmissionRefusedError extends SchedflowError {
  constructor(
    readonly code:
      | 'SCHEDFLOW_ERR_PROFILE_NOT_ALLOWED'
      | 'SCHEDFLOW_ERR_QUOTA_IN_FLIGHT'
      | 'SCHEDFLOW_ERR_QUOTA_PER_DAY',
    message: string,
    /** Members of the API's error body: `allowed_profiles`, or the quota's `limit`. */
    readonly extra: Record<string, unknown>,
    /** Seconds until trying again may help (the API's Retry-After); null for a binding. */
    readonly retryAfterSec: number | null = null,
  ) {
    super(message);
  }
}
