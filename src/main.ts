import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { type ConnectionOptions, Queue, Worker } from 'bullmq';
import { notifyProcessor, recordDeliveryGivenUp, webhookBackoffStrategy } from '../workers/notify.js';
import { pipelineProcessor } from '../workers/pipeline.js';
import { pollProcessor } from '../workers/poll.js';
import { reconcileProcessor } from '../workers/reconcile.js';
import type { WorkerServices } from '../workers/services.js';
import { recordSubmitGivenUp, requeueUnsubmitted, submitProcessor } from '../workers/submit.js';
import { startApiServer } from './api/server.js';
import { type DaemonConfig, isAllInOne } from './config/daemon-config.js';
import { type HistoryDatabase, openDatabase } from './db/database.js';
import { createRequest, getRequest, patchRequest, transition } from './db/requests.js';
import type { Deadlines } from './db/schema.js';
import { ConfigError } from './errors.js';
import { HeapCollector } from './lib/heap-collector.js';
import { ensureOwnerOnlyDir, writeOwnerOnlyFile } from './lib/owner-only.js';
import { takePidLock } from './lib/pid-lock.js';
import { Lifecycle, StopRequestedError } from './lifecycle.js';
import type { Logger } from './logger.js';
import { DeliveryDispatcher, DISPATCH_JOB } from './notify/dispatcher.js';
import { WebhookSender } from './notify/sender.js';
import { loadWebhookSecret, type WebhookSecret } from './notify/webhook-secret.js';
import { PipelineRegistry } from './pipelines/pipeline-registry.js';
import type { RunEngineDeps } from './pipelines/run-engine.js';
import { JOB_OPTIONS, type QueueName } from './queue/catalog.js';
import { QueueKeeper, type SchedulerSpec } from './queue/queue-keeper.js';
import { enqueueSubmit, promoteDelayedSubmits, type SubmitQueueDeps } from './queue/submit-queue.js';
import { type RedisTarget, redisOptions, startPrivateRedis } from './redis/redis-server.js';
import { RedisWatch } from './redis/redis-watch.js';
import type { JobSpec } from './sched/job-spec.js';
import { loadProfiles, type Profile, parseProfile } from './sched/profile.js';
import { ensureDemoToken } from './sim/demo-token.js';
import { DEMO_LLM_MODEL, ensureDemoLlmKey } from './sim/llm/demo-llm-key.js';
import { parseSimConfig } from './sim/sim-config.js';
import { SimServer } from './sim/sim-server.js';
import { SUMMARY_DISPATCH_JOB } from './summaries/dispatcher.js';
import { applySuggestion } from './summaries/resubmit.js';
import {
  resolveSummarySettings,
  type SummariesStatus,
  startSummaryWorker,
  summariesStatus,
} from './summaries/summaries-service.js';
import type { SummarySettings } from './summaries/summary-settings.js';
import { ClientRegistry } from './sched/client-registry.js';
import { loadUiPassword } from './ui/ui-password.js';

/** What `schedflow start` runs, and what tests and the local API hold on to. */
export interface Daemon {
  config: DaemonConfig;
  history: HistoryDatabase;
  profiles: ReadonlyMap<string, Profile>;
  redis: RedisTarget;
  /** URL of the embedded simulator when no scheduler is configured. */
  simUrl: string | null;
  /** Base URL the local API is bound to (`web` role), e.g. `http://127.0.0.1:8080`; null without it. */
  apiUrl: string | null;
  /** One connected scheduler client per profile (cancel, readiness). */
  clients: ClientRegistry;
  queues: Record<QueueName, Queue>;
  /** The pipeline files of the pipelines folder: listing and triggering runs. */
  pipelines: PipelineRegistry;
  /** Records a request and queues its submission; returns the request id. */
  submit(input: {
    profile?: string;
    spec: JobSpec;
    origin: 'api' | 'cli' | 'pipeline';
    requestId?: string;
    /** POSTed, signed, when the request ends. */
    webhookUrl?: string | null;
    deadlines?: Deadlines | null;
    /** A summary when it ends: true or false; null or absent follows the global setting. */
    summarize?: boolean | null;
  }): Promise<string>;
  /** How summaries run: the global setting and the LLM endpoint, if any. */
  summaries: SummariesStatus;
  /**
   * Applies the suggestion of a request's summary: a new request with the changed spec,
   * linked to it, is queued (once; again returns the same id). ConfigError when there is none.
   * `newRequestId` names the new request (the local API's Idempotency-Key); default a new UUID.
   */
  resubmitWithSuggestion(requestId: string, newRequestId?: string): Promise<string>;
  stop(): Promise<void>;
}

