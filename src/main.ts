import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import type { ConnectionOptions, Queue } from 'bullmq';
import { QUEUES, queueSettingsOf } from '../workers/queues.js';
import type { QueueSettings } from '../workers/services.js';
import { startWorkers } from '../workers/start-workers.js';
import { promoteDelayedSubmits, requeueUnsubmitted } from '../workers/submit.js';
import { type DaemonConfig, isAllInOne } from './config/daemon-config.js';
import { writeDaemonInfo, writeLocalApi } from './daemon-info.js';
import { otherProcessOf, registerDaemon, registryDirsToRead } from './daemon-registry.js';
import { startCheckpointer } from './db/checkpointer.js';
import { historyId } from './db/history-meta.js';
import { type OpenedHistory, openHistory } from './db/open-history.js';
import { ConfigError } from './errors.js';
import { makeLocalCredential } from './http/api/local-credential.js';
import { startApiServer } from './http/server.js';
import { loadOidcClientSecret } from './http/ui/oidc-client-secret.js';
import { loadUiPassword } from './http/ui/ui-password.js';
import { type Clock, systemClock } from './lib/clock.js';
import { HeapCollector } from './lib/heap-collector.js';
import { setUnmappedJobUid } from './lib/host-users.js';
import { ensureOwnerOnlyDir } from './lib/owner-only.js';
import { takePidLock } from './lib/pid-lock.js';
import { Lifecycle, StopRequestedError } from './lifecycle.js';
import type { Logger } from './logger.js';
import { loadWebhookSecret } from './notify/webhook-secret.js';
import { parseWebhookAllowList, WebhookTargets } from './notify/webhook-target.js';
import { CancelsInFlight } from './pipelines/cancels-in-flight.js';
import { PipelineRegistry } from './pipelines/pipeline-registry.js';
import type { RunEngineDeps } from './pipelines/run-engine.js';
import type { QueueName } from './queue/catalog.js';
import { SubmitFairShare } from './queue/fair-share.js';
import { createQueues } from './queue/queue-definition.js';
import type { SchedulerSpec } from './queue/queue-keeper.js';
import { QueueKeeper } from './queue/queue-keeper.js';
import { queueSubmitJobs, type SubmitQueueDeps } from './queue/submit-queue.js';
import { tickSchedulers, upsertTicks } from './queue/ticks.js';
import { HistoryClaim } from './redis/history-claim.js';
import { type RedisTarget, redisOptions, startPrivateRedis } from './redis/redis-server.js';
import { RedisWatch } from './redis/redis-watch.js';
import { SharedBudgets } from './redis/shared-budget.js';
import { type AcceptDeps, acceptSubmission, type JobSubmission } from './requests/accept.js';
import { type ArrayRetry, retryArrayTasks } from './requests/array-retry.js';
import { cancelRequest } from './requests/canceller.js';
import { refusalPolicy } from './requests/door.js';
import { PartitionLimitsReader } from './requests/partition-limits.js';
import { ClientRegistry } from './sched/client-registry.js';
import { type JobSpec, preparePassThroughCheck } from './sched/job-spec.js';
import { loadProfiles, type Profile } from './sched/profile.js';
import { startEmbeddedSimulator } from './sim/embedded.js';
import { type ResubmitInput, resubmitWithSuggestion } from './summaries/resubmit.js';
import { resolveSummarySettings, type SummariesStatus, summariesStatus } from './summaries/summaries-service.js';

