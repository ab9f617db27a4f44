import type { Queue } from 'bullmq';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { getProfileSync, type ProfileSyncRow } from '../../db/accounting.js';
import type { History } from '../../db/history.js';
import { requestCountsByState } from '../../db/requests.js';
import { PRUNED_TABLES, readPruneRecord } from '../../db/retention.js';
import { REQUEST_STATES } from '../../db/schema.js';
import { withTimeout } from '../../lib/with-timeout.js';
import type { Logger } from '../../logger.js';
import type { QueueName } from '../../queue/catalog.js';
import type { UpstreamHealth } from '../../sched/upstream-health.js';

/** BullMQ job states reported per queue. */
const QUEUE_STATES = [
  'waiting',
  'active',
  'delayed',
  'prioritized',
  'waiting-children',
  'failed',
  'completed',
] as const;
/** A scrape must answer even with Redis down: queue counts give up after this. */
const QUEUE_COUNT_TIMEOUT_MS = 1000;

export interface MetricsDeps {
  store: History;
  queues: Record<QueueName, Queue>;
  profiles: readonly string[];
  logger: Logger;
  /** What each profile's upstream has been answering (the client registry's). */
  upstreamHealth?: (profile: string) => UpstreamHealth | undefined;
}

/**
 * The daemon's Prometheus metrics, in a registry of its own (not prom-client's
 * global one, so several daemons in one process, as in tests, do not clash).
 * History and queue figures are read when scraped; API traffic is counted as
 * it comes.
 */
export class ApiMetrics {
  readonly registry = new Registry();
  readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  readonly httpDuration: Histogram<'method' | 'route'>;
  /** When each profile's poll was last seen succeeding (profile_sync keeps only the last poll). */
  readonly #lastOkPoll = new Map<string, number>();

