import { setMaxListeners } from 'node:events';
import type { ConnectionOptions, Queue } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import { type DaemonConfig, retentionOf } from '../src/config/daemon-config.js';
import type { OpenedHistory } from '../src/db/open-history.js';
import { type Clock, systemClock } from '../src/lib/clock.js';
import type { HeapCollector } from '../src/lib/heap-collector.js';
import type { Lifecycle } from '../src/lifecycle.js';
import type { Logger } from '../src/logger.js';
import { WebhookSender } from '../src/notify/sender.js';
import type { WebhookSecret } from '../src/notify/webhook-secret.js';
import type { WebhookTargets } from '../src/notify/webhook-target.js';
import type { PipelineRegistry } from '../src/pipelines/pipeline-registry.js';
import type { RunEngineDeps } from '../src/pipelines/run-engine.js';
import type { QueueName } from '../src/queue/catalog.js';
import { startQueueWorker } from '../src/queue/queue-definition.js';
import { RedisClusterCache } from '../src/redis/cluster-cache.js';
import type { RedisWatch } from '../src/redis/redis-watch.js';
import type { AcceptDeps } from '../src/requests/accept.js';
import type { ClientRegistry } from '../src/sched/client-registry.js';
import { ClusterView } from '../src/sched/cluster-view.js';
import { createSummaryServices } from '../src/summaries/summaries-service.js';
import type { SummarySettings } from '../src/summaries/summary-settings.js';
import { QUEUES } from './queues.js';
import type { QueueSettings, WorkerServices } from './services.js';
import { promoteDelayedSubmits } from './submit.js';

export interface StartWorkersDeps {
  config: DaemonConfig;
  /** What the queues' definitions read (workers/queues.ts queueSettingsOf). */
  queueSettings: QueueSettings;
  history: OpenedHistory;
  clients: ClientRegistry;
  logger: Logger;
  lifecycle: Lifecycle;
  connection: ConnectionOptions;
  /** The daemon's producers, one per queue. */
  queues: Record<QueueName, Queue>;
  pipelines: PipelineRegistry;
  engine: RunEngineDeps;
  /** Where re-submissions are accepted. */
  requests: AcceptDeps;
  webhookSecret: WebhookSecret;
  /** Which hosts webhooks may be sent to. */
  webhookTargets: WebhookTargets;
  summarySettings: SummarySettings & { enabled: boolean };
  redisWatch: RedisWatch;
  /** Requests this process is submitting right now (the keeper's re-queue leaves them alone). */
  submitsInFlight: Set<string>;
  /** The daemon's heap collector: polls tell it of a mass start or end. */
  heap: HeapCollector;
  /** The daemon's clock. @defaultValue systemClock */
  clock?: Clock;
  /** The cluster's shared view the sampling tick reads. @defaultValue one on the queues' Redis */
  clusterView?: Pick<ClusterView, 'view'>;
}

/**
 * One worker per queue definition (the `worker` role), and their shutdown step: the grace
 * period, then aborted work is handed back to its queue.
 */
export function startWorkers(deps: StartWorkersDeps): void {
  const { config, history, clients, logger, lifecycle } = deps;
  const shutdown = new AbortController();
  // Every upstream request, backoff and wait in flight listens on it (and stops listening when it
  // ends): past ten at once (submissions, poll chunks, deliveries) Node printed a "possible
  // memory leak" warning to stderr, outside the JSON log, for what is the daemon's normal load.
  setMaxListeners(0, shutdown.signal);
  // Before any worker: it refuses an LLM key file others can read, and a worker made before
  // that throw would run on, with nothing left to close it.
  const summaries = createSummaryServices({
    settings: deps.summarySettings,
    store: history.store,
    logger,
    clients,
    protectedDirs: [config.dataDir, config.configDir],
    clock: deps.clock,
  });
  const webhooks = new WebhookSender({
    secret: deps.webhookSecret.secret,
    targets: deps.webhookTargets,
    timeoutMs: config.notifyTimeoutMs,
  });
  // The sampling tick reads the same cached answers as the API and UI (same Redis, same prefix):
  // a sample costs the scheduler a read only when no viewer has had one within the view's lifetime.
  const clusterRedis = deps.clusterView
    ? null
    : new Redis({ ...(deps.connection as RedisOptions), maxRetriesPerRequest: 1, lazyConnect: true });
  const clusterView =
    deps.clusterView ??
    new ClusterView({
      cache: new RedisClusterCache(clusterRedis as Redis),
      prefix: config.queuePrefix,
      clientFor: (profile) => clients.get(profile),
      ttlMs: config.clusterViewTtlMs,
      logger: logger.child({ component: 'cluster-view' }),
      clock: deps.clock,
    });
  clusterRedis?.on('error', (error) => deps.redisWatch.failed(error, 'cluster view'));
  const services: WorkerServices = {
    store: history.store,
    clients,
    clock: deps.clock ?? systemClock,
    logger: logger.child({ component: 'worker' }),
    rootLogger: logger,
    queues: deps.queues,
    shutdown: shutdown.signal,
    submitsInFlight: deps.submitsInFlight,
    heap: deps.heap,
    async onUpstreamBack(profile) {
      // Their backoff may be minutes away after an outage, and the scheduler answers again.
      await promoteDelayedSubmits(history.store, deps.queues.submit, profile, logger.child({ component: 'queue' }));
    },
    settings: {
      pollFloorMs: config.pollFloorMs,
      pollCeilingMs: config.pollCeilingMs,
      lostGraceMs: config.lostGraceMs,
      lostResubmits: config.lostResubmits,
      pendingDetailsEveryMs: config.pendingDetailsEveryMs,
      submitLimitRecheckMs: config.submitLimitRecheckMs,
      clusterSampleKeepMs: config.clusterSampleKeepMs,
      retention: retentionOf(config),
    },
    clusterView,
    webhooks,
    summaries,
    pipelines: deps.pipelines,
    engine: deps.engine,
    requests: deps.requests,
    jobReason: async (profile, jobId) => (await clients.get(profile).getJob(jobId)).data.reason,
  };
  const workerDeps = {
    connection: deps.connection,
    prefix: config.queuePrefix,
    logger: services.logger,
    onError: (error: Error, where: string) => deps.redisWatch.failed(error, where),
  };
  const workers = Object.values(QUEUES).map((definition) =>
    startQueueWorker(definition, deps.queueSettings, services, workerDeps),
  );
  lifecycle.add(
    'workers',
    async () => {
      // Running work gets the grace period to finish; then it is aborted and handed back to its queue.
      const timer = setTimeout(() => shutdown.abort(new Error('shutting down')), config.shutdownGraceMs);
      try {
        await Promise.all(workers.map((w) => w.close()));
      } finally {
        clearTimeout(timer);
        await webhooks.close();
        await summaries.close();
        clusterRedis?.disconnect();
      }
    },
    { timeoutMs: config.shutdownGraceMs + 5000 },
  );
}
