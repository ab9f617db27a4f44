import { randomUUID } from 'node:crypto';
import { SchedflowError } from '../errors.js';
import { type Clock, systemClock } from '../lib/clock.js';
import { sleep } from '../lib/sleep.js';
import type { Logger } from '../logger.js';
import type { SchedClient } from './client.js';
import type { Node, NodeRecord, Partition, PartitionRecord, Queue, ReservationRecord } from './cluster-model.js';
import { joinNodes, joinPartitions, queueOf } from './cluster-reads.js';
import type { Freshness } from './freshness.js';
import type { SchedJob } from './job-model.js';
import { BudgetUnavailableError } from './sched-errors.js';

/**
 * The cluster's view, one read of each upstream listing per profile per lifetime whoever asks:
 * every viewer of every web process of the deployment gets the last answer kept in the shared
 * cache (Redis), and when it has expired, one of them (single-flight across processes, by a
 * lock in the cache) asks the upstream again while the others wait for its answer. A failed
 * read serves the last answer marked stale (stale-if-error), and is not retried by every viewer:
 * the failure is kept for a lifetime too. Reads go through the profile's client, so its request
 * budget and the proxy's own cache apply.
 */

export const CLUSTER_VIEWS = ['partitions', 'nodes', 'reservations', 'queue'] as const;
export type ClusterViewName = (typeof CLUSTER_VIEWS)[number];

/** The upstream listings the views are made of: `GET {ctl}/partitions`, `/nodes`, `/reservations`, `/jobs`. */
type Source = 'partitions' | 'nodes' | 'reservations' | 'jobs';

interface SourceData {
  partitions: PartitionRecord[];
  nodes: NodeRecord[];
  reservations: ReservationRecord[];
  jobs: { jobs: SchedJob[]; lastUpdate: number | null };
}

export interface ClusterViewData {
  partitions: Partition[];
  nodes: Node[];
  reservations: ReservationRecord[];
  queue: Queue;
}

/** Which listings each view is made of. */
const SOURCES: Record<ClusterViewName, readonly Source[]> = {
  partitions: ['partitions', 'nodes', 'jobs'],
  nodes: ['nodes', 'jobs'],
  reservations: ['reservations'],
  queue: ['jobs'],
};

/** A view's answer, with how old it is. */
export interface ClusterAnswer<T> {
  profile: string;
  view: ClusterViewName;
  data: T;
  /** When the oldest listing it is made of was produced upstream (read, or put in the proxy's cache). */
  fetchedAt: Date;
  ageSec: number;
  /** True when a listing is past its lifetime because the upstream could not be read. */
  stale: boolean;
  /** Why, when stale: the failure of the last read. */
  staleReason: string | null;
}

/** The shared store of the last answers (src/redis/cluster-cache.ts); keys are the view's own. */
export interface ClusterCache {
  get(key: string): Promise<string | null>;
  /** Keeps `value` for `keepMs` (long past its lifetime: it is the stale-if-error copy). */
  set(key: string, value: string, keepMs: number): Promise<void>;
  /** Takes the lock `key` for `ms` unless another holder has it. */
  tryLock(key: string, token: string, ms: number): Promise<boolean>;
  /** Frees the lock if `token` still holds it. */
  unlock(key: string, token: string): Promise<void>;
}

/** What one listing's entry in the cache says. */
interface Entry {
  /** When the data was fetched (ms); absent when no read has succeeded yet. */
  fetchedAtMs?: number;
  data?: unknown;
  /** When the upstream produced the data: the proxy's cache may have held it a while. */
  producedAtMs?: number;
  /** Set when the proxy answered from its cache past the lifetime (slurmctld unreachable behind it). */
  upstreamStale?: string;
  /** The last failed read, when it is newer than the data. */
  failedAtMs?: number;
  error?: { code: string; message: string };
}

/** The upstream could not be read, and there is no earlier answer to serve in its place. */
export class ClusterViewUnavailableError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_CLUSTER_VIEW_UNAVAILABLE' as const;
  constructor(
    message: string,
    /** The code of the error the read failed with (`SCHEDFLOW_ERR_SCHED_FORBIDDEN`…). */
    readonly upstreamCode: string,
  ) {
    super(message);
  }
}

export interface ClusterViewOptions {
  cache: ClusterCache;
  /** The key prefix (the daemon's queue prefix), shared by the deployment's processes. */
  prefix: string;
  /** The profile's connected client; throws when it is not connected. */
  clientFor: (profile: string) => SchedClient;
  /** How long an answer serves every viewer. @defaultValue 30 s */
  ttlMs: number;
  logger: Logger;
  clock?: Clock;
  /**
   * How old a kept answer may be for `lastAnswer` (a job page's partition load), at least.
   * @defaultValue 10 lifetimes
   */
  lastAnswerMaxAgeMs?: number;
  /** How long the stale-if-error copy is kept. @defaultValue 1 day */
  keepMs?: number;
  /** How long a read may hold the lock; waiters give up after it. @defaultValue 30 s */
  lockMs?: number;
}

