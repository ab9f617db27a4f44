import { Redis } from 'ioredis';
import { parseListenAddress } from '../lib/listen-address.js';
import { withTimeout } from '../lib/with-timeout.js';
import { RedisClusterCache } from '../redis/cluster-cache.js';
import { type RedisTarget, redisOptions } from '../redis/redis-server.js';
import { ClusterView } from '../sched/cluster-view.js';
import { buildApp } from './app.js';
import type { ApiDeps } from './deps.js';

export interface ApiServer {
  /** Base URL actually bound: `http://127.0.0.1:8080` (the real port when 0 was asked for). */
  url: string;
  /** Stops taking requests (new ones get 503), waits up to a second for those under way, then closes. */
  close(): Promise<void>;
}

/**
 * Longest wait for Redis to count a request against its token's rate limit. It answers in well
 * under 1 ms; 100 ms let a busy moment of the event loop (a burst of answers decoded) pass a
 * request uncounted.
 */
const RATE_COUNT_MS = 250;

/** Longest wait for the cluster view's cache to answer: Redis answers in under a millisecond. */
const CLUSTER_CACHE_MS = 2000;

/** The cluster view's lifetime when the settings name none (the daemon's default, `clusterViewTtlMs`). */
const DEFAULT_CLUSTER_VIEW_TTL_MS = 30_000;

/** Longest wait at start for the rate limit's connection to Redis to be made or refused. */
const COUNTS_CONNECT_MS = 1000;

/**
 * Serves the local API on `listen`. Redis readiness is checked, and the rate limit counted, on
 * connections of their own that fail fast (no offline queue) rather than the queues', which
 * wait for Redis to come back.
 */
export async function startApiServer(
  options: Omit<ApiDeps, 'pingRedis' | 'rateLimitCounts'> & { redis: RedisTarget; queuePrefix: string; listen: string },
): Promise<ApiServer> {
  const { host, port } = parseListenAddress(options.listen);
  /** A connection whose commands fail at once while Redis is away, instead of queueing for its return. */
  const failingFast = (what: string, commandTimeout?: number) => {
    const redis = new Redis({
      ...redisOptions(options.redis),
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      commandTimeout,
      retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
    });
    redis.on('error', (error) => options.logger.debug({ err: error }, `${what} Redis connection`));
    return redis;
  };
  const probe = failingFast('readiness');
  // The rate limit's counts: a frozen Redis (open but not answering) costs a request
  // RATE_COUNT_MS before it goes on uncounted, not the second a readiness PING may take.
  const counts = failingFast('rate limit', RATE_COUNT_MS);
  // Requests that came before the connection was made went uncounted (it queues nothing).
  await firstOutcome(counts, COUNTS_CONNECT_MS);
  // The cluster view's answers, shared with the deployment's other web processes.
  const clusterCache = failingFast('cluster view', CLUSTER_CACHE_MS);
  const clusterView =
    options.clusterView ??
    new ClusterView({
      cache: new RedisClusterCache(clusterCache),
      prefix: options.queuePrefix,
      clientFor: (profile) => options.clients.get(profile),
      ttlMs: options.settings.clusterViewTtlMs ?? DEFAULT_CLUSTER_VIEW_TTL_MS,
      // With nobody on the Cluster page, the samples' tick is what keeps the answer new: a kept
      // answer serves a job page for two of its periods, so that it does not blank before the next.
      ...(options.settings.clusterSampleEveryMs !== undefined && {
        lastAnswerMaxAgeMs: 2 * options.settings.clusterSampleEveryMs,
      }),
      logger: options.logger.child({ component: 'cluster-view' }),
    });
  let app: Awaited<ReturnType<typeof buildApp>>;
  try {
    app = await buildApp({
      ...options,
      clusterView,
      rateLimitCounts: { redis: counts, prefix: options.queuePrefix },
      pingRedis: async () => {
        const answer = await withTimeout(probe.ping(), 1000, 'PING answer');
        if (answer !== 'PONG') throw new Error(`PING answered ${answer}`);
      },
    });
  } catch (error) {
    probe.disconnect();
    counts.disconnect();
    clusterCache.disconnect();
    throw error;
  }
  app.addHook('onClose', async () => {
    probe.disconnect();
    counts.disconnect();
    clusterCache.disconnect();
  });
  try {
    await app.listen({ host, port });
  } catch (error) {
    await app.close();
    throw error;
  }
  const address = app.server.address();
  const boundPort = typeof address === 'object' && address ? address.port : port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${boundPort}`;
  options.logger.info({ url }, 'local API listening');
  return {
    url,
    close: async () => {
      // Requests under way get a moment to finish; a client that stalls in the middle of one
      // (a body that never ends) is cut then, or it would hold the shutdown to its step limit.
      const cut = setTimeout(() => app.server.closeAllConnections(), CLOSE_GRACE_MS);
      try {
        await app.close();
      } finally {
        clearTimeout(cut);
      }
    },
  };
}

/** How long a stopping API waits for requests under way before cutting their connections. */
const CLOSE_GRACE_MS = 1000;

/** Resolves once `redis` has connected, failed to, or `ms` passed: never rejects. */
async function firstOutcome(redis: Redis, ms: number): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      redis.off('ready', done);
      redis.off('error', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    redis.once('ready', done);
    redis.once('error', done);
  });
}
