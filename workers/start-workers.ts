import { setMaxListeners } from 'node:events';
import { type ConnectionOptions, type Queue, Worker } from 'bullmq';
import type { DaemonConfig } from '../src/config/daemon-config.js';
import type { OpenedHistory } from '../src/db/open-history.js';
import type { HeapCollector } from '../src/lib/heap-collector.js';
import type { Lifecycle } from '../src/lifecycle.js';
import type { Logger } from '../src/logger.js';
import { DeliveryDispatcher } from '../src/notify/delivery-dispatcher.js';
import { WebhookSender } from '../src/notify/sender.js';
import type { WebhookSecret } from '../src/notify/webhook-secret.js';
import type { WebhookTargets } from '../src/notify/webhook-target.js';
import type { PipelineRegistry } from '../src/pipelines/pipeline-registry.js';
import type { RunEngineDeps } from '../src/pipelines/run-engine.js';
import { promoteDelayedSubmits } from '../src/queue/submit-queue.js';
import type { RedisWatch } from '../src/redis/redis-watch.js';
import type { AcceptDeps } from '../src/requests/accept.js';
import type { ClientRegistry } from '../src/sched/client-registry.js';
import { createSummaryServices } from '../src/summaries/summaries-service.js';
import type { SummarySettings } from '../src/summaries/summary-settings.js';
import { notifyProcessor, recordDeliveryGivenUp, webhookBackoffStrategy } from './notify.js';
import { pipelineProcessor } from './pipeline.js';
import { pollProcessor } from './poll.js';
import { reconcileProcessor } from './reconcile.js';
import type { WorkerServices } from './services.js';
import { recordSubmitGivenUp, submitProcessor } from './submit.js';
import { recordSummaryGivenUp, summarizeProcessor, summaryBackoffStrategy } from './summarize.js';

export interface StartWorkersDeps {
  config: DaemonConfig;
  history: OpenedHistory;
  clients: ClientRegistry;
  logger: Logger;
  lifecycle: Lifecycle;
  profileCount: number;
  connection: ConnectionOptions;
  pipelines: PipelineRegistry;
  engine: RunEngineDeps;
  /** Where re-submissions are accepted. */
  requests: AcceptDeps;
  notifyQueue: Queue;
  webhookSecret: WebhookSecret;
  /** Which hosts webhooks may be sent to. */
  webhookTargets: WebhookTargets;
  summarySettings: SummarySettings & { enabled: boolean };
  summarizeQueue: Queue;
  submitQueue: Queue;
  redisWatch: RedisWatch;
  /** Requests this process is submitting right now (the keeper's re-queue leaves them alone). */
  submitsInFlight: Set<string>;
  /** The daemon's heap collector: polls tell it of a mass start or end. */
  heap: HeapCollector;
}

/**
 * One worker per queue (the `worker` role), and their shutdown step: the grace period, then
 * aborted work is handed back to its queue.
 */
