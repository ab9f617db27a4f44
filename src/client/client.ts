import type {
  CancelledJob,
  CancelledRun,
  ControlJobBody,
  CreatedJob,
  Job,
  JobControlAnswer,
  JobDetail,
  JobOutput,
  JobOutputQuery,
  JobState,
  ListJobsQuery,
  ListRunsQuery,
  Pipeline,
  ResubmittedJob,
  ResumedRun,
  ResumeRunBody,
  RetriedTasks,
  RetryJobTasksBody,
  Run,
  RunControlAnswer,
  RunDetail,
  RunState,
  SubmitJobBody,
  TriggerPipelineRunBody,
  UpdateJobBody,
} from './api-shapes.js';
import { everyItem, type Page } from './paging.js';
import { DEFAULT_RETRY, type RetryPolicy } from './retry.js';
import { isTerminalJobState, isTerminalRunState } from './states.js';
import { type QueryValue, segment, Transport } from './transport.js';
import { pollUntil, type WaitOptions } from './wait.js';

export interface SchedflowClientOptions {
  /** The daemon's address: `http://127.0.0.1:8080` (its `--listen`). */
  baseUrl: string;
  /** An API token (`schedflow tokens create`): sent as `Authorization: Bearer`. */
  token: string;
  /** The `fetch` to use (default: the global one): a proxy's dispatcher, a test's counter. */
  fetch?: typeof fetch;
  /** How 429, 503 and calls without an answer are retried (see retry.ts); any member replaces the default's. */
  retry?: Partial<RetryPolicy>;
  /** One attempt's bound, past which it counts as unanswered (default 30 s). */
  requestTimeoutMs?: number;
}

/** Options of any call. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** Options of a call that makes something (a job, a run). */
export interface MakeOptions extends CallOptions {
  /**
   * Sent as `Idempotency-Key`: the same key with the same body within 24 h is answered with what
   * the first made, never a second one. Default: a new random key per call, kept across the
   * call's own retries (so a retry after a lost answer finds the job rather than makes another).
   * Give your own (an order number) to make a repeat of the whole call safe too; null sends none,
   * and the call is then never sent again after no answer came.
   */
  idempotencyKey?: string | null;
}

/** What a call that makes something tells beside the API's answer. */
export interface Made {
  /** The Idempotency-Key it was sent with (null when none). */
  idempotencyKey: string | null;
  /** The daemon answered with what an earlier call with the same key made (`Idempotent-Replayed: true`). */
  replayed: boolean;
}

/** A list's filters; `state` as the states themselves or the API's comma-separated text. */
export type JobFilters = Omit<ListJobsQuery, 'cursor' | 'state'> & { state?: readonly JobState[] | string };
export type RunFilters = Omit<ListRunsQuery, 'cursor' | 'state'> & { state?: readonly RunState[] | string };

/**
 * The local API of a schedflow daemon (docs/http-api.md), typed from its OpenAPI document.
 * Errors are thrown as `SchedflowClientError`s (client-errors.ts); 429 and 503 are retried after
 * their `Retry-After`, never another 4xx.
 */
export class SchedflowClient {
  readonly #transport: Transport;