/** What `schedflow start` runs, and what tests and the local API hold on to. */
export interface Daemon {
  config: DaemonConfig;
  history: OpenedHistory;
  profiles: ReadonlyMap<string, Profile>;
  redis: RedisTarget;
  /** URL of the embedded simulator when no scheduler is configured. */
  simUrl: string | null;
  /** The host user the embedded simulator runs jobs as, when not the daemon's own (it is root). */
  simJobUser: string | null;
  /** Base URL the local API is bound to (`web` role), e.g. `http://127.0.0.1:8080`; null without it. */
  apiUrl: string | null;
  /** One connected scheduler client per profile (cancel, readiness). */
  clients: ClientRegistry;
  queues: Record<QueueName, Queue>;
  /** The pipeline files of the pipelines folder: listing and triggering runs. */
  pipelines: PipelineRegistry;
  /** Records a request and queues its submission; returns the request id (src/requests/accept.ts). */
  submit(input: JobSubmission): Promise<string>;
  /** How summaries run: the global setting and the LLM endpoint, if any. */
  summaries: SummariesStatus;
  /**
   * Applies the suggestion of a request's summary: a new request with the changed spec,
   * linked to it, is queued (once; again returns the same id). NoSuggestionError when there is none.
   * `newRequestId` names the new request (the local API's Idempotency-Key); default a new UUID.
   * `origin`: who asked through the local API, a token or the CLI. @defaultValue 'api'
   */
  resubmitWithSuggestion(input: ResubmitInput): Promise<string>;
  /** Runs tasks of an array request again (the failed ones by default): the new request. */
  retryArrayTasks(retry: ArrayRetry): Promise<{ id: string; indexes: number[]; array: string }>;
  stop(): Promise<void>;
}

/**
 * The composition root: data dir lock → private Redis → history (migrated) → scheduler
 * clients → queues → pipelines → workers → local API (last to start, first to stop).
 * Everything else lives where its path says. Shutdown runs the same steps in reverse.
 */
export async function startDaemon(
  config: DaemonConfig,
  logger: Logger,
  /** Whose signal handlers are installed before the start, so a signal during it stops what has started. */
  lifecycle = new Lifecycle(logger),
  /**
   * Where the daemon reads the time and sets its timers: the system's, or a test's ManualClock
   * (src/lib/clock.ts) moved instead of waited for.
   */
  clock: Clock = systemClock,
): Promise<Daemon> {
  try {
    return await lifecycle.track(compose(config, logger, lifecycle, clock));
  } catch (error) {
    await lifecycle.stop();
    throw error;
  }
}

/** The scheduler side: the profiles (or the embedded simulator's) and their connected clients. */
interface SchedulerSide {
  profiles: ReadonlyMap<string, Profile>;
  simUrl: string | null;
  simJobUser: string | null;
  clients: ClientRegistry;
  summarySettings: ReturnType<typeof resolveSummarySettings>;
}

/** The queue side: the producers and what watches their Redis. */
interface QueueSide {
  connection: ConnectionOptions;
  queues: Record<QueueName, Queue>;
  queueSettings: QueueSettings;
  redisWatch: RedisWatch;
  heap: HeapCollector;
  /** The order owners' submit jobs are served in (src/queue/fair-share.ts). */
  submitFairShare: SubmitFairShare;
}

/** How requests are accepted and runs advanced, and the submit producer's link to the keeper. */
interface RequestSide {
  requests: AcceptDeps;
  engine: RunEngineDeps;
  /** Requests this process is submitting right now (the keeper's re-queue leaves them alone). */
  submitsInFlight: Set<string>;
  /** Filled in once the keeper exists: producers ask it to requeue what Redis did not take. */
  keeper: { current?: QueueKeeper };
  /** The one door policy of every way in: requests, array retries and pipeline steps. */
  doorPolicy: ReturnType<typeof refusalPolicy>;
}

