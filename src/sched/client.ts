import { z } from 'zod';
import { type Clock, systemClock } from '../lib/clock.js';
import type { Logger } from '../logger.js';
import type { ItemsOf } from './answer-items.js';
import type { NodeRecord, PartitionRecord, ReservationRecord } from './cluster-model.js';
import { ClusterDecodeError, type ClusterDecoder, clusterDecoderFor } from './cluster-reads.js';
import { codecFor, type JobCodec } from './codecs/codec.js';
import { nonZero, noValNumber, noValSchema } from './codecs/common.js';
import { type Credentials, credentialsFor } from './credentials.js';
import { type SubmitOptions, type SubmitResult, submitExactlyOnce } from './exactly-once-submit.js';
import type { Freshness } from './freshness.js';
import { JobDecodeError, type JobStateEntry, type SchedJob } from './job-model.js';
import type { JobSpec } from './job-spec.js';
import { describeJobUpdate, type JobUpdate, jobIdOfUpdate, jobUpdateBody } from './job-update.js';
import { type MarkerHint, MarkerLookup } from './marker-lookup.js';
import type { Profile } from './profile.js';
import { credentialsRefused, notScheduler, unsupportedVersion, wrongFlavor } from './profile-check.js';
import type { AccountingQuery, JobListing, Read, ReadOptions } from './reads.js';
import type { Budget } from './request-budget.js';
import { slurmErrorsOf } from './response-errors.js';
import {
  AccountingNotServedError,
  AuthenticationError,
  BadRequestError,
  CancelFailedError,
  ForbiddenError,
  JobNotFoundError,
  JobUpdateRefusedError,
  NetworkError,
  RequestTimeoutError,
  type SchedApiError,
  SlurmRefusedError,
  SubmitLimitError,
  UnexpectedResponseError,
  UpstreamUnavailableError,
} from './sched-errors.js';
import {
  notApplicable,
  SCOPES,
  type ScopeName,
  type ScopeReport,
  type ScopeState,
  scopeReport,
  scopesApply,
} from './scope-check.js';
import { SchedTransport, type TransportRequest } from './transport.js';

import type { UpstreamHealth } from './upstream-health.js';
import { type ApiVersion, isApiVersion, SUPPORTED_VERSIONS } from './versions.js';

/** How recently submissions must have waited for the budget for work that can wait to give way. */
const CONTENTION_WINDOW_MS = 10_000;

/** How long a scheduler without accounting endpoints is taken to have none before asking again. */
const ACCOUNTING_RECHECK_MS = 10 * 60_000;

/** Seconds of staleness polling reads accept while the upstream is down (the contract's maximum). */
export const POLL_STALE_IF_ERROR_SEC = 300;

type Json = Record<string, unknown>;

const listParam = <T>(values: readonly T[] | undefined) => (values?.length ? values : undefined);

/** Job ids one query names at most (`job_id=…` or `step=…` repeated). @defaultValue 500 */
export const MAX_IDS_IN_QUERY = 500;

/**
 * Bytes the repeated id parameters of one query take at most. With the path and the other
 * parameters (under 200 bytes) the URL stays well under 8 KB, the request line that common
 * reverse proxies accept by default (nginx's `large_client_header_buffers 4 8k`, Apache's
 * `LimitRequestLine 8190`); 10-digit ids (federated clusters) still fit 333 to a query.
 */
export const MAX_ID_QUERY_BYTES = 6000;

/**
 * Splits job ids into the fewest queries that name them all, in order, each within
 * MAX_IDS_IN_QUERY ids and MAX_ID_QUERY_BYTES of `<param>=<id>&`. The poller asks the
 * controller and accounting by name, never for every job: on a real cluster that would be
 * every user's jobs, or every record of the account (issue 14).
 */