  /** Throws a `TypeError` for a `baseUrl` or `token` that no request could be made with. */
  constructor(options: SchedflowClientOptions) {
    this.#transport = new Transport({
      baseUrl: checkedBaseUrl(options.baseUrl),
      token: checkedToken(options.token),
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      retry: { ...DEFAULT_RETRY, ...options.retry },
      requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
    });
  }

  // ---- jobs

  /** `POST /api/v1/jobs`: records a job request and queues its submission (201). */
  async submitJob(job: SubmitJobBody, options: MakeOptions = {}): Promise<CreatedJob & Made> {
    return this.#make<CreatedJob>('/api/v1/jobs', job, options);
  }

  /** `GET /api/v1/jobs/{id}`: its state, transitions, output paths, freshness and summary. */
  async getJob(id: string, options: CallOptions = {}): Promise<JobDetail> {
    return this.#get<JobDetail>(`/api/v1/jobs/${segment(id)}`, undefined, options.signal);
  }

  /**
   * Reads the job until it ends (a terminal state: states.ts) and gives it as it ended. Stops at
   * `timeoutMs` with a `SchedflowTimeoutError` (the job goes on), or when `signal` aborts.
   */
  async waitForJob(id: string, options: WaitOptions<JobDetail> = {}): Promise<JobDetail> {
    return pollUntil(
      `job request ${id}`,
      (signal) => this.getJob(id, { signal }),
      (job) => isTerminalJobState(job.state),
      options,
    );
  }

  /** `GET /api/v1/jobs`: every job request matching `filters`, newest first, reading page after page. */
  listJobs(filters: JobFilters = {}, options: CallOptions = {}): AsyncGenerator<Job> {
    return everyItem((cursor) =>
      this.#get<Page<Job>>('/api/v1/jobs', { ...filters, cursor } as Record<string, QueryValue>, options.signal),
    );
  }

  /**
   * `DELETE /api/v1/jobs/{id}`: 200 when withdrawn before submission, 202 when the scheduler was
   * asked. When an attempt got no answer and its retry is answered 409 `SCHEDFLOW_ERR_JOB_ENDED`
   * with `state: 'cancelled'`, the first attempt may have been the one that cancelled it: the
   * error is thrown as the daemon answered (docs/http-api.md#typescript-client).
   */
  async cancelJob(id: string, options: CallOptions = {}): Promise<CancelledJob> {
    return this.#body<CancelledJob>({ method: 'DELETE', path: `/api/v1/jobs/${segment(id)}`, ...options });
  }

  /** `POST /api/v1/jobs/{id}/hold`: the job, or the array tasks `indexes` names. */
  async holdJob(id: string, body: ControlJobBody = {}, options: CallOptions = {}): Promise<JobControlAnswer> {
    return this.#control<JobControlAnswer>(`/api/v1/jobs/${segment(id)}/hold`, body, options);
  }

  /** `POST /api/v1/jobs/{id}/release`. */
  async releaseJob(id: string, body: ControlJobBody = {}, options: CallOptions = {}): Promise<JobControlAnswer> {
    return this.#control<JobControlAnswer>(`/api/v1/jobs/${segment(id)}/release`, body, options);
  }

  /** `PATCH /api/v1/jobs/{id}`: its time limit, partition, QOS, nice, name or comment. */
  async updateJob(id: string, change: UpdateJobBody, options: CallOptions = {}): Promise<JobControlAnswer> {
    // Setting the same values twice leaves them set: safe to send again.
    return this.#body<JobControlAnswer>({
      method: 'PATCH',
      path: `/api/v1/jobs/${segment(id)}`,
      body: change,
      ...options,
    });
  }

  /** `GET /api/v1/jobs/{id}/output`: the end of its stdout (or `stream: 'stderr'`), an array task's with `task`. */
  async getJobOutput(id: string, query: Partial<JobOutputQuery> = {}, options: CallOptions = {}): Promise<JobOutput> {
    return this.#get<JobOutput>(`/api/v1/jobs/${segment(id)}/output`, query, options.signal);
  }

  /** `POST /api/v1/jobs/{id}/resubmit`: a new request with its summary's suggested change. */
  async resubmitJob(id: string, options: MakeOptions = {}): Promise<ResubmittedJob & Made> {
    return this.#make<ResubmittedJob>(`/api/v1/jobs/${segment(id)}/resubmit`, undefined, options);
  }

  /** `POST /api/v1/jobs/{id}/retry-tasks`: some of an array job's tasks again (default: those that did not complete). */
  async retryJobTasks(
    id: string,
    body: RetryJobTasksBody = {},
    options: MakeOptions = {},
  ): Promise<RetriedTasks & Made> {
    return this.#make<RetriedTasks>(`/api/v1/jobs/${segment(id)}/retry-tasks`, body, options);
  }

  // ---- pipelines and runs

  /** `GET /api/v1/pipelines`. */
  async listPipelines(options: CallOptions = {}): Promise<Pipeline[]> {
    return (await this.#get<{ items: Pipeline[] }>('/api/v1/pipelines', undefined, options.signal)).items;
  }

  /** `POST /api/v1/pipelines/{name}/runs`: starts a run now (201). */
  async triggerPipelineRun(
    pipeline: string,
    body: TriggerPipelineRunBody = {},
    options: MakeOptions = {},
  ): Promise<Run & Made> {
    return this.#make<Run>(`/api/v1/pipelines/${segment(pipeline)}/runs`, body, options);
  }

  /** `GET /api/v1/runs/{id}`: the run, its steps' requests, its transitions and summary. */
  async getRun(id: string, options: CallOptions = {}): Promise<RunDetail> {
    return this.#get<RunDetail>(`/api/v1/runs/${segment(id)}`, undefined, options.signal);
  }

  /** Reads the run until it ends (succeeded, failed, cancelled, skipped), as `waitForJob` does a job. */
  async waitForRun(id: string, options: WaitOptions<RunDetail> = {}): Promise<RunDetail> {
    return pollUntil(
      `pipeline run ${id}`,
      (signal) => this.getRun(id, { signal }),
      (run) => isTerminalRunState(run.state),
      options,
    );
  }

  /** `GET /api/v1/runs`: every run matching `filters`, newest first, reading page after page. */
  listRuns(filters: RunFilters = {}, options: CallOptions = {}): AsyncGenerator<Run> {
    return everyItem((cursor) =>
      this.#get<Page<Run>>('/api/v1/runs', { ...filters, cursor } as Record<string, QueryValue>, options.signal),
    );
  }

  /** `POST /api/v1/runs/{id}/cancel`: 200 once cancelled, 202 while its steps end. */
  async cancelRun(id: string, options: CallOptions = {}): Promise<CancelledRun> {
    return this.#control<CancelledRun>(`/api/v1/runs/${segment(id)}/cancel`, undefined, options);
  }

  /** `POST /api/v1/runs/{id}/hold`: every step not running and not ended. */
  async holdRun(id: string, options: CallOptions = {}): Promise<RunControlAnswer> {
    return this.#control<RunControlAnswer>(`/api/v1/runs/${segment(id)}/hold`, undefined, options);
  }

  /** `POST /api/v1/runs/{id}/release`: the steps schedflow held. */
  async releaseRun(id: string, options: CallOptions = {}): Promise<RunControlAnswer> {
    return this.#control<RunControlAnswer>(`/api/v1/runs/${segment(id)}/release`, undefined, options);
  }

  /**
   * `POST /api/v1/runs/{id}/resume`: a new attempt of a failed or cancelled run, its steps that
   * did not complete run again. Not sent again by itself after no answer: the resume may have
   * been made, and asking again is then refused (409, the run is running), not repeated.
   */
  async resumeRun(id: string, body: ResumeRunBody = {}, options: CallOptions = {}): Promise<ResumedRun> {
    const answer = await this.#transport.call<ResumedRun>({
      method: 'POST',
      path: `/api/v1/runs/${segment(id)}/resume`,
      body,
      idempotent: false,
      signal: options.signal,
    });
    return answer.body;
  }

  // ---- the calls underneath

  async #get<T>(path: string, query: Record<string, QueryValue> | undefined, signal: AbortSignal | undefined) {
    return this.#body<T>({ method: 'GET', path, query, signal });
  }

  /**
   * A POST whose repeat changes nothing more (a hold of a held job answers `changed: false`, a
   * cancel asked again where it stands): safe to send again after no answer came.
   */
  async #control<T>(path: string, body: unknown, options: CallOptions) {
    return this.#body<T>({ method: 'POST', path, body, ...options });
  }

  async #body<T>(init: {
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
    path: string;
    query?: Record<string, QueryValue>;
    body?: unknown;
    signal?: AbortSignal;
  }): Promise<T> {
    return (await this.#transport.call<T>({ ...init, idempotent: true })).body;
  }

  /** A POST that makes something: sent with an Idempotency-Key, one made here unless given (or null). */
  async #make<T extends object>(path: string, body: unknown, options: MakeOptions): Promise<T & Made> {
    const idempotencyKey =
      options.idempotencyKey === undefined ? globalThis.crypto.randomUUID() : options.idempotencyKey;
    const answer = await this.#transport.call<T>({
      method: 'POST',
      path,
      body,
      idempotent: false,
      ...(idempotencyKey !== null && { idempotencyKey }),
      signal: options.signal,
    });
    return { ...answer.body, idempotencyKey, replayed: answer.headers.get('idempotent-replayed') === 'true' };
  }
}

/**
 * The daemon's address as an http(s) URL. Checked here, once: `127.0.0.1:8080` (no scheme) would
 * otherwise fail at each call as a network error, and credentials in it would be sent to no end
 * (the token is the API's credential) and shown in errors. The value is never echoed.
 */
function checkedBaseUrl(baseUrl: unknown): string {
  const refused = new TypeError(
    'SchedflowClient: baseUrl must be an http:// or https:// URL without a user or password, such as http://127.0.0.1:8080',
  );
  if (typeof baseUrl !== 'string' || !URL.canParse(baseUrl)) throw refused;
  const url = new URL(baseUrl);
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username !== '' || url.password !== '') {
    throw refused;
  }
  return baseUrl;
}

/**
 * An API token as a header can carry it: printable ASCII, no space or line break. A line break
 * makes `fetch` throw an error quoting the whole header, token included; the message here never
 * says what the value was.
 */
function checkedToken(token: unknown): string {
  if (typeof token !== 'string' || !/^[\x21-\x7e]+$/.test(token)) {
    throw new TypeError(
      'SchedflowClient: token must be an API token (`schedflow tokens create`): printable ASCII without spaces or line breaks, and not empty',
    );
  }
  return token;
}