async function compose(config: DaemonConfig, logger: Logger, lifecycle: Lifecycle, clock: Clock): Promise<Daemon> {
  lockDataDir(config, lifecycle);
  const redis = await startRedis(config, logger, lifecycle);
  const history = await openClaimedHistory(config, redis, logger, lifecycle);
  const scheduler = await startSchedulerSide(config, redis, logger, lifecycle, clock);
  const queueSide = startQueues(config, redis, scheduler, logger, lifecycle);
  const requestSide = wireRequests(history, scheduler, queueSide, logger, clock, [config.dataDir, config.configDir]);
  // One policy for the API's door, pipeline files and the sender's connections (the list was
  // checked when the config was loaded).
  const webhookTargets = new WebhookTargets(parseWebhookAllowList(config.webhookAllowHosts));
  const { pipelines, ticks } = await startPipelinesAndTicks(
    config,
    history,
    scheduler,
    queueSide,
    requestSide,
    webhookTargets,
    logger,
    lifecycle,
  );
  // Made at first start even before the first webhook, so receivers can be set up beforehand.
  const webhookSecret = loadWebhookSecret(config.dataDir, config.webhookSecret);
  logger.info({ secretFrom: webhookSecret.source }, 'webhooks are signed with the secret in %s', webhookSecret.source);
  if (config.roles.includes('worker')) {
    startWorkers({
      config,
      queueSettings: queueSide.queueSettings,
      history,
      clients: scheduler.clients,
      logger,
      lifecycle,
      connection: queueSide.connection,
      queues: queueSide.queues,
      pipelines,
      engine: requestSide.engine,
      requests: requestSide.requests,
      webhookSecret,
      webhookTargets,
      summarySettings: scheduler.summarySettings,
      redisWatch: queueSide.redisWatch,
      submitsInFlight: requestSide.submitsInFlight,
      heap: queueSide.heap,
      clock,
    });
  }
  await keepQueues(config, history, scheduler, queueSide, requestSide, pipelines, ticks, logger, lifecycle, clock);
  publishDaemonInfo(config, history, scheduler);
  const daemon = daemonOf(config, history, redis, scheduler, queueSide, requestSide, pipelines, lifecycle);
  // Last to start, so the first to stop: new requests get 503 and those under way
  // finish before the workers and queues they use close.
  if (config.roles.includes('web')) {
    daemon.apiUrl = await startApi(
      config,
      daemon,
      history,
      redis,
      scheduler,
      queueSide,
      webhookTargets,
      logger,
      lifecycle,
    );
  }
  registerForCli(config, logger, lifecycle);
  // A signal after the last add(): not reported as started, it is being stopped.
  if (lifecycle.stopRequested) throw new StopRequestedError();
  return daemon;
}

/**
 * One daemon owns a data dir's private Redis: a second would reuse it, then stop it on its way
 * out, under the first. It is refused before it touches anything else.
 */
function lockDataDir(config: DaemonConfig, lifecycle: Lifecycle): void {
  // Before anything is written there: job scripts, environment values and webhook URLs go in.
  ensureOwnerOnlyDir(config.dataDir, 'data dir');
  if (config.redisUrl) return;
  const lock = takePidLock(join(config.dataDir, 'daemon.pid'));
  if (!lock.held) {
    throw new ConfigError(
      `data dir ${config.dataDir} is in use by another schedflow daemon (pid ${lock.holder}): stop it, or start this one with another --data-dir`,
    );
  }
  lifecycle.add('data dir lock', async () => lock.release());
}

/**
 * The configured Redis, or the data dir's private one. The private Redis starts before the
 * history opens, so it stops after it closes: last but the lock. Workers hand their jobs back
 * to it during the shutdown; a Redis that takes long to flush does not keep SQLite open.
 */
async function startRedis(config: DaemonConfig, logger: Logger, lifecycle: Lifecycle): Promise<RedisTarget> {
  if (config.redisUrl) return { url: config.redisUrl };
  const own = await startPrivateRedis(config.dataDir, logger.child({ component: 'redis' }));
  // Its own stop waits up to 10 s for redis-server to flush its append-only file.
  lifecycle.add('redis-server', () => own.stop(), { timeoutMs: 12_000 });
  return own.target;
}