/** Written to the data dir so commands (`schedflow jobs`) find the running daemon. */
export interface DaemonInfo {
  pid: number;
  redis: RedisTarget;
  queuePrefix: string;
  historyFile: string;
  profiles: string[];
  defaultProfile: string;
}

export const DAEMON_INFO_FILE = 'daemon.json';

/**
 * The composition root: config → history (migrated) → Redis → scheduler
 * clients → queues → workers. Everything else lives where its path says.
 * Shutdown runs the same steps in reverse.
 */
export async function startDaemon(
  config: DaemonConfig,
  logger: Logger,
  /** Whose signal handlers are installed before the start, so a signal during it stops what has started. */
  lifecycle = new Lifecycle(logger),
): Promise<Daemon> {
  try {
    return await lifecycle.track(compose(config, logger, lifecycle));
  } catch (error) {
    await lifecycle.stop();
    throw error;
  }
}

async function compose(config: DaemonConfig, logger: Logger, lifecycle: Lifecycle): Promise<Daemon> {
  // Before anything is written there: job scripts, environment values and webhook URLs go in.
  ensureOwnerOnlyDir(config.dataDir, 'data dir');
  if (!config.redisUrl) {
    // One daemon owns a data dir's private Redis: a second would reuse it, then stop it on its
    // way out, under the first. It is refused before it touches anything else.
    const lock = takePidLock(join(config.dataDir, 'daemon.pid'));
    if (!lock.held) {
      throw new ConfigError(
        `data dir ${config.dataDir} is in use by another schedflow daemon (pid ${lock.holder}): stop it, or start this one with another --data-dir`,
      );
    }
    lifecycle.add('data dir lock', async () => lock.release());
  }
  // The private Redis starts before the history opens, so it stops after it closes: last but
  // the lock. Workers hand their jobs back to it during the shutdown; a Redis that takes long
  // to flush does not keep SQLite open.
  let redis: RedisTarget;
  if (config.redisUrl) {
    redis = { url: config.redisUrl };
  } else {
    const own = await startPrivateRedis(config.dataDir, logger.child({ component: 'redis' }));
    // Its own stop waits up to 10 s for redis-server to flush its append-only file.
    lifecycle.add('redis-server', () => own.stop(), { timeoutMs: 12_000 });
    redis = own.target;
  }
  const history = openDatabase(join(config.dataDir, 'history.sqlite'));
  lifecycle.add('history', async () => history.close());

  let profiles = loadProfiles(join(config.configDir, 'profiles'));
  let simUrl: string | null = null;
  let demoLlm: { url: string; keyFile: string; model: string } | null = null;
  if (profiles.size === 0) {
    if (!isAllInOne(config.roles)) {
      throw new ConfigError(
        `no scheduler profile in ${join(config.configDir, 'profiles')}: processes with separate roles need one (the embedded simulator runs only in the all-in-one start)`,
      );
    }
    const sim = await startEmbeddedSimulator(config, logger);
    // It ends the jobs it runs (SIGTERM, then SIGKILL after its KillWait).
    lifecycle.add('simulator', () => sim.server.stop(), { timeoutMs: 10_000 });
    simUrl = sim.url;
    profiles = new Map([[sim.profile.name, sim.profile]]);
    demoLlm = { url: sim.url, keyFile: sim.llmKeyFile, model: DEMO_LLM_MODEL };
  }
  const summarySettings = resolveSummarySettings(config.summaries, demoLlm);

  const clients = new ClientRegistry(profiles, logger.child({ component: 'sched' }));
  lifecycle.add('scheduler clients', () => clients.close());
  await clients.start();

  // ioredis options; BullMQ's own type for them is looser but not nominally the same.
  const connection = redisOptions(redis) as ConnectionOptions;
  const prefix = config.queuePrefix;
  const queues = {
    submit: new Queue('submit', { connection, prefix, defaultJobOptions: JOB_OPTIONS.submit }),
    poll: new Queue('poll', { connection, prefix, defaultJobOptions: JOB_OPTIONS.poll }),
    reconcile: new Queue('reconcile', { connection, prefix, defaultJobOptions: JOB_OPTIONS.reconcile }),
    pipeline: new Queue('pipeline', { connection, prefix, defaultJobOptions: JOB_OPTIONS.pipeline }),
    notify: new Queue('notify', { connection, prefix, defaultJobOptions: JOB_OPTIONS.notify }),
    summarize: new Queue('summarize', { connection, prefix, defaultJobOptions: JOB_OPTIONS.summarize }),
  } satisfies Record<QueueName, Queue>;
  const redisWatch = new RedisWatch(redis, logger.child({ component: 'redis' }));
  lifecycle.add('redis watch', async () => redisWatch.close());
  const heap = new HeapCollector(logger.child({ component: 'memory' }));
  lifecycle.add('heap collector', async () => heap.stop());
  for (const [name, queue] of Object.entries(queues))
    queue.on('error', (error) => redisWatch.failed(error, `queue ${name}`));
  lifecycle.add('queues', async () => {
    await Promise.all(Object.values(queues).map((q) => q.close()));
  });

  // Filled in once the keeper exists: producers ask it to requeue what Redis did not take.
  let keeper: QueueKeeper | undefined;
  const submitQueue: SubmitQueueDeps = {
    db: history.db,
    queue: queues.submit,
    logger: logger.child({ component: 'queue' }),
    redisReachable: () => redisWatch.reachable,
    sweepLater: () => keeper?.sweepLater(),
  };
  const submitsInFlight = new Set<string>();
  const engine: RunEngineDeps = {
    db: history.db,
    logger: logger.child({ component: 'pipelines' }),
    enqueueSubmit: async (requestId, source) => {
      await enqueueSubmit(submitQueue, requestId, source);
    },
    cancelJob: async (profile, jobId) => {
      await clients.get(profile).cancel(jobId);
    },
  };
  const pipelines = new PipelineRegistry({
    dir: config.pipelinesDir,
    context: { profiles, defaultProfile: [...profiles.keys()][0] },
    engine,
    queue: queues.pipeline,
    logger: logger.child({ component: 'pipelines' }),
  });
  await pipelines.load();
  lifecycle.add('pipeline files', async () => pipelines.close());
  const ticks = config.roles.includes('scheduler') ? tickSchedulers(queues, profiles, config) : [];
  for (const tick of ticks) await tick.queue.upsertJobScheduler(tick.id, tick.repeat, tick.template);
  if (config.roles.includes('scheduler')) {
    await pipelines.syncSchedules();
    pipelines.watch(() => pipelines.syncSchedules());
  } else {
    pipelines.watch();
  }
  // Made at first start even before the first webhook, so receivers can be set up beforehand.
  const webhookSecret = loadWebhookSecret(config.dataDir, config.webhookSecret);
  logger.info({ secretFrom: webhookSecret.source }, 'webhooks are signed with the secret in %s', webhookSecret.source);
  if (config.roles.includes('worker')) {
    startWorkers({
      config,
      history,
      clients,
      logger,
      lifecycle,
      profileCount: profiles.size,
      connection,
      pipelines,
      engine,
      notifyQueue: queues.notify,
      webhookSecret,
      summarySettings,
      summarizeQueue: queues.summarize,
      submitQueue: queues.submit,
      redisWatch,
      submitsInFlight,
    });
  }

  await requeueUnsubmitted(history.db, queues.submit, logger);
  // Redis may lose everything under a running daemon (restarted without its data): the keeper
  // notices on its next check and rebuilds the ticks and the queue from the history.
  keeper = new QueueKeeper({
    logger: logger.child({ component: 'queue' }),
    everyMs: config.pollFloorMs,
    schedulers: ticks,
    ensurePipelineSchedules: config.roles.includes('scheduler') ? () => pipelines.ensureSchedules() : undefined,
    requeue: () => requeueUnsubmitted(history.db, queues.submit, logger, submitsInFlight, config.lockDurationMs),
    redisReachable: () => redisWatch.reachable,
  });
  redisWatch.onReconnect(keeper.reconnected);
  keeper.start();
  const runningKeeper = keeper;
  lifecycle.add('queue keeper', () => runningKeeper.close());

  const defaultProfile = [...profiles.keys()][0] as string;
  const info: DaemonInfo = {
    pid: process.pid,
    redis,
    queuePrefix: prefix,
    historyFile: history.file,
    profiles: [...profiles.keys()],
    defaultProfile,
  };
  writeOwnerOnlyFile(join(config.dataDir, DAEMON_INFO_FILE), JSON.stringify(info, null, 2));

  const daemon: Daemon = {
    config,
    history,
    profiles,
    redis,
    simUrl,
    apiUrl: null,
    clients,
    queues,
    pipelines,
    async submit(input) {
      const profile = input.profile ?? defaultProfile;
      if (!profiles.has(profile)) throw new Error(`no scheduler profile "${profile}"`);
      const id = input.requestId ?? randomUUID();
      const now = Date.now();
      history.db.transaction((tx) => {
        createRequest(tx, {
          id,
          profile,
          name: input.spec.name,
          spec: input.spec,
          origin: input.origin,
          at: now,
          source: input.origin === 'cli' ? 'cli' : 'api',
          webhookUrl: input.webhookUrl ?? null,
          deadlines: input.deadlines ?? null,
        });
        if (input.summarize !== undefined && input.summarize !== null) {
          patchRequest(tx, id, { summarize: input.summarize });
        }
        // In the same commit (one write of the history per request accepted, not two).
        transition(tx, id, { to: 'queued', source: input.origin === 'cli' ? 'cli' : 'api', at: now });
      });
      // Recorded, then queued: a Redis outage answers within ENQUEUE_WAIT_MS, the request kept as queued.
      await enqueueSubmit(submitQueue, id, input.origin === 'cli' ? 'cli' : 'api');
      return id;
    },
    summaries: summariesStatus(summarySettings),
    async resubmitWithSuggestion(requestId, newRequestId) {
      const made = applySuggestion(history.db, {
        requestId,
        newRequestId: newRequestId ?? randomUUID(),
        at: Date.now(),
        origin: 'api',
      });
      // Also when an earlier call recorded the request but did not get to queue it.
      if (made.created || getRequest(history.db, made.requestId)?.state === 'accepted') {
        await enqueueSubmit(submitQueue, made.requestId, 'api');
      }
      return made.requestId;
    },
    stop: () => lifecycle.stop(),
  };

  // Last to start, so the first to stop: new requests get 503 and those under way
  // finish before the workers and queues they use close.
  if (config.roles.includes('web')) {
    const api = await startApiServer({
      db: history.db,
      logger,
      profiles,
      clients,
      queues,
      pipelines,
      submit: (input) => daemon.submit(input),
      resubmit: (requestId, newRequestId) => daemon.resubmitWithSuggestion(requestId, newRequestId),
      redis,
      listen: config.listen,
      settings: {
        rateLimitPerMin: config.apiRateLimitPerMin,
        bodyLimitBytes: 1024 * 1024,
        pollCeilingMs: config.pollCeilingMs,
      },
      ui: {
        password: loadUiPassword(config.dataDir, config.uiPassword),
        protectedDirs: [config.dataDir, config.configDir],
      },
    });
    // Requests under way finish; one that hangs (a client that never reads) is not waited for.
    lifecycle.add('local API', () => api.close(), { timeoutMs: 5000 });
    daemon.apiUrl = api.url;
    logger.info({ url: `${api.url}/ui` }, 'admin web UI at %s/ui (log in with a token or the UI password)', api.url);
  }
  // A signal after the last add(): not reported as started, it is being stopped.
  if (lifecycle.stopRequested) throw new StopRequestedError();
  return daemon;
}