/** How often a viewer waiting for another's read looks at the cache. */
const WAIT_POLL_MS = 50;

/** Seconds of staleness the proxy's cache may serve a cluster listing with during an outage. */
const STALE_IF_ERROR_SEC = 300;

export class ClusterView {
  private readonly inFlight = new Map<string, Promise<Entry>>();
  private readonly clock: Clock;
  private readonly keepMs: number;
  private readonly lockMs: number;

  constructor(private readonly options: ClusterViewOptions) {
    this.clock = options.clock ?? systemClock;
    this.keepMs = options.keepMs ?? 86_400_000;
    this.lockMs = options.lockMs ?? 30_000;
  }

  get ttlMs(): number {
    return this.options.ttlMs;
  }

  async view<V extends ClusterViewName>(profile: string, view: V): Promise<ClusterAnswer<ClusterViewData[V]>> {
    const sources = SOURCES[view];
    const entries = await Promise.all(sources.map((source) => this.entry(profile, source)));
    const data = {} as Partial<SourceData>;
    let fetchedAtMs = Number.POSITIVE_INFINITY;
    let staleReason: string | null = null;
    for (const [i, source] of sources.entries()) {
      const entry = entries[i] as Entry;
      if (entry.fetchedAtMs === undefined) {
        const error = entry.error ?? { code: 'UPSTREAM_UNAVAILABLE', message: 'no answer yet' };
        throw new ClusterViewUnavailableError(
          `the ${view} of profile "${profile}" cannot be read (and no earlier answer is kept): ${error.message}`,
          error.code,
        );
      }
      (data as Record<Source, unknown>)[source] = entry.data;
      fetchedAtMs = Math.min(fetchedAtMs, entry.producedAtMs ?? entry.fetchedAtMs);
      if (entry.error && (entry.failedAtMs ?? 0) > entry.fetchedAtMs) staleReason ??= entry.error.message;
      if (entry.upstreamStale) staleReason ??= entry.upstreamStale;
    }
    return this.answerOf(profile, view, data as SourceData, fetchedAtMs, staleReason);
  }

  /**
   * The last answer of `view` kept in the shared cache, as it is: no upstream read, no lock, no
   * wait (what a job's page shows beside it must never cost a read per job or per viewer). Null
   * when no read has succeeded yet, or when its oldest listing was fetched longer than `maxAgeMs`
   * ago (10 lifetimes, or `lastAnswerMaxAgeMs` when longer, by default: past that it describes another cluster than the one the job
   * waits in).
   */
  async lastAnswer<V extends ClusterViewName>(
    profile: string,
    view: V,
    maxAgeMs = Math.max(10 * this.options.ttlMs, this.options.lastAnswerMaxAgeMs ?? 0),
  ): Promise<ClusterAnswer<ClusterViewData[V]> | null> {
    const sources = SOURCES[view];
    const entries = await Promise.all(sources.map((source) => this.load(this.key(profile, source))));
    const now = this.clock.now();
    const data = {} as Partial<SourceData>;
    let fetchedAtMs = Number.POSITIVE_INFINITY;
    for (const [i, source] of sources.entries()) {
      const entry = entries[i];
      if (!entry || entry.fetchedAtMs === undefined || now - entry.fetchedAtMs > maxAgeMs) return null;
      (data as Record<Source, unknown>)[source] = entry.data;
      fetchedAtMs = Math.min(fetchedAtMs, entry.producedAtMs ?? entry.fetchedAtMs);
    }
    const stale = now - fetchedAtMs >= this.options.ttlMs;
    const staleReason = stale ? 'past its lifetime: nobody has viewed the cluster since' : null;
    return this.answerOf(profile, view, data as SourceData, fetchedAtMs, staleReason);
  }

  /** The view composed of its listings, aged from the oldest of them. */
  private answerOf<V extends ClusterViewName>(
    profile: string,
    view: V,
    data: SourceData,
    fetchedAtMs: number,
    staleReason: string | null,
  ): ClusterAnswer<ClusterViewData[V]> {
    return {
      profile,
      view,
      data: compose(view, data) as ClusterViewData[V],
      fetchedAt: new Date(fetchedAtMs),
      ageSec: Math.max(0, Math.round((this.clock.now() - fetchedAtMs) / 1000)),
      stale: staleReason !== null,
      staleReason,
    };
  }

  private key(profile: string, source: Source): string {
    return `${this.options.prefix}:cluster:${profile}:${source}`;
  }