/** The history, migrated, claimed in Redis for this deployment, and checkpointed (SQLite). */
async function openClaimedHistory(
  config: DaemonConfig,
  redis: RedisTarget,
  logger: Logger,
  lifecycle: Lifecycle,
): Promise<OpenedHistory> {
  const history = await openHistory(
    {
      dataDir: config.dataDir,
      databaseUrl: config.databaseUrl,
      // Another role of this data dir running: no VACUUM holding the write lock under it.
      vacuumAtOpen: otherProcessOf(config.dataDir, registryDirsToRead(process.env)) === null,
    },
    logger.child({ component: 'history' }),
  );
  lifecycle.add('history', () => history.close());
  // Before anything is queued or polled: processes that share the Redis and the queue prefix but
  // not this history would never find each other's requests. Refused (exit 2) rather than that.
  const claim = await HistoryClaim.take(
    redis,
    config.queuePrefix,
    {
      id: await historyId(history.store),
      host: hostname(),
      path: history.sqlite ? resolve(history.where) : history.where,
      pid: process.pid,
      roles: config.roles,
    },
    logger.child({ component: 'redis' }),
  );
  lifecycle.add('history registration', () => claim.release());
  // After the claim: a start refused there (exit 2) does not spend the 300 ms first.
  preparePassThroughCheck();
  if (history.sqlite) {
    const checkpoints = startCheckpointer(history.sqlite, logger.child({ component: 'history' }));
    lifecycle.add('history checkpoints', () => checkpoints.stop());
  }
  return history;
}

/**
 * The profiles of the configuration, or the embedded simulator when there is none (the
 * all-in-one demo), and one connected scheduler client per profile.
 */
async function startSchedulerSide(
  config: DaemonConfig,
  redis: RedisTarget,
  logger: Logger,
  lifecycle: Lifecycle,
  clock: Clock,
): Promise<SchedulerSide> {
  let profiles = loadProfiles(join(config.configDir, 'profiles'));
  let simUrl: string | null = null;
  let simJobUser: string | null = null;
  let demoLlm: { url: string; keyFile: string; model: string } | null = null;
  if (profiles.size === 0) {
    if (!isAllInOne(config.roles)) {
      throw new ConfigError(
        `no scheduler profile in ${join(config.configDir, 'profiles')}: processes with separate roles need one (the embedded simulator runs only in the all-in-one start)`,
      );
    }
    const sim = await startEmbeddedSimulator(config, logger);
    // It ends the jobs it runs (SIGTERM, then SIGKILL after its KillWait).
    lifecycle.add(
      'simulator',
      async () => {
        await sim.server.stop();
        // Its job user owns no more jobs of this process (a test process starts daemons in turn).
        setUnmappedJobUid(null);
      },
      { timeoutMs: 10_000 },
    );
    simUrl = sim.url;
    simJobUser = sim.server.jobUser?.name ?? null;
    setUnmappedJobUid(sim.server.jobUser?.uid ?? null);
    profiles = new Map([[sim.profile.name, sim.profile]]);
    demoLlm = sim.llm;
  }
  const summarySettings = resolveSummarySettings(config.summaries, demoLlm);

  // One request budget per profile for every process of the deployment, kept in Redis: closed
  // after the clients that take from it.
  const budgets = new SharedBudgets(redis, config.queuePrefix);
  lifecycle.add('request budgets', async () => budgets.close());
  const clients = new ClientRegistry(
    profiles,
    logger.child({ component: 'sched' }),
    config.profileRecheckMs,
    (profile) => budgets.budgetFor(profile),
    undefined,
    clock,
  );
  lifecycle.add('scheduler clients', () => clients.close());
  await clients.start();
  return { profiles, simUrl, simJobUser, clients, summarySettings };
}