/**
 * Job schedulers tick the periodic work, so several schedflow processes never tick twice.
 * Created at start and put back by the QueueKeeper whenever Redis lost them.
 */
function tickSchedulers(
  queues: Record<QueueName, Queue>,
  profiles: ReadonlyMap<string, Profile>,
  config: DaemonConfig,
): SchedulerSpec[] {
  const ticks: SchedulerSpec[] = [];
  for (const name of profiles.keys()) {
    ticks.push(
      {
        queue: queues.poll,
        id: `poll:${name}`,
        repeat: { every: config.pollFloorMs },
        template: { name: 'poll', data: { profile: name } },
      },
      {
        queue: queues.reconcile,
        id: `reconcile:${name}`,
        repeat: { every: config.reconcileEveryMs },
        template: { name: 'reconcile', data: { profile: name } },
      },
    );
  }
  // A dispatch that fails is not retried: the next tick, a second later, does it again.
  const once = { attempts: 1, removeOnComplete: true, removeOnFail: { count: 100 } };
  ticks.push(
    {
      queue: queues.pipeline,
      id: 'tick:pipelines',
      repeat: { every: config.pipelineTickMs },
      template: { name: 'tick', data: {} },
    },
    {
      queue: queues.notify,
      id: 'tick:notify',
      repeat: { every: config.notifyEveryMs },
      template: { name: DISPATCH_JOB, data: {}, opts: once },
    },
    {
      queue: queues.summarize,
      id: 'tick:summaries',
      repeat: { every: config.summaries.dispatchEveryMs },
      template: { name: SUMMARY_DISPATCH_JOB, data: {}, opts: once },
    },
  );
  return ticks;
}