  constructor(deps: MetricsDeps) {
    const registers = [this.registry];
    const profileSyncs = async () =>
      Promise.all(deps.profiles.map(async (profile) => [profile, await getProfileSync(deps.store, profile)] as const));
    const lastOkPoll = this.#lastOkPoll;
    const loopBlocks = processLoopBlocks();
    // A stall holds up the API, the UI, health checks and every queue worker at once.
    new Gauge({
      name: 'schedflow_event_loop_block_max_seconds',
      help: 'Longest the event loop was held up (by one synchronous piece of work) since the previous scrape',
      registers,
      collect() {
        this.set(loopBlocks.takeMaxMs() / 1000);
      },
    });
    new Gauge({
      name: 'schedflow_process_memory_bytes',
      help: "The daemon's memory: resident (rss), the JavaScript heap's size and use (heap_total, heap_used), and memory outside it (external, of which array_buffers)",
      labelNames: ['kind'],
      registers,
      collect() {
        const m = process.memoryUsage();
        this.set({ kind: 'rss' }, m.rss);
        this.set({ kind: 'heap_total' }, m.heapTotal);
        this.set({ kind: 'heap_used' }, m.heapUsed);
        this.set({ kind: 'external' }, m.external);
        this.set({ kind: 'array_buffers' }, m.arrayBuffers);
      },
    });
    this.httpRequests = new Counter({
      name: 'schedflow_api_requests_total',
      help: 'Local API requests answered, by route and status',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.httpDuration = new Histogram({
      name: 'schedflow_api_request_duration_seconds',
      help: 'Time to answer local API requests',
      labelNames: ['method', 'route'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    new Gauge({
      name: 'schedflow_requests',
      help: 'Job requests in the history, by state',
      labelNames: ['state'],
      registers,
      async collect() {
        const counts = new Map((await requestCountsByState(deps.store)).map((r) => [r.state, r.count]));
        for (const state of REQUEST_STATES) this.set({ state }, counts.get(state) ?? 0);
      },
    });
    // Every process's prunes of the shared history, as recorded in it (src/db/retention.ts).
    new Gauge({
      name: 'schedflow_history_pruned_rows_total',
      help: 'Rows removed from the history by retention since it was made, by table',
      labelNames: ['table'],
      registers,
      async collect() {
        const record = await readPruneRecord(deps.store);
        for (const table of PRUNED_TABLES) this.set({ table }, record?.totals[table] ?? 0);
      },
    });
    new Gauge({
      name: 'schedflow_history_last_prune_timestamp_seconds',
      help: 'When the history was last pruned (0: never)',
      registers,
      async collect() {
        this.set(((await readPruneRecord(deps.store))?.lastAt ?? 0) / 1000);
      },
    });
    new Gauge({
      name: 'schedflow_queue_jobs',
      help: 'BullMQ jobs per queue and state (absent when Redis does not answer)',
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        this.reset();
        await Promise.all(
          Object.entries(deps.queues).map(async ([name, queue]) => {
            try {
              const counts = await withTimeout(queue.getJobCounts(...QUEUE_STATES), QUEUE_COUNT_TIMEOUT_MS);
              for (const state of QUEUE_STATES) this.set({ queue: name, state }, counts[state] ?? 0);
            } catch (error) {
              deps.logger.debug({ queue: name, err: error }, 'queue counts unavailable');
            }
          }),
        );
      },
    });
    new Gauge({
      name: 'schedflow_profile_seconds_since_successful_poll',
      help: "Seconds since each profile's last successful poll (+Inf when none was seen)",
      labelNames: ['profile'],
      registers,
      async collect() {
        const syncs = await profileSyncs();
        const now = Date.now();
        for (const [profile, sync] of syncs) {
          // A failed poll overwrites last_poll_at; the last success seen by a scrape stands in for it.
          if (sync?.lastPollOk && sync.lastPollAt !== null) lastOkPoll.set(profile, sync.lastPollAt);
          const at = lastOkPoll.get(profile);
          this.set({ profile }, at === undefined ? Number.POSITIVE_INFINITY : (now - at) / 1000);
        }
      },
    });
    const upstream = () =>
      deps.profiles.flatMap((profile) => {
        const health = deps.upstreamHealth?.(profile);
        return health ? [health] : [];
      });
    // Counted by the transport as requests go; a scrape copies the totals (so they are counters
    // that only grow, for rate()). Endpoints are fixed names, never ids: bounded cardinality.
    new Counter({
      name: 'schedflow_upstream_requests_total',
      help: "Requests to each profile's scheduler, by endpoint (submit, jobs_state, accounting, …) and HTTP status ('error' when no answer came)",
      labelNames: ['profile', 'endpoint', 'status'],
      registers,
      collect() {
        this.reset();
        for (const health of upstream()) {
          for (const [key, count] of health.requests) {
            const [endpoint, status] = key.split(' ');
            this.inc({ profile: health.profile, endpoint, status }, count);
          }
        }
      },
    });
    new Counter({
      name: 'schedflow_upstream_stale_answers_total',
      help: 'Answers the proxy served from its cache past their lifetime (stale-if-error: the scheduler behind it did not answer), by endpoint',
      labelNames: ['profile', 'endpoint'],
      registers,
      collect() {
        this.reset();
        for (const health of upstream()) {
          for (const [endpoint, count] of health.staleAnswers) this.inc({ profile: health.profile, endpoint }, count);
        }
      },
    });
    new Gauge({
      name: 'schedflow_upstream_fresh_answer_age_seconds',
      help: "Age of the freshest fresh (not stale) answer from each profile's scheduler (+Inf before one): grows through an outage even while stale answers come",
      labelNames: ['profile'],
      registers,
      collect() {
        const now = Date.now();
        for (const health of upstream()) {
          const at = health.freshestAnswerAtMs;
          this.set({ profile: health.profile }, at === null ? Number.POSITIVE_INFINITY : Math.max(0, now - at) / 1000);
        }
      },
    });
    new Gauge({
      name: 'schedflow_upstream_serving_stale',
      help: "1 while some endpoint of each profile's scheduler answers only stale (cached) answers, 0 otherwise",
      labelNames: ['profile'],
      registers,
      collect() {
        for (const health of upstream()) this.set({ profile: health.profile }, health.staleSince() === null ? 0 : 1);
      },
    });
    // A profile's yes/no of the history as 1 or 0 (absent before the first answer).
    const profileFlag = (name: string, help: string, flag: (sync: ProfileSyncRow) => boolean | null) =>
      new Gauge({
        name,
        help,
        labelNames: ['profile'],
        registers,
        async collect() {
          // Read before the reset, so that the gauge is never seen half set.
          const syncs = await profileSyncs();
          this.reset();
          for (const [profile, sync] of syncs) {
            const value = sync ? flag(sync) : null;
            if (value !== null) this.set({ profile }, value ? 1 : 0);
          }
        },
      });
    profileFlag(
      'schedflow_profile_last_poll_ok',
      "1 when each profile's last poll succeeded, 0 when it failed (absent before the first)",
      (sync) => sync.lastPollOk,
    );
    profileFlag(
      'schedflow_profile_accounting_ok',
      "1 when each profile's last accounting answer came, 0 when accounting failed (jobs followed with controller data alone)",
      (sync) => sync.accountingOk,
    );
  }
}

/** How often the event loop is sampled for blocks. */
const LOOP_SAMPLE_MS = 10;

/**
 * The longest the event loop was held up since the last call: a 10 ms timer that notes how late
 * it fires. One for the process. (Node's monitorEventLoopDelay stopped recording when the tests
 * ran several daemons in one process.)
 */
class LoopBlockMonitor {
  #max = 0;
  #last = performance.now();

  constructor() {
    setInterval(() => {
      const now = performance.now();
      this.#max = Math.max(this.#max, now - this.#last - LOOP_SAMPLE_MS);
      this.#last = now;
    }, LOOP_SAMPLE_MS).unref();
  }

  /** Milliseconds of the longest block since the last call, the one still under way included. */
  takeMaxMs(): number {
    const max = Math.max(this.#max, performance.now() - this.#last - LOOP_SAMPLE_MS, 0);
    this.#max = 0;
    return max;
  }
}

let loopBlocks: LoopBlockMonitor | undefined;
const processLoopBlocks = () => {
  loopBlocks ??= new LoopBlockMonitor();
  return loopBlocks;
};