/** The producers of the queues' definitions, the watch of their Redis and the heap collector. */
function startQueues(
  config: DaemonConfig,
  redis: RedisTarget,
  scheduler: SchedulerSide,
  logger: Logger,
  lifecycle: Lifecycle,
): QueueSide {
  // ioredis options; BullMQ's own type for them is looser but not nominally the same.
  const connection = redisOptions(redis) as ConnectionOptions;
  const queueSettings = queueSettingsOf(
    config,
    scheduler.summarySettings,
    [...scheduler.profiles.values()].map((profile) => profile.concurrency),
  );
  const queues = createQueues(QUEUES, queueSettings, connection, config.queuePrefix);
  const redisWatch = new RedisWatch(redis, logger.child({ component: 'redis' }));
  lifecycle.add('redis watch', async () => redisWatch.close());
  const heap = new HeapCollector(logger.child({ component: 'memory' }));
  lifecycle.add('heap collector', async () => heap.stop());
  for (const [name, queue] of Object.entries(queues))
    queue.on('error', (error) => redisWatch.failed(error, `queue ${name}`));
  lifecycle.add('queues', async () => {
    await Promise.all(Object.values(queues).map((q) => q.close()));
  });
  const submitFairShare = new SubmitFairShare(queues.submit, config.fairShareWeights);
  return { connection, queues, queueSettings, redisWatch, heap, submitFairShare };
}

/** The door of job requests (src/requests/accept.ts) and the run engine of pipelines. */
function wireRequests(
  history: OpenedHistory,
  scheduler: SchedulerSide,
  queueSide: QueueSide,
  logger: Logger,
  clock: Clock,
  /** Folders a step's outputs file is never read from. */
  protectedDirs: readonly string[],
): RequestSide {
  const { profiles, clients } = scheduler;
  const { queues, redisWatch } = queueSide;
  const keeper: RequestSide['keeper'] = {};
  const submitQueue: SubmitQueueDeps = {
    queue: queues.submit,
    fairShare: queueSide.submitFairShare,
    logger: logger.child({ component: 'queue' }),
    redisReachable: () => redisWatch.reachable,
    sweepLater: (left) => keeper.current?.sweepLater(left),
    keeperBehind: () => keeper.current?.behind ?? false,
    clock,
  };
  const requests: AcceptDeps = { store: history.store, submitQueue, clock };
  const doorPolicy = refusalPolicy(profiles, clients);
  const submitsInFlight = new Set<string>();
  const partitionLimits = new PartitionLimitsReader({
    profiles,
    clients,
    logger: logger.child({ component: 'requests' }),
    clock,
  });
  const engine: RunEngineDeps = {
    ...requests,
    logger: logger.child({ component: 'pipelines' }),
    cancelJob: async (profile, jobId) => {
      await clients.get(profile).cancel(jobId);
    },
    cancelStep: (requestId, by) =>
      cancelRequest({ store: history.store, submitQueue: queues.submit, clients, logger, clock }, requestId, by),
    refusal: doorPolicy,
    partitionLimits: (profile, partition) => partitionLimits.limitsOf(profile, partition),
    inFlight: new CancelsInFlight(),
    protectedDirs,
  };
  return { requests, engine, submitsInFlight, keeper, doorPolicy };
}

/**
 * The pipeline files (loaded, watched) and, in the `scheduler` role, the queues' ticks and the
 * pipelines' schedules as job schedulers in Redis.
 */
async function startPipelinesAndTicks(
  config: DaemonConfig,
  history: OpenedHistory,
  scheduler: SchedulerSide,
  queueSide: QueueSide,
  requestSide: RequestSide,
  webhookTargets: WebhookTargets,
  logger: Logger,
  lifecycle: Lifecycle,
): Promise<{ pipelines: PipelineRegistry; ticks: SchedulerSpec[] }> {
  const { profiles } = scheduler;
  const { queues } = queueSide;
  const pipelines = new PipelineRegistry({
    dir: config.pipelinesDir,
    context: { profiles, defaultProfile: [...profiles.keys()][0] },
    engine: requestSide.engine,
    store: history.store,
    queue: queues.pipeline,
    logger: logger.child({ component: 'pipelines' }),
    webhookTargets,
  });
  await pipelines.load();
  lifecycle.add('pipeline files', async () => pipelines.close());
  const ticks = config.roles.includes('scheduler')
    ? tickSchedulers(QUEUES, queues, queueSide.queueSettings, [...profiles.keys()])
    : [];
  await upsertTicks(ticks);
  if (config.roles.includes('scheduler')) {
    await pipelines.syncSchedules();
    pipelines.watch(() => pipelines.syncSchedules());
  } else {
    pipelines.watch();
  }
  return { pipelines, ticks };
}