  /** The listing's entry, read again upstream once it has expired; one read at a time per process. */
  private entry(profile: string, source: Source): Promise<Entry> {
    const key = this.key(profile, source);
    const running = this.inFlight.get(key);
    if (running) return running;
    const started = this.resolve(profile, source, key).finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, started);
    return started;
  }

  private fresh(entry: Entry | null): boolean {
    if (!entry) return false;
    const last = Math.max(entry.fetchedAtMs ?? 0, entry.failedAtMs ?? 0);
    return this.clock.now() - last < this.options.ttlMs;
  }

  private async load(key: string): Promise<Entry | null> {
    const text = await this.options.cache.get(key);
    return text === null ? null : (JSON.parse(text) as Entry);
  }

  private async resolve(profile: string, source: Source, key: string): Promise<Entry> {
    const cached = await this.load(key);
    if (this.fresh(cached)) return cached as Entry;
    const token = randomUUID();
    const deadline = this.clock.now() + this.lockMs;
    for (;;) {
      if (await this.options.cache.tryLock(`${key}:lock`, token, this.lockMs)) {
        try {
          // Another process may have read it between our look and our lock.
          const again = await this.load(key);
          if (this.fresh(again)) return again as Entry;
          return await this.fetch(profile, source, key, again);
        } finally {
          await this.options.cache.unlock(`${key}:lock`, token);
        }
      }
      // Another viewer is reading it: its answer (or its failure) is ours.
      await sleep(WAIT_POLL_MS);
      const seen = await this.load(key);
      if (this.fresh(seen)) return seen as Entry;
      if (this.clock.now() > deadline)
        return (
          seen ?? {
            error: {
              code: 'SCHEDFLOW_ERR_CLUSTER_VIEW_UNAVAILABLE',
              message: 'another reader is still waiting for the scheduler',
            },
          }
        );
    }
  }

  private async fetch(profile: string, source: Source, key: string, previous: Entry | null): Promise<Entry> {
    let entry: Entry;
    try {
      const { data, freshness } = await readSource(this.options.clientFor(profile), source);
      // The lifetime runs from the read; the view is as old as the answer (the proxy's may be older).
      entry = { fetchedAtMs: this.clock.now(), producedAtMs: freshness.producedAt.getTime(), data };
      if (freshness.stale) {
        entry.upstreamStale = `the scheduler's proxy served its cached answer of ${freshness.ageSec} s ago (the scheduler is unreachable behind it)`;
      }
    } catch (error) {
      const code = error instanceof SchedflowError ? error.code : 'SCHEDFLOW_ERR_INTERNAL';
      const message = error instanceof Error ? error.message : String(error);
      // The request budget is kept in Redis: its failure is a Redis outage, which the daemon's
      // Redis watch says once, not every read that meets it (as for the poll and the import).
      const level = error instanceof BudgetUnavailableError ? 'debug' : 'warn';
      this.options.logger[level]({ profile, source, code, err: message }, 'cluster view: read failed');
      entry = { ...(previous ?? {}), failedAtMs: this.clock.now(), error: { code, message } };
    }
    await this.options.cache.set(key, JSON.stringify(entry), this.keepMs);
    return entry;
  }
}

/**
 * One read of a listing. Not retried: viewers wait for it, and a failure serves the last answer
 * until the next lifetime's read. The proxy may answer from its cache while slurmctld is away.
 */
async function readSource(client: SchedClient, source: Source): Promise<{ data: unknown; freshness: Freshness }> {
  const options = { staleIfErrorSec: STALE_IF_ERROR_SEC, retry: false };
  switch (source) {
    case 'partitions':
      return client.listPartitions(options);
    case 'nodes':
      return client.listNodes(options);
    case 'reservations':
      return client.listReservations(options);
    case 'jobs': {
      // `update_time=0` (every job, as the plain listing) is a URL of the view's own: a proxy keeps
      // answers by URL, and the plain listing is the one the poll reads to learn how a job ended.
      // Read by the view first, it was served to the poll from the view's older copy (the job not
      // yet ended), and the end was recorded without its exit code and times.
      const { data, freshness } = await client.listJobs({ ...options, updateTime: 0 });
      return { data: { jobs: data.jobs, lastUpdate: data.lastUpdate }, freshness };
    }
  }
}

function compose(view: ClusterViewName, data: SourceData): ClusterViewData[ClusterViewName] {
  switch (view) {
    case 'partitions':
      return joinPartitions(data.partitions, data.nodes, data.jobs.jobs);
    case 'nodes':
      return joinNodes(data.nodes, data.jobs.jobs);
    case 'reservations':
      return data.reservations;
    case 'queue':
      return queueOf(data.jobs.jobs, data.jobs.lastUpdate);
  }
}