export function chunkJobIds(ids: readonly number[], param: 'job_id' | 'step'): number[][] {
  const chunks: number[][] = [];
  let chunk: number[] = [];
  let bytes = 0;
  for (const id of ids) {
    const size = param.length + String(id).length + 2;
    if (chunk.length > 0 && (chunk.length >= MAX_IDS_IN_QUERY || bytes + size > MAX_ID_QUERY_BYTES)) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(id);
    bytes += size;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/** A job id no job can have: Slurm cannot parse it, so the cancel that probes the scope cancels nothing. */
const SCOPE_PROBE_JOB_ID = 'schedflow-scope-check';

/** Unix seconds at which the UTC day of `nowMs` ends. */
const endOfUtcDay = (nowMs: number) => (Math.floor(nowMs / 86_400_000) + 1) * 86_400;

/** The members of a partition's record schedflow reads (the same in v0.0.42 to v0.0.44). */
const partitionMaximumsSchema = z.object({
  maximums: z.object({ time: noValSchema.optional(), partition_memory_per_node: noValSchema.optional() }).optional(),
});

/** The members of `GET /slurmdb/{v}/associations` schedflow reads (the same in v0.0.42 to v0.0.44). */
const associationsSchema = z.object({
  associations: z.array(z.object({ account: z.string(), user: z.string(), cluster: z.string().optional() })),
  meta: z.object({ slurm: z.object({ cluster: z.string().optional() }).optional() }).optional(),
});

function arrayMember(body: unknown, member: string, request: string): unknown[] {
  const value = (body as Json | undefined)?.[member];
  if (!Array.isArray(value)) {
    throw new UnexpectedResponseError(`${request} answered without a "${member}" array`, {
      status: 200,
      message: null,
      slurmErrors: [],
      request,
    });
  }
  return value;
}

/**
 * The scheduler API client: every operation schedflow needs, over either
 * flavor (site proxy or plain slurmrestd), for one profile and one resolved version.
 */
export class SchedClient {
  readonly codec: JobCodec;
  private readonly cluster: ClusterDecoder;
  private accountingMissing: { error: AccountingNotServedError; until: number } | null = null;
  /** Finds the job an interrupted submission made, by its marker (marker-lookup.ts). */
  private readonly markers: MarkerLookup;
  private readonly ctl: string;
  private readonly db: string;
  /** Submissions of this process under way, and when the last one ended. */
  private submitting = 0;
  private lastSubmittedAt = Number.NEGATIVE_INFINITY;

  private constructor(
    readonly profile: Profile,
    readonly version: ApiVersion,
    private readonly transport: SchedTransport,
    private readonly logger: Logger,
    private readonly clock: Clock,
  ) {
    this.codec = codecFor(version);
    this.cluster = clusterDecoderFor(version);
    const [ctl, db] = profile.flavor === 'proxy' ? ['/sched', '/scheddb'] : ['/slurm', '/slurmdb'];
    this.ctl = `${ctl}/${version}`;
    this.db = `${db}/${version}`;
    this.markers = new MarkerLookup({
      profile,
      accountingPath: this.db,
      listJobs: (options) => this.listJobs(options),
      listAccountingJobs: (query, options) => this.listAccountingJobs(query, options),
      whenOpen: () => transport.whenOpen(),
      clock,
    });
  }

  /**
   * Resolves the profile's version (`latest` through the meta endpoint) and checks
   * that a pinned one is served. A version the upstream or schedflow does not
   * support is a configuration error that names the supported ones.
   */
  static async connect(
    profile: Profile,
    options: {
      logger: Logger;
      env?: NodeJS.ProcessEnv;
      credentials?: Credentials;
      health?: UpstreamHealth;
      /** The deployment's request budget for the profile; without it, one of this process's own. */
      budget?: Budget;
      /** Time and timers of the client and its transport. @defaultValue systemClock */
      clock?: Clock;
    },
  ): Promise<SchedClient> {
    const clock = options.clock ?? systemClock;
    const credentials = options.credentials ?? credentialsFor(profile, options.env);
    const transport = new SchedTransport(profile, credentials, options.logger, options.health, options.budget, clock);
    try {
      const version = await resolveVersion(profile, transport);
      await checkCredential(profile, transport, version, options.logger);
      options.logger.info({ profile: profile.name, version, requested: profile.version }, 'scheduler API version');
      return new SchedClient(profile, version, transport, options.logger, clock);
    } catch (error) {
      await transport.close();
      throw error;
    }
  }

  /** What this profile's upstream has been answering (requests, stale answers, freshest answer). */
  get health(): UpstreamHealth {
    return this.transport.health;
  }

  /**
   * True while the proxy's rate limit holds this profile below its pace and submissions (or
   * lookups) had to wait for the budget within the last 10 s: work that can wait (polls spaced,
   * the accounting import put off) gives way to them. Once they are through it is polling's again.
   */
  submissionsHeldBack(): boolean {
    return this.isRateLimited() && this.submissionsWaiting();
  }

  /** True while submissions (or lookups) had to wait for this profile's budget within the last 10 s. */
  submissionsWaiting(): boolean {
    return this.transport.contendedWithin(CONTENTION_WINDOW_MS);
  }

  /** True while the proxy's 429s hold this profile below its configured pace. */
  isRateLimited(): boolean {
    return this.transport.isRateLimited();
  }

  /** The pace (requests a second) this profile sends at now. */
  currentRate(): number {
    return this.transport.currentRate();
  }

  /** Liveness of the scheduler proxy (`GET /ping`; plain slurmrestd: `GET /slurm/{v}/ping`). */
  async ping(): Promise<{ ok: boolean; latencyMs: number }> {
    const started = this.clock.now();
    if (this.profile.flavor === 'proxy') {
      const res = await this.transport.send({ method: 'GET', path: '/ping', anonymous: true });
      return { ok: res.text.trim() === 'pong', latencyMs: this.clock.now() - started };
    }
    // slurmrestd answers 200 while slurmctld is down, with `responding: false` in the ping.
    const res = await this.transport.send({ method: 'GET', path: `${this.ctl}/ping` });
    const pings = (res.body as { pings?: { responding?: unknown }[] } | undefined)?.pings ?? [];
    return { ok: pings.some((p) => p.responding === true), latencyMs: this.clock.now() - started };
  }

  /**
   * Whether slurmctld answers, read as polling reads (`{v}/ping` of the controller, the poll's
   * priority and stale-if-error, so a cached answer during an outage is marked stale): the check
   * of a profile with nothing to track. Unlike ping(), it reaches slurmctld behind the proxy.
   * slurmrestd answers 200 while slurmctld is down, with no ping responding: that is an outage.
   */
  async pingController(options: ReadOptions = {}): Promise<Read<null>> {
    const req = this.read(`${this.ctl}/ping`, options);
    const res = await this.transport.send(req);
    const pings = (res.body as { pings?: { responding?: unknown }[] } | undefined)?.pings ?? [];
    if (!pings.some((p) => p.responding === true)) {
      throw new UpstreamUnavailableError(`${this.transport.describe(req)}: slurmctld is not responding`, {
        status: res.status,
        message: 'slurmctld is not responding',
        slurmErrors: [],
        request: this.transport.describe(req),
      });
    }
    return { data: null, freshness: res.freshness };
  }

  async supportedVersions(): Promise<string[]> {
    return this.profile.flavor === 'slurmrestd'
      ? probeSlurmrestdVersions(this.transport)
      : fetchSupportedVersions(this.transport);
  }

  /**
   * The controller's job listing; `updateTime` asks only for changes since then. Slurm cannot
   * filter it by id: with `jobIds`, only those jobs' records are decoded and kept, not every
   * job of the cluster.
   */
  async listJobs(
    options: ReadOptions & {
      updateTime?: number;
      /** Decode only these jobs' records (with arrayJobIds: or those). */
      jobIds?: ReadonlySet<number>;
      /** Decode only the records of these arrays' tasks (with jobIds: or those). */
      arrayJobIds?: ReadonlySet<number>;
    } = {},
  ): Promise<Read<JobListing>> {
    const req = this.read(`${this.ctl}/jobs`, options, { update_time: options.updateTime });
    const { jobIds, arrayJobIds } = options;
    const wanted = (j: unknown): boolean => {
      if (!jobIds && !arrayJobIds) return true;
      const raw = j as { job_id?: unknown; array_job_id?: { number?: unknown } } | null;
      // Every data parser sends array_job_id as a number object ({ set, number }) here.
      return (
        (jobIds?.has(Number(raw?.job_id)) ?? false) || (arrayJobIds?.has(Number(raw?.array_job_id?.number)) ?? false)
      );
    };
    const res = await this.transport.sendForItems(
      req,
      this.itemsOf(req, (j) => (wanted(j) ? this.codec.decodeControllerJob(j) : undefined)),
    );
    const lastUpdate = (res.body as { last_update?: { number?: number } }).last_update?.number ?? null;
    return {
      data: { jobs: res.items, lastUpdate, changed: !(options.updateTime !== undefined && res.seen === 0) },
      freshness: res.freshness,
    };
  }

  /**
   * The light state listing (`jobs/state`): id and state of the given jobs, or of all. Several
   * ids go as repeated `job_id=` parameters: real slurmrestd refuses the document's CSV form.
   */
  async listJobStates(jobIds: number[] = [], options: ReadOptions = {}): Promise<Read<JobStateEntry[]>> {
    const req = this.read(`${this.ctl}/jobs/state`, options, { job_id: listParam(jobIds) });
    const res = await this.transport.sendForItems(
      req,
      this.itemsOf(req, (j) => this.codec.decodeJobState(j)),
    );
    return { data: res.items, freshness: res.freshness };
  }

  /** One job from the controller; JobNotFoundError once it has left it (see accounting). */
  async getJob(jobId: number, options: ReadOptions = {}): Promise<Read<SchedJob>> {
    const req = this.read(`${this.ctl}/job/${jobId}`, options);
    const res = await this.transport.send(req);
    const [first] = arrayMember(res.body, 'jobs', this.transport.describe(req));
    if (first === undefined) {
      throw new JobNotFoundError(`the controller does not know job ${jobId}`, {
        status: res.status,
        message: null,
        slurmErrors: [],
        request: this.transport.describe(req),
      });
    }
    return { data: this.decodeOne(first, (j) => this.codec.decodeControllerJob(j), req), freshness: res.freshness };
  }

  /**
   * A partition's MaxTime (minutes) and MaxMemPerNode (MB) from the controller
   * (`/partition/{name}`: the proxy serves it under `sched:read`), null where unlimited or
   * unset. The partition's own limits only: an association's or QOS's are not in it.
   */
  async getPartitionLimits(
    name: string,
    options: ReadOptions = {},
  ): Promise<Read<{ maxTimeMin: number | null; maxMemoryPerNodeMb: number | null } | null>> {
    const req = this.read(`${this.ctl}/partition/${encodeURIComponent(name)}`, options);
    const res = await this.transport.send(req);
    const [first] = arrayMember(res.body, 'partitions', this.transport.describe(req));
    if (first === undefined) return { data: null, freshness: res.freshness };
    const parsed = partitionMaximumsSchema.safeParse(first);
    const max = parsed.success ? parsed.data.maximums : undefined;
    return {
      // No MaxMemPerNode is a set 0 in 25.11's answer (slurm.conf's UNLIMITED), not `infinite`.
      data: { maxTimeMin: noValNumber(max?.time), maxMemoryPerNodeMb: nonZero(max?.partition_memory_per_node) },
      freshness: res.freshness,
    };
  }

  /** Every partition the controller has (`GET {ctl}/partitions`), decoded by cluster-reads.ts. */
  listPartitions(options: ReadOptions = {}): Promise<Read<PartitionRecord[]>> {
    return this.listRecords('partitions', this.cluster.partition, options);
  }

  /** Every node the controller has (`GET {ctl}/nodes`). */
  listNodes(options: ReadOptions = {}): Promise<Read<NodeRecord[]>> {
    return this.listRecords('nodes', this.cluster.node, options);
  }

  /** Every reservation the controller has (`GET {ctl}/reservations`). */
  listReservations(options: ReadOptions = {}): Promise<Read<ReservationRecord[]>> {
    return this.listRecords('reservations', this.cluster.reservation, options);
  }

  /** Accounting records (slurmdbd), filtered; every filter is optional. */
  async listAccountingJobs(
    query: AccountingQuery = {},
    options: ReadOptions & {
      /** Records to leave out unread, told by their bytes (see ItemsOf's `skip`). */
      skipRecord?: (raw: Buffer) => boolean;
    } = {},
  ): Promise<Read<SchedJob[]>> {
    // Lists go as repeated parameters (`step=1&step=2`): real slurmrestd answers 500 to a raw
    // comma list and 422 to an encoded one, whatever its document says. With states and a start
    // but no end, slurmdbd looks at the single instant `start` (slurmdb_job_cond_def_start_end):
    // every caller here means "from start until now". The end of the current UTC day says that
    // and keeps the URL the same from one poll to the next, so the proxy can cache the answer and
    // serve it stale-if-error; `now` would make every query a new URL, uncached in an outage.
    const endTime =
      query.endTime ??
      (query.states?.length && query.startTime !== undefined ? endOfUtcDay(this.clock.now()) : undefined);
    const req = this.read(`${this.db}/jobs`, options, {
      start_time: query.startTime,
      end_time: endTime,
      account: listParam(query.accounts),
      job_name: listParam(query.jobNames),
      state: listParam(query.states),
      users: listParam(query.users),
      partition: listParam(query.partitions),
      step: listParam(query.jobIds),
    });
    const res = await this.accountingRequest(req, {
      ...this.itemsOf(req, (j) => this.codec.decodeAccountingJob(j)),
      skip: options.skipRecord,
    });
    return { data: res.items, freshness: res.freshness };
  }

  /**
   * A cluster without slurmdbd has no `/slurmdb` endpoints (404): that is remembered for a
   * while, so the poller and reconcile do not ask again on every cycle, and said plainly.
   */
  private async accountingRequest<T>(req: TransportRequest, of: ItemsOf<T>) {
    if (this.accountingMissing && this.clock.now() < this.accountingMissing.until) throw this.accountingMissing.error;
    try {
      return await this.transport.sendForItems(req, of);
    } catch (error) {
      if (!(error instanceof BadRequestError && error.status === 404)) throw error;
      const missing = new AccountingNotServedError(
        `the scheduler at ${this.profile.url} serves no accounting (${this.transport.describe(req)}: 404): a cluster without slurmdbd; jobs are followed from the controller only, and no history is imported`,
        error.detail,
        { cause: error },
      );
      this.accountingMissing = { error: missing, until: this.clock.now() + ACCOUNTING_RECHECK_MS };
      throw missing;
    }
  }

  /** One accounting record; null when slurmdbd has none (yet). */
  async getAccountingJob(jobId: number, options: ReadOptions = {}): Promise<Read<SchedJob | null>> {
    const req = this.read(`${this.db}/job/${jobId}`, options);
    try {
      const res = await this.transport.send(req);
      const [first] = arrayMember(res.body, 'jobs', this.transport.describe(req));
      const job = first === undefined ? null : this.decodeOne(first, (j) => this.codec.decodeAccountingJob(j), req);
      return { data: job, freshness: res.freshness };
    } catch (error) {
      if (error instanceof BadRequestError && error.status === 404) {
        return { data: null, freshness: { ...emptyFreshness(), fetchedAt: new Date() } };
      }
      throw error;
    }
  }

  /** Submits a job carrying the request's marker, at most one job per request (exactly-once-submit.ts). */
  async submit(spec: JobSpec, requestId: string, options: SubmitOptions = {}): Promise<SubmitResult> {
    this.submitting++;
    try {
      return await this.submitOnce(spec, requestId, options);
    } finally {
      this.submitting--;
      this.lastSubmittedAt = this.clock.now();
    }
  }

  /** True while this process submits to the profile, or did within `windowMs`: work that can wait gives way. */
  submittingWithin(windowMs: number): boolean {
    return this.submitting > 0 || this.clock.now() - this.lastSubmittedAt <= windowMs;
  }

  private submitOnce(spec: JobSpec, requestId: string, options: SubmitOptions): Promise<SubmitResult> {
    return submitExactlyOnce(
      {
        profile: this.profile,
        codec: this.codec,
        transport: this.transport,
        logger: this.logger,
        submitPath: `${this.ctl}/job/submit`,
        findByMarker: (id, hint) => this.markers.find(id, hint),
        clock: this.clock,
      },
      spec,
      requestId,
      options,
    );
  }

  /** Finds the job a request created, by the marker in its comment (marker-lookup.ts). */
  findByMarker(requestId: string, hint: MarkerHint = {}): Promise<SchedJob | null> {
    return this.markers.find(requestId, hint);
  }

  /**
   * Learns the token's scopes from the proxy's answers to harmless requests, one per scope: the
   * controller's ping (`sched:read`), accounting records of the last second (`scheddb:read`),
   * and a cancel of a job id no job can have (`sched:jobs:manage`: the proxy checks the scope
   * before it reads the id, and Slurm cancels nothing for an id it cannot parse). 403 means the
   * scope is missing; any other answer that it is there; no answer, a 401 or a 429, unknown.
   */
  async probeScopes(): Promise<ScopeReport> {
    if (!scopesApply(this.profile)) return notApplicable(this.profile, this.clock.now());
    const now = Math.floor(this.clock.now() / 1000);
    const probes: Record<ScopeName, TransportRequest> = {
      'sched:read': { method: 'GET', path: `${this.ctl}/ping`, retry: false },
      'scheddb:read': {
        method: 'GET',
        path: `${this.db}/jobs`,
        query: { start_time: now, end_time: now },
        retry: false,
      },
      'sched:jobs:manage': { method: 'DELETE', path: `${this.ctl}/job/${SCOPE_PROBE_JOB_ID}`, retry: false },
    };
    const states = await Promise.all(
      SCOPES.map(async (scope): Promise<[ScopeName, ScopeState]> => {
        try {
          await this.transport.send(probes[scope]);
          return [scope, 'granted'];
        } catch (error) {
          if (error instanceof ForbiddenError) return [scope, error.reason === 'account' ? 'granted' : 'missing'];
          const e = error as SchedApiError;
          // Answered by the proxy past its scope check: a refusal of the request itself.
          const pastScope =
            e instanceof BadRequestError ||
            e instanceof JobNotFoundError ||
            e instanceof CancelFailedError ||
            e instanceof SlurmRefusedError;
          return [scope, pastScope ? 'granted' : 'unknown'];
        }
      }),
    );
    const report = scopeReport('probe', Object.fromEntries(states), this.clock.now());
    this.logger.info({ profile: this.profile.name, scopes: report.scopes }, report.detail);
    return report;
  }

  /**
   * The accounts `user` has an association with on this cluster, from slurmdbd
   * (`GET /slurmdb/{v}/associations?user=`): what Slurm lets the user charge. slurmdbd may hold
   * several clusters' associations; only those of the cluster slurmrestd serves count. Asked
   * once, not retried: the caller asks again later.
   */
  async userAccounts(user: string): Promise<string[]> {
    const req: TransportRequest = { method: 'GET', path: `${this.db}/associations`, query: { user }, retry: false };
    const res = await this.transport.send(req);
    const parsed = associationsSchema.safeParse(res.body);
    if (!parsed.success) {
      throw new UnexpectedResponseError(`${this.transport.describe(req)} answered no associations schedflow can read`, {
        status: res.status,
        message: parsed.error.message,
        slurmErrors: [],
        request: this.transport.describe(req),
      });
    }
    const cluster = parsed.data.meta?.slurm?.cluster;
    return parsed.data.associations
      .filter((a) => a.user === user && (!cluster || !a.cluster || a.cluster === cluster))
      .map((a) => a.account);
  }

  /** Cancels a job; a refusal Slurm reports inside a 200 answer becomes CancelFailedError. */
  async cancel(jobId: number, options: { signal?: AbortSignal } = {}): Promise<void> {
    const req: TransportRequest = {
      method: 'DELETE',
      path: `${this.ctl}/job/${jobId}`,
      retry: true,
      signal: options.signal,
    };
    const res = await this.transport.send(req);
    const status = (res.body as { status?: unknown } | undefined)?.status;
    const failures = Array.isArray(status)
      ? (status as { error?: { code?: number; string?: string; message?: string } }[])
      : [];
    const failed = failures.find((s) => s.error?.code && s.error.code !== 0);
    if (failed?.error) {
      const { code, string: text, message } = failed.error;
      throw new CancelFailedError(
        `cancel of job ${jobId} failed: ${text ?? 'error'} (Slurm error ${code})${message && message !== text ? ` — ${message}` : ''}`,
        { status: res.status, message: text ?? null, slurmErrors: [], request: this.transport.describe(req) },
        code ?? null,
      );
    }
  }

  /**
   * Updates a job, or one array task (`123_4`): `POST {ctl}/job/{id}` with the version's
   * `job_desc_msg` (job-update.ts); `hold` holds or releases it. What Slurm refuses — a 500
   * with errors[], or an error in a 200's errors[] or results[] — is JobUpdateRefusedError
   * with Slurm's number and words; a job the controller does not know, JobNotFoundError. The
   * update sets values, so sending it again is harmless: it is retried like a read.
   */
  async updateJob(jobId: number | string, update: JobUpdate, options: { signal?: AbortSignal } = {}): Promise<void> {
    const body = jobUpdateBody(this.version, update);
    const what = describeJobUpdate(update);
    const id = await this.updateTarget(jobIdOfUpdate(jobId), what, options.signal);
    const req: TransportRequest = {
      method: 'POST',
      path: `${this.ctl}/job/${id}`,
      body,
      retry: true,
      signal: options.signal,
    };
    let res: Awaited<ReturnType<SchedTransport['send']>>;
    try {
      res = await this.transport.send(req);
    } catch (error) {
      if (error instanceof SlurmRefusedError || error instanceof SubmitLimitError) {
        const first = error.detail.slurmErrors.find((e) => e.error_number) ?? error.detail.slurmErrors[0];
        throw updateRefused(id, what, first?.error_number ?? null, first?.error ?? null, error.detail, error);
      }
      if (error instanceof JobNotFoundError) {
        throw new JobNotFoundError(
          `the controller does not know job ${id} (Slurm error 2017, Invalid job id specified)`,
          error.detail,
          {
            cause: error,
          },
        );
      }
      throw error;
    }
    // slurmrestd 25.11 answers `results: null` with an empty errors[]; an array's update may
    // list its tasks in results[], each with its own error_code.
    const detail = {
      status: res.status,
      message: null,
      slurmErrors: slurmErrorsOf(res.body),
      request: this.transport.describe(req),
    };
    const inBody = detail.slurmErrors.find((e) => e.error_number);
    if (inBody) throw updateRefused(id, what, inBody.error_number, inBody.error, detail);
    const results = (res.body as { results?: unknown } | undefined)?.results;
    const failed = Array.isArray(results)
      ? (results as { error_code?: unknown; error?: unknown; why?: unknown }[]).find(
          (r) => typeof r?.error_code === 'number' && r.error_code !== 0,
        )
      : undefined;
    if (failed) {
      const words =
        typeof failed.error === 'string' ? failed.error : typeof failed.why === 'string' ? failed.why : null;
      throw updateRefused(id, what, failed.error_code as number, words, detail);
    }
    this.logger.info({ profile: this.profile.name, jobId: id, update: what }, 'job updated');
  }

  /**
   * The id an update is posted to. slurmrestd refuses an array task's `123_4` in the path (422,
   * 9000, every version of 25.11.7), so a task is updated by its own record's job id, which it
   * has once it started (the array's id itself for its last one). A task still waiting in the
   * array's record has none: Slurm updates it only with all the array's waiting tasks, by the
   * array's id, and the refusal says so in Slurm's words.
   */
  private async updateTarget(id: string, what: string, signal?: AbortSignal): Promise<string> {
    const task = /^(\d+)_(\d+)$/.exec(id);
    if (!task) return id;
    const [, arrayId, taskId] = task;
    const req = this.read(`${this.ctl}/job/${arrayId}`, { signal });
    const res = await this.transport.send(req);
    const records = arrayMember(res.body, 'jobs', this.transport.describe(req)).map((j) =>
      this.decodeOne(j, (r) => this.codec.decodeControllerJob(r), req),
    );
    const detail = { status: res.status, message: null, slurmErrors: [], request: this.transport.describe(req) };
    const own = records.find((r) => r.array_job_id === Number(arrayId) && r.array_task_id === Number(taskId));
    if (own) return String(own.job_id);
    if (!records.some((r) => r.array_job_id === Number(arrayId))) {
      throw new JobNotFoundError(`the controller does not know array job ${arrayId}`, detail);
    }
    throw updateRefused(
      id,
      what,
      9000,
      `Submit job update against Array Job's JobID instead of array task id: task ${taskId} has no record of its own (it has not started: it waits in array ${arrayId}'s record, updated with the array's waiting tasks by the id ${arrayId})`,
      detail,
    );
  }

  close(): Promise<void> {
    return this.transport.close();
  }

  private read(path: string, options: ReadOptions, query?: TransportRequest['query']): TransportRequest {
    return {
      method: 'GET',
      path,
      query,
      priority: options.forPolling ? 'poll' : 'normal',
      staleIfErrorSec: options.forPolling ? POLL_STALE_IF_ERROR_SEC : options.staleIfErrorSec,
      retry: options.retry,
      signal: options.signal,
    };
  }

  /** A small list answer of the controller (`{member: [...]}`), each record decoded, any unreadable one an error. */
  private async listRecords<T>(
    member: 'partitions' | 'nodes' | 'reservations',
    decode: (raw: unknown) => T,
    options: ReadOptions,
  ): Promise<Read<T[]>> {
    const req = this.read(`${this.ctl}/${member}`, options);
    const res = await this.transport.send(req);
    const records = arrayMember(res.body, member, this.transport.describe(req));
    try {
      return { data: records.map(decode), freshness: res.freshness };
    } catch (error) {
      if (!(error instanceof ClusterDecodeError)) throw error;
      throw new UnexpectedResponseError(
        `${this.transport.describe(req)} answered a record schedflow cannot read (${error.message}); is the pinned version (${this.version}) the one the scheduler serves?`,
        { status: res.status, message: error.message, slurmErrors: [], request: this.transport.describe(req) },
        { cause: error },
      );
    }
  }

  private decodeOne<T>(raw: unknown, decode: (raw: unknown) => T, req: TransportRequest): T {
    try {
      return decode(raw);
    } catch (error) {
      if (!(error instanceof JobDecodeError)) throw error;
      throw new UnexpectedResponseError(
        `${this.transport.describe(req)} answered a job record schedflow cannot read (${error.message}); is the pinned version (${this.version}) the one the scheduler serves?`,
        { status: 200, message: error.message, slurmErrors: [], request: this.transport.describe(req) },
        { cause: error },
      );
    }
  }

  /** The `jobs` of a list answer, each decoded as it is read (see answer-items.ts). */
  private itemsOf<T>(req: TransportRequest, decode: (raw: unknown) => T | undefined): ItemsOf<T> {
    return { member: 'jobs', decode: (raw) => this.decodeOne(raw, decode, req) };
  }
}

/** Slurm's refusal of an update, said as Slurm says it: `Slurm refused to update job 12 (partition b): Job is no longer pending execution (Slurm error 2073)`. */
function updateRefused(
  id: string,
  what: string,
  code: number | null,
  words: string | null,
  detail: ConstructorParameters<typeof JobUpdateRefusedError>[1],
  cause?: unknown,
): JobUpdateRefusedError {
  const said = `${words ?? 'refused'}${code !== null ? ` (Slurm error ${code})` : ''}`;
  return new JobUpdateRefusedError(`Slurm refused to update job ${id} (${what}): ${said}`, detail, code, words, {
    cause,
  });
}

function emptyFreshness(): Freshness {
  const now = new Date();
  return { fetchedAt: now, producedAt: now, ageSec: 0, maxAgeSec: null, expiresAt: null, stale: false };
}

async function fetchSupportedVersions(transport: SchedTransport): Promise<string[]> {
  const res = await transport.send({ method: 'GET', path: '/meta/versions/supported', anonymous: true });
  if (!Array.isArray(res.body) || !res.body.every((v) => typeof v === 'string')) {
    throw new UnexpectedResponseError('GET /meta/versions/supported did not answer a list of versions', {
      status: res.status,
      message: res.text.slice(0, 200),
      slurmErrors: [],
      request: 'GET /meta/versions/supported',
    });
  }
  return res.body as string[];
}

/**
 * The proxy's versions, or what the address is instead: the proxy serves its meta endpoints to
 * anyone, while plain slurmrestd authenticates every request before it routes it (a 401 with
 * `Authentication failure`), so a 401 here is slurmrestd. A 404, or an answer that is not a
 * list, is some other server: neither flavor's API is at that address.
 */
async function proxyVersions(profile: Profile, transport: SchedTransport): Promise<string[]> {
  try {
    return await fetchSupportedVersions(transport);
  } catch (error) {
    if (error instanceof AuthenticationError) {
      throw wrongFlavor(
        profile,
        'it asks credentials for GET /meta/versions/supported, which the proxy serves to anyone',
      );
    }
    if (error instanceof BadRequestError || error instanceof JobNotFoundError) {
      throw notScheduler(profile, `GET /meta/versions/supported answered ${error.status}`);
    }
    if (error instanceof UnexpectedResponseError) {
      throw notScheduler(profile, 'GET /meta/versions/supported did not answer a list of versions');
    }
    throw error;
  }
}

/** Whether the site proxy answers at the address (its anonymous meta endpoint lists versions). */
async function answersAsProxy(transport: SchedTransport): Promise<boolean> {
  try {
    await fetchSupportedVersions(transport);
    return true;
  } catch {
    return false;
  }
}

/**
 * slurmrestd's versions, or what is wrong: a 401 to the credentialed ping is a refused
 * credential (or the proxy, which knows no /slurm paths); none served is the proxy, when its
 * meta endpoint answers, else no scheduler at all.
 */
async function slurmrestdVersions(profile: Profile, transport: SchedTransport): Promise<ApiVersion[]> {
  let served: ApiVersion[];
  try {
    served = await probeSlurmrestdVersions(transport);
  } catch (error) {
    if (!(error instanceof AuthenticationError)) throw error;
    if (await answersAsProxy(transport)) throw wrongFlavor(profile, 'GET /meta/versions/supported lists versions');
    throw credentialsRefused(profile, error.status, error.detail.message, error);
  }
  if (served.length > 0) return served;
  if (await answersAsProxy(transport)) {
    throw wrongFlavor(profile, 'it has no /slurm/{v}/ping, and GET /meta/versions/supported lists versions');
  }
  throw notScheduler(profile, `none of ${SUPPORTED_VERSIONS.map((v) => `/slurm/${v}/ping`).join(', ')} answers`);
}

/**
 * Plain slurmrestd has no meta endpoints, and authenticates before it routes (an anonymous
 * request is a 401 on every path): probe `/slurm/{v}/ping` with credentials, newest first.
 * A data parser it was not started with answers 404.
 */
async function probeSlurmrestdVersions(transport: SchedTransport): Promise<ApiVersion[]> {
  const served: ApiVersion[] = [];
  for (const version of [...SUPPORTED_VERSIONS].reverse()) {
    try {
      await transport.send({ method: 'GET', path: `/slurm/${version}/ping` });
      served.push(version);
    } catch (error) {
      if (!(error instanceof BadRequestError)) throw error;
    }
  }
  return served;
}

/**
 * One light authenticated request, so a refused credential is said at connect rather than at
 * the first submission. The proxy's `/ping` and meta endpoints need no credentials, so they
 * pass with any token: its controller ping (`/sched/{v}/ping`) checks it (a 403 there is a
 * scope, learnt by the scope probe, not a bad token). slurmrestd answers `/ping` without asking
 * slurmctld who the caller is, so a bad or expired JWT passes the version probe: `jobs/state`
 * of one job is authenticated by slurmctld.
 */
async function checkCredential(
  profile: Profile,
  transport: SchedTransport,
  version: ApiVersion,
  logger: Logger,
): Promise<void> {
  const req: TransportRequest =
    profile.flavor === 'proxy'
      ? { method: 'GET', path: `/sched/${version}/ping`, retry: false }
      : { method: 'GET', path: `/slurm/${version}/jobs/state`, query: { job_id: 1 }, retry: false };
  try {
    await transport.send(req);
  } catch (error) {
    if (error instanceof AuthenticationError)
      throw credentialsRefused(profile, error.status, error.detail.message, error);
    // No answer: the profile is not reachable, whatever its token.
    if (error instanceof NetworkError || error instanceof RequestTimeoutError) throw error;
    // The proxy checked the token and found it lacks the scope: accepted (the scope probe says the rest).
    if (error instanceof ForbiddenError) return;
    // slurmctld down (or a scope the token lacks) says nothing against the token; it is checked again with every request.
    logger.warn({ profile: profile.name, code: (error as SchedApiError).code }, 'could not check the credential now');
  }
}

async function resolveVersion(profile: Profile, transport: SchedTransport): Promise<ApiVersion> {
  const served: string[] =
    profile.flavor === 'slurmrestd'
      ? await slurmrestdVersions(profile, transport)
      : await proxyVersions(profile, transport);
  if (profile.version === 'latest') return resolveLatest(profile, transport, served);
  if (!isApiVersion(profile.version)) {
    throw unsupportedVersion(
      profile,
      `API version ${profile.version} is not one schedflow speaks: set version to one of ${SUPPORTED_VERSIONS.join(', ')}, or latest`,
    );
  }
  if (!served.includes(profile.version)) {
    throw unsupportedVersion(
      profile,
      `API version ${profile.version} is not served by the scheduler at ${profile.url} (it supports ${served.join(', ')}): set version to one of them, or latest`,
    );
  }
  return profile.version;
}

/**
 * `latest` is what the proxy calls latest, when schedflow speaks it; when the
 * proxy is newer than schedflow, the newest version both speak.
 */
async function resolveLatest(profile: Profile, transport: SchedTransport, served: string[]): Promise<ApiVersion> {
  if (profile.flavor === 'proxy') {
    const res = await transport.send({ method: 'GET', path: '/meta/versions/latest', anonymous: true });
    const latest = res.text.trim().replace(/^"|"$/g, '');
    if (isApiVersion(latest)) return latest;
  }
  const common = served.filter(isApiVersion).sort().at(-1);
  if (!common) {
    throw unsupportedVersion(
      profile,
      `the scheduler at ${profile.url} serves ${served.join(', ') || 'no versions'}, and schedflow speaks ${SUPPORTED_VERSIONS.join(', ')}: none in common (upgrade schedflow, or ask for a data parser it speaks)`,
    );
  }
  return common;
}