/**
 * What keeps the queues in step with the history: the unsubmitted requests queued again now,
 * delayed submissions taken up (now, and when a profile connects), and the keeper that rebuilds
 * the ticks and the queue whenever Redis lost them.
 */
async function keepQueues(
  config: DaemonConfig,
  history: OpenedHistory,
  scheduler: SchedulerSide,
  queueSide: QueueSide,
  requestSide: RequestSide,
  pipelines: PipelineRegistry,
  ticks: readonly SchedulerSpec[],
  logger: Logger,
  lifecycle: Lifecycle,
  clock: Clock,
): Promise<void> {
  const { clients } = scheduler;
  const { queues, redisWatch } = queueSide;
  // Nothing is busy yet, and nothing recent: the defaults of a sweep, on the daemon's clock.
  await requeueUnsubmitted(history.store, queues.submit, logger, new Set(), 0, clock, queueSide.submitFairShare);
  // A backoff must not outlast a restart, nor a profile's recovery: the delayed submissions are
  // taken up now (those of a profile that cannot work say why and wait again), and those of a
  // profile when it connects later.
  const promote = (profile: string | null) =>
    promoteDelayedSubmits(history.store, queues.submit, profile, logger.child({ component: 'queue' })).catch(
      (error: unknown) => logger.warn({ profile, err: error }, 'could not take up delayed submissions'),
    );
  clients.onConnected((profile) => {
    if (!lifecycle.stopRequested) void promote(profile);
  });
  await promote(null);
  // Redis may lose everything under a running daemon (restarted without its data): the keeper
  // notices on its next check and rebuilds the ticks and the queue from the history.
  const keeper = new QueueKeeper({
    logger: logger.child({ component: 'queue' }),
    everyMs: config.pollFloorMs,
    schedulers: ticks,
    ensurePipelineSchedules: config.roles.includes('scheduler') ? () => pipelines.ensureSchedules() : undefined,
    requeue: () =>
      requeueUnsubmitted(
        history.store,
        queues.submit,
        logger,
        requestSide.submitsInFlight,
        config.lockDurationMs,
        clock,
        queueSide.submitFairShare,
      ),
    addLeft: (jobs) => queueSubmitJobs(queues.submit, queueSide.submitFairShare, jobs),
    redisReachable: () => redisWatch.reachable,
    redisChanges: () => redisWatch.changes,
  });
  requestSide.keeper.current = keeper;
  redisWatch.onReconnect(keeper.reconnected);
  keeper.start();
  lifecycle.add('queue keeper', () => keeper.close());
}

/**
 * The daemon's info for the CLI (src/daemon-info.ts): where its history is and which profiles
 * it has. What a request may be is the daemon's to say, at its door (the local API).
 */
function publishDaemonInfo(config: DaemonConfig, history: OpenedHistory, scheduler: SchedulerSide): void {
  const { profiles } = scheduler;
  const defaultProfile = [...profiles.keys()][0] as string;
  writeDaemonInfo(config.dataDir, {
    pid: process.pid,
    historyFile: history.sqlite ? history.where : null,
    ...(config.databaseUrl && { historyUrl: config.databaseUrl.reveal() }),
    profiles: [...profiles.keys()],
    defaultProfile,
  });
}