function startWorkers(deps: {
  config: DaemonConfig;
  history: HistoryDatabase;
  clients: ClientRegistry;
  logger: Logger;
  lifecycle: Lifecycle;
  profileCount: number;
  connection: ConnectionOptions;
  pipelines: PipelineRegistry;
  engine: RunEngineDeps;
  notifyQueue: Queue;
  webhookSecret: WebhookSecret;
  summarySettings: SummarySettings & { enabled: boolean };
  summarizeQueue: Queue;
  submitQueue: Queue;
  redisWatch: RedisWatch;
  submitsInFlight: Set<string>;
}): void {
  const { config, history, clients, logger, lifecycle, profileCount, connection } = deps;
  const prefix = config.queuePrefix;
  const shutdown = new AbortController();
  const services: WorkerServices = {
    db: history.db,
    clients,
    logger: logger.child({ component: 'worker' }),
    shutdown: shutdown.signal,
    submitsInFlight: deps.submitsInFlight,
    async onUpstreamBack(profile) {
      const promoted = await promoteDelayedSubmits(history.db, deps.submitQueue, profile);
      if (promoted > 0) logger.info({ profile, promoted }, 'scheduler answers again: waiting submissions retried now');
    },
    settings: {
      pollFloorMs: config.pollFloorMs,
      pollCeilingMs: config.pollCeilingMs,
      lostGraceMs: config.lostGraceMs,
      submitLimitRecheckMs: config.submitLimitRecheckMs,
    },
  };
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
    if (job) recordSubmitGivenUp(history.db, services.logger, job, error);
  });
  const sender = new WebhookSender({ secret: deps.webhookSecret.secret, timeoutMs: config.notifyTimeoutMs });
  const notifyLogger = logger.child({ component: 'notify' });
  const notifyWorker = new Worker(
    'notify',
    notifyProcessor({
      db: history.db,
      sender,
      dispatcher: new DeliveryDispatcher({
        db: history.db,
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
    if (job) recordDeliveryGivenUp(history.db, notifyLogger, job, error);
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
  ];
  const summaries = startSummaryWorker({
    settings: deps.summarySettings,
    db: history.db,
    logger,
    connection,
    prefix,
    queue: deps.summarizeQueue,
    clients,
    enqueueSubmit: deps.engine.enqueueSubmit,
    shutdown: shutdown.signal,
    protectedDirs: [config.dataDir, config.configDir],
  });
  workers.push(summaries.worker);
  for (const worker of workers) {
    worker.on('failed', (job, error) =>
      services.logger.warn(
        { queue: worker.name, jobId: job?.id, attempts: job?.attemptsMade, err: error.message },
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

/** With no profile configured, schedflow runs against its simulator, with a demo token and profile. */
async function startEmbeddedSimulator(config: DaemonConfig, logger: Logger) {
  const { tokenFile, tokensFile } = ensureDemoToken(config.dataDir);
  // The simulator's LLM endpoint too, with a demo key, so summaries show out of the box.
  const llm = ensureDemoLlmKey(config.dataDir);
  const server = new SimServer({
    config: parseSimConfig({
      port: config.simPort,
      tokensFile,
      stateDir: join(config.dataDir, 'sim'),
      llm: { keysFile: llm.keysFile, models: [DEMO_LLM_MODEL] },
    }),
    logger,
  });
  const url = await server.start();
  const profile = parseProfile('demo', {
    url,
    auth: { type: 'bearer', tokenFile },
    account: 'demo',
    version: 'latest',
    // The simulator is local: poll and submit without holding back.
    rateLimit: { capacity: 50, refillPerSecond: 50 },
  });
  return { server, url, profile, llmKeyFile: llm.keyFile };
}