export function startWorkers(deps: StartWorkersDeps): void {
  const { config, history, clients, logger, lifecycle, profileCount, connection } = deps;
  const prefix = config.queuePrefix;
  const shutdown = new AbortController();
  // Every upstream request, backoff and wait in flight listens on it (and stops listening when it
  // ends): past ten at once (submissions, poll chunks, deliveries) Node printed a "possible
  // memory leak" warning to stderr, outside the JSON log, for what is the daemon's normal load.
  setMaxListeners(0, shutdown.signal);
  const services: WorkerServices = {
    store: history.store,
    clients,
    logger: logger.child({ component: 'worker' }),
    shutdown: shutdown.signal,
    submitsInFlight: deps.submitsInFlight,
    heap: deps.heap,
    async onUpstreamBack(profile) {
      const promoted = await promoteDelayedSubmits(history.store, deps.submitQueue, profile);
      if (promoted > 0) logger.info({ profile, promoted }, 'scheduler answers again: waiting submissions retried now');
    },
    settings: {
      pollFloorMs: config.pollFloorMs,
      pollCeilingMs: config.pollCeilingMs,
      lostGraceMs: config.lostGraceMs,
      submitLimitRecheckMs: config.submitLimitRecheckMs,
    },
  };
  // Before any worker: it refuses an LLM key file others can read, and a worker made before
  // that throw would run on, with nothing left to close it.
  const summaries = createSummaryServices({
    settings: deps.summarySettings,
    store: history.store,
    logger,
    queue: deps.summarizeQueue,
    clients,
    protectedDirs: [config.dataDir, config.configDir],
  });
  const submitWorker = new Worker('submit', submitProcessor(services), {
    connection,
    prefix,
    concurrency: config.submitConcurrency,
    // A submit whose worker died is taken up again once its lock expires (found
    // within about two lock durations). Running it again is safe (the marker),
    // so a few crashes in a row do not fail the request.
    lockDuration: config.lockDurationMs,
    stalledInterval: config.lockDurationMs,
    maxStalledCount: 5,
  });
  submitWorker.on('failed', (job, error) => {
    if (!job) return;
    recordSubmitGivenUp(history.store, services.logger, job, error).catch((failure: unknown) =>
      services.logger.error({ err: failure, jobId: job.id }, 'could not record a submission given up by the queue'),
    );
  });
  const sender = new WebhookSender({
    secret: deps.webhookSecret.secret,
    targets: deps.webhookTargets,
    timeoutMs: config.notifyTimeoutMs,
  });
  const notifyLogger = logger.child({ component: 'notify' });
  const notifyWorker = new Worker(
    'notify',
    notifyProcessor({
      store: history.store,
      sender,
      dispatcher: new DeliveryDispatcher({
        store: history.store,
        queue: deps.notifyQueue,
        logger: notifyLogger,
        settings: { attempts: config.notifyAttempts, backoffMs: config.notifyBackoffMs },
      }),
      logger: notifyLogger,
      shutdown: shutdown.signal,
    }),
    { connection, prefix, concurrency: 4, settings: { backoffStrategy: webhookBackoffStrategy } },
  );
  notifyWorker.on('failed', (job, error) => {
    if (!job) return;
    recordDeliveryGivenUp(history.store, notifyLogger, job, error).catch((failure: unknown) =>
      notifyLogger.error({ err: failure, jobId: job.id }, 'could not record a webhook delivery given up by the queue'),
    );
  });
  const summarizeWorker = new Worker(
    'summarize',
    summarizeProcessor({
      store: history.store,
      summarizer: summaries.summarizer,
      dispatcher: summaries.dispatcher,
      logger: summaries.logger,
      requests: deps.requests,
      shutdown: shutdown.signal,
    }),
    {
      connection,
      prefix,
      // One more than the LLM calls in flight, so the dispatch tick never waits behind them.
      concurrency: deps.summarySettings.concurrency + 1,
      settings: { backoffStrategy: summaryBackoffStrategy },
    },
  );
  summarizeWorker.on('failed', (job, error) => {
    if (!job) return;
    recordSummaryGivenUp(summaries.summarizer, summaries.logger, job, error).catch((failure: unknown) =>
      summaries.logger.error({ err: failure, jobId: job.id }, 'could not record a summary given up by the queue'),
    );
  });
  const workers = [
    submitWorker,
    new Worker('poll', pollProcessor(services), { connection, prefix, concurrency: Math.max(1, profileCount) }),
    new Worker('reconcile', reconcileProcessor(services), { connection, prefix, concurrency: 1 }),
    // One at a time: runs advance, ticks fire and queued runs start in order.
    new Worker(
      'pipeline',
      pipelineProcessor({
        registry: deps.pipelines,
        engine: deps.engine,
        logger: logger.child({ component: 'pipelines' }),
        jobReason: async (profile, jobId) => (await clients.get(profile).getJob(jobId)).data.reason,
      }),
      { connection, prefix, concurrency: 1 },
    ),
    notifyWorker,
    summarizeWorker,
  ];
  for (const worker of workers) {
    worker.on('failed', (job, error) =>
      services.logger.warn(
        { queue: worker.name, jobId: job?.id, attempts: job?.attemptsMade, err: error },
        'job attempt failed',
      ),
    );
    worker.on('error', (error) => deps.redisWatch.failed(error, `worker ${worker.name}`));
  }
  // The grace period, then aborted work is handed back to its queue: that gets a few seconds more.
  lifecycle.add(
    'workers',
    async () => {
      // Running work gets the grace period to finish; then it is aborted and handed back to its queue.
      const timer = setTimeout(() => shutdown.abort(new Error('shutting down')), config.shutdownGraceMs);
      try {
        await Promise.all(workers.map((w) => w.close()));
      } finally {
        clearTimeout(timer);
        await sender.close();
        await summaries.close();
      }
    },
    { timeoutMs: config.shutdownGraceMs + 5000 },
  );
}