/** What the daemon offers the CLI's start command, tests and the local API. */
function daemonOf(
  config: DaemonConfig,
  history: OpenedHistory,
  redis: RedisTarget,
  scheduler: SchedulerSide,
  queueSide: QueueSide,
  requestSide: RequestSide,
  pipelines: PipelineRegistry,
  lifecycle: Lifecycle,
): Daemon {
  const { profiles, clients } = scheduler;
  const { requests } = requestSide;
  const defaultProfile = [...profiles.keys()][0] as string;
  const refusal = (profile: string, spec: Pick<JobSpec, 'account' | 'array'>) =>
    requestSide.doorPolicy(profile, [spec]);
  return {
    config,
    history,
    profiles,
    redis,
    simUrl: scheduler.simUrl,
    simJobUser: scheduler.simJobUser,
    apiUrl: null,
    clients,
    queues: queueSide.queues,
    pipelines,
    submit: (input) => acceptSubmission({ ...requests, profiles, defaultProfile, refusal }, input),
    summaries: summariesStatus(scheduler.summarySettings),
    resubmitWithSuggestion: async (input) =>
      (await resubmitWithSuggestion(requests, { ...input, queuedBy: input.origin })).requestId,
    retryArrayTasks: (retry) => retryArrayTasks({ ...requests, refusal }, retry),
    stop: () => lifecycle.stop(),
  };
}

/** The local API and the admin UI (the `web` role); returns the URL it is bound to. */
async function startApi(
  config: DaemonConfig,
  daemon: Daemon,
  history: OpenedHistory,
  redis: RedisTarget,
  scheduler: SchedulerSide,
  queueSide: QueueSide,
  webhookTargets: WebhookTargets,
  logger: Logger,
  lifecycle: Lifecycle,
): Promise<string> {
  const { profiles, clients } = scheduler;
  const { queues } = queueSide;
  const prefix = config.queuePrefix;
  const { pipelines } = daemon;
  // The CLI's credential for this start only: its hash in memory, the token in an owner-only file.
  const cli = makeLocalCredential();
  const api = await startApiServer({
    store: history.store,
    logger,
    profiles,
    clients,
    queues,
    pipelines,
    submit: (input) => daemon.submit(input),
    resubmit: (input) => daemon.resubmitWithSuggestion(input),
    retryTasks: (retry) => daemon.retryArrayTasks(retry),
    redis,
    queuePrefix: prefix,
    listen: config.listen,
    webhookTargets,
    localCredential: cli.credential,
    settings: {
      rateLimitPerMin: config.apiRateLimitPerMin,
      bodyLimitBytes: 1024 * 1024,
      pollCeilingMs: config.pollCeilingMs,
      clusterViewTtlMs: config.clusterViewTtlMs,
      clusterSampleEveryMs: config.clusterSampleEveryMs,
      protectedDirs: [config.dataDir, config.configDir],
    },
    ui: {
      password: loadUiPassword(config.dataDir, config.uiPassword),
      ...(config.oidc && {
        oidc: { ...config.oidc, clientSecret: loadOidcClientSecret(config.oidc.clientSecretFile) },
      }),
      protectedDirs: [config.dataDir, config.configDir],
      sessions: { redis, prefix },
    },
  });
  // Where the CLI asks (src/cli/daemon-api.ts). At the stop it is removed before the API closes,
  // so a command after a stop is told at once that no daemon takes its requests; requests under
  // way finish, and one that hangs (a client that never reads) is not waited for.
  let published: { remove(): void } | undefined;
  lifecycle.add(
    'local API',
    async () => {
      published?.remove();
      await api.close();
    },
    { timeoutMs: 5000 },
  );
  published = writeLocalApi(config.dataDir, { pid: process.pid, url: api.url, token: cli.token });
  logger.info({ url: `${api.url}/ui` }, 'admin web UI at %s/ui (log in with a token or the UI password)', api.url);
  return api.url;
}

/**
 * Last: commands started in any folder find this data dir from now on, and no longer once a
 * stop begins (src/daemon-registry.ts). A folder it cannot write costs them that, not the start.
 */
function registerForCli(config: DaemonConfig, logger: Logger, lifecycle: Lifecycle): void {
  try {
    const registration = registerDaemon(config.dataDir, process.env);
    lifecycle.add('daemon registration', async () => registration.remove());
  } catch (error) {
    if (error instanceof StopRequestedError) throw error;
    logger.warn(
      { err: (error as Error).message },
      'could not register this daemon for the CLI: commands find it with --data-dir %s',
      config.dataDir,
    );
  }
}
