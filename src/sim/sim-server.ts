import { createHash } from 'node:crypto';
import type { Socket } from 'node:net';
import { resolve } from 'node:path';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import { type Clock, systemClock } from '../lib/clock.js';
import type { Secret } from '../lib/secret.js';
import { TokenBucket } from '../lib/token-bucket.js';
import type { Logger } from '../logger.js';
import { ADMIN_TOKEN_FILE, ensureAdminToken, isAdminCredential } from './admin-token.js';
import { Associations } from './associations.js';
import { Authenticator } from './auth.js';
import { Cluster } from './cluster.js';
import {
  hasSlurmrestdCredential,
  PROXY,
  SLURMRESTD,
  SLURMRESTD_MAX_HEAD_BYTES,
  SLURMRESTD_TEXT,
  sendSlurmrestdText,
} from './flavor.js';
import { type JobUser, resolveJobUser } from './job-user.js';
import { parseLenientJson } from './lenient-json.js';
import { LlmSimulator, loadLlmKeysFile } from './llm/llm-sim.js';
import { isLoopback } from './loopback.js';
import { latestServed, type ProxyContext, proxyError, type UpstreamStatus } from './proxy-context.js';
import { cacheHeaders, ResponseCache } from './response-cache.js';
import { registerAccountingRoutes } from './routes/accounting.js';
import { registerControllerRoutes } from './routes/controller.js';
import { registerJobUpdateRoute } from './routes/job-update.js';
import { loadTokensFile, type SimConfig, type TokenEntry } from './sim-config.js';
import { UNPARSABLE_BODY, UNSUPPORTED_BODY } from './submit-request.js';

const ADMIN_PREFIX = '/_sim';

/** The proxy's paths, which its rate limit covers. */
const RATE_LIMITED_PATHS = /^\/(sched|scheddb|meta|ping)(\/|\?|$)/;

/** Paths of the proxy itself (and of the LLM endpoint, the admin endpoint): anything else is slurmrestd's. */
const PROXY_PATHS = /^\/(sched|scheddb|meta|ping|v1|_sim)(\/|$)/;

export interface SimServerOptions {
  config: SimConfig;
  logger: Logger;
  /** Tokens given directly (tests); otherwise read from `config.tokensFile`. */
  tokens?: ReadonlyMap<string, TokenEntry>;
  /** LLM endpoint API keys given directly (tests); otherwise read from `config.llm.keysFile`. */
  llmKeys?: ReadonlySet<string>;
  /**
   * The proxy's own time: its cache's ages and lifetimes and its rate limit's refills (tests
   * move it instead of sleeping). Jobs, the controller and accounting keep real time.
   * @defaultValue systemClock
   */
  clock?: Clock;
}

/**
 * The scheduler proxy simulator: an HTTP server that behaves like the site proxy
 * in front of slurmrestd (and like plain slurmrestd under /slurm, /slurmdb), over
 * a simulated cluster that really runs job scripts.
 */
export class SimServer {
  readonly app: FastifyInstance;
  readonly cluster: Cluster;
  readonly upstream: UpstreamStatus = { slurmctld: true, slurmdbd: true };
  /** Users' accounts and submit limits, as slurmdbd's associations hold them. */
  readonly associations: Associations;
  /** The OpenAI-compatible endpoint under /v1, when configured with keys. */
  readonly llm: LlmSimulator | null;
  /** The bearer token every `/_sim` route requires (`<stateDir>/admin-token`). */
  readonly adminToken: Secret;
  /** The host user job scripts run as; null when they run as the simulator's own user. */
  readonly jobUser: JobUser | null;
  private readonly buckets = new Map<string, TokenBucket>();
  /** Requests served, by method and route pattern (GET /_sim/stats), for tests and benchmarks. */
  private readonly requestCounts = new Map<string, number>();
  /** Body bytes sent, by the same keys. */
  private readonly bytesSent = new Map<string, number>();
  private stopping: Promise<void> | undefined;
  private readonly clock: Clock;

  constructor(private readonly options: SimServerOptions) {
    const { config, logger } = options;
    this.clock = options.clock ?? systemClock;
    const tokens = options.tokens ?? (config.tokensFile ? loadTokensFile(config.tokensFile) : new Map());
    this.jobUser = resolveJobUser(config.jobUser);
    this.adminToken = ensureAdminToken(resolve(config.stateDir)).token;
    this.cluster = new Cluster({
      clusterName: config.clusterName,
      nodeName: config.nodeName,
      cpus: config.cpus,
      memoryMb: config.memoryMb,
      partitions: config.partitions,
      timeScale: config.timeScale,
      minJobAgeSec: config.minJobAgeSec,
      killWaitSec: config.killWaitSec,
      stateDir: resolve(config.stateDir),
      workDir: config.workDir === undefined ? undefined : resolve(config.workDir),
      firstJobId: config.firstJobId,
      maxArraySize: config.maxArraySize,
      simulatedRuntimeSec: config.simulatedRuntimeSec,
      jobAcctGatherFrequencySec: config.jobAcctGatherFrequencySec,
      jobUser: this.jobUser,
      logger: logger.child({ component: 'sim-cluster' }),
    });
    this.associations = new Associations(config.users);
    const ctx: ProxyContext = {
      config,
      cluster: this.cluster,
      cache: new ResponseCache(),
      clock: this.clock,
      authenticator: new Authenticator(tokens, { munge: config.munge }),
      associations: this.associations,
      upstream: this.upstream,
      uidOf: (user) =>
        config.users[user]?.uid ?? 10_000 + (createHash('sha256').update(user).digest().readUInt16BE(0) % 50_000),
    };
    this.app = Fastify({
      // Per-request lines only when debugging: a busy poller would otherwise flood the log.
      loggerInstance: logger.child(
        { component: 'sim-http' },
        { level: ['debug', 'trace'].includes(logger.level) ? logger.level : 'warn' },
      ) as FastifyBaseLogger,
      routerOptions: { ignoreTrailingSlash: true },
      bodyLimit: 4 * 1024 * 1024,
      // Long queries (hundreds of repeated `job_id=`) as far as slurmrestd reads them, then its answer.
      http: { maxHeaderSize: SLURMRESTD_MAX_HEAD_BYTES },
      clientErrorHandler: answerClientError,
    });
    this.app.addHook('onResponse', async (req, reply) => {
      const key = `${req.method} ${req.routeOptions.url ?? 'unknown'}`;
      this.requestCounts.set(key, (this.requestCounts.get(key) ?? 0) + 1);
      const length = Number(reply.getHeader('content-length') ?? 0);
      this.bytesSent.set(key, (this.bytesSent.get(key) ?? 0) + (Number.isFinite(length) ? length : 0));
    });
    const { serves } = config;
    // Plain slurmrestd has no rate limit, meta endpoints or anonymous /ping of its own.
    if (serves !== 'slurmrestd') {
      this.registerRateLimit();
      this.registerMeta();
    }
    this.registerAdmin();
    const llmKeys = options.llmKeys ?? (config.llm?.keysFile ? loadLlmKeysFile(config.llm.keysFile) : null);
    this.llm =
      config.llm && llmKeys ? new LlmSimulator(llmKeys, config.llm, logger.child({ component: 'sim-llm' })) : null;
    this.llm?.register(this.app);
    this.llm?.registerAdmin(this.app, ADMIN_PREFIX);
    this.app.register(async (scheduler) => {
      // Only JSON is read here (Fastify's own text/plain parser goes). A body that is not JSON
      // is slurmrestd's to answer (400 text, after the credential check), so the parser hands it
      // on instead of failing the request before any route runs.
      scheduler.removeAllContentTypeParsers();
      scheduler.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
        const text = typeof body === 'string' ? body : body.toString('utf8');
        try {
          // slurmrestd's reader takes bare NaN and Infinity (see parseLenientJson).
          done(null, text === '' ? undefined : parseLenientJson(text));
        } catch {
          done(null, UNPARSABLE_BODY);
        }
      });
      // Any other media type too (Fastify would answer its own 415 before any check); a body
      // without a Content-Type is left unread, as before.
      scheduler.addContentTypeParser('*', { parseAs: 'string' }, (req, _body, done) => {
        done(null, req.headers['content-type'] === undefined ? undefined : UNSUPPORTED_BODY);
      });
      const flavors = serves === 'both' ? [PROXY, SLURMRESTD] : serves === 'proxy' ? [PROXY] : [SLURMRESTD];
      for (const flavor of flavors) {
        registerControllerRoutes(scheduler, ctx, flavor);
        registerJobUpdateRoute(scheduler, ctx, flavor);
        registerAccountingRoutes(scheduler, ctx, flavor);
      }
    });
    this.app.setNotFoundHandler((req, reply) => {
      const path = req.url.split('?')[0] ?? '';
      // The proxy alone answers every path it has no route for with its own 404; slurmrestd alone
      // authenticates first, its paths and the proxy's alike (the admin routes stay the proxy's).
      const proxyAnswers =
        serves === 'proxy' || (PROXY_PATHS.test(path) && (serves === 'both' || path.startsWith('/_sim')));
      if (proxyAnswers) {
        return reply
          .code(404)
          .send({ message: `Route ${req.method}:${path} not found`, error: 'Not Found', statusCode: 404 });
      }
      // Plain slurmrestd authenticates before it routes: without a credential, even a path it
      // does not have is a 401. (The proxy's header pair counts: the path is no more the proxy's.)
      if (!hasSlurmrestdCredential(req.headers) && !req.headers[PROXY.userToken]) {
        return sendSlurmrestdText(reply, 401, SLURMRESTD_TEXT.unauthenticated);
      }
      return sendSlurmrestdText(reply, 404, SLURMRESTD_TEXT.notFound);
    });
    this.app.setErrorHandler((error: Error & { statusCode?: number }, _req, reply) => {
      const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
      if (status === 500) this.options.logger.error({ err: error }, 'simulator request failed');
      return proxyError(reply, status, status === 500 ? 'Internal Server Error' : 'Bad Request', error.message);
    });
  }

  /**
   * Per-client-IP token bucket (contract section 8) on the proxy's own paths. The admin
   * endpoint is exempt, and so are the LLM endpoint and plain slurmrestd: other services than
   * the proxy, without its rate limit.
   */
  private registerRateLimit(): void {
    const { capacity, refillPerSecond } = this.options.config.rateLimit;
    this.app.addHook('onRequest', async (req, reply) => {
      if (!RATE_LIMITED_PATHS.test(req.url)) return;
      let bucket = this.buckets.get(req.ip);
      if (!bucket) {
        if (this.buckets.size > 10_000) this.pruneBuckets();
        bucket = new TokenBucket(capacity, refillPerSecond, this.clock.now());
        this.buckets.set(req.ip, bucket);
      }
      const now = this.clock.now();
      if (!bucket.tryTake(now)) {
        const retryAfterSec = Math.max(1, Math.ceil(bucket.msUntilToken(now) / 1000));
        reply.header('retry-after', String(retryAfterSec));
        return proxyError(reply, 429, 'Too Many Requests', `rate limit exceeded for ${req.ip}; back off exponentially`);
      }
    });
  }

  private pruneBuckets(): void {
    for (const [ip, bucket] of this.buckets) if (bucket.isFull(this.clock.now())) this.buckets.delete(ip);
  }

  private registerMeta(): void {
    const served = this.options.config.versions;
    const { meta: metaTtl, ping: pingTtl } = this.options.config.cacheTtlSec;
    // The proxy answers these itself, so they are always fresh (Age 0), but they are GET
    // answers like any other and carry the same caching headers (contract section 4).
    const fresh = (reply: FastifyReply, ttlSec: number) => {
      const now = this.clock.now();
      return reply.headers(cacheHeaders({ status: 200, body: '', storedAtMs: now, ttlSec }, now));
    };
    this.app.get('/meta/versions/supported', async (_req, reply) => fresh(reply, metaTtl).send([...served]));
    this.app.get('/meta/versions/latest', async (_req, reply) =>
      fresh(reply, metaTtl).type('text/plain').send(latestServed(served)),
    );
    this.app.get('/ping', async (_req, reply) => fresh(reply, pingTtl).type('text/plain').send('pong'));
  }

  /**
   * Test controls, for loopback callers with the admin token only: switch the simulated
   * slurmctld/slurmdbd off and on, crash it, change limits, read its statistics and the prompts
   * its LLM endpoint received. Loopback is not enough: every user of the host, and every job
   * the simulator runs, is a loopback caller.
   */
  private registerAdmin(): void {
    this.app.addHook('onRequest', async (req, reply) => {
      // The route the router chose, not the raw URL: the router decodes the path, so
      // /%5Fsim/upstream reaches /_sim/upstream while its raw text does not start with /_sim.
      // This covers every admin route, the LLM endpoint's too, however it is spelled.
      const route = req.routeOptions.url ?? '';
      if (!route.startsWith(`${ADMIN_PREFIX}/`)) return;
      if (!isLoopback(req.socket.remoteAddress ?? '')) {
        return proxyError(reply, 403, 'Forbidden', 'the simulator admin endpoint answers loopback clients only');
      }
      if (!isAdminCredential(req.headers.authorization, this.adminToken)) {
        reply.header('www-authenticate', 'Bearer realm="schedflow-sim-admin"');
        return proxyError(
          reply,
          401,
          'Unauthorized',
          `the simulator admin endpoint needs its admin token: Authorization: Bearer <the contents of ${ADMIN_TOKEN_FILE} in the simulator's state dir>`,
        );
      }
    });
    this.app.get(`${ADMIN_PREFIX}/upstream`, async () => this.upstream);
    // The stand-in for `sacctmgr modify user <name> set MaxSubmitJobs=<n>` (null or -1: no limit).
    this.app.put<{ Params: { name: string }; Body: unknown }>(`${ADMIN_PREFIX}/users/:name`, async (req, reply) => {
      const limit = (req.body as { maxSubmitJobs?: unknown } | null)?.maxSubmitJobs;
      if (limit !== null && limit !== -1 && !(typeof limit === 'number' && Number.isInteger(limit) && limit >= 0)) {
        return proxyError(reply, 400, 'Bad Request', 'maxSubmitJobs must be a whole number, or null (or -1) for none');
      }
      this.associations.setMaxSubmitJobs(req.params.name, limit === -1 ? null : limit);
      this.options.logger.warn({ user: req.params.name, maxSubmitJobs: limit }, 'simulated submit limit changed');
      return { user: req.params.name, ...this.associations.of(req.params.name) };
    });
    // slurmctld killed with SIGKILL and back at once, its newest jobs not yet saved (see Cluster.crashLosingNewest).
    this.app.post<{ Body: unknown }>(`${ADMIN_PREFIX}/slurmctld/crash`, async (req, reply) => {
      const lose = (req.body as { loseNewest?: unknown } | null)?.loseNewest;
      if (!(typeof lose === 'number' && Number.isInteger(lose) && lose >= 0)) {
        return proxyError(reply, 400, 'Bad Request', 'loseNewest must be a whole number of jobs');
      }
      return { lost: this.cluster.crashLosingNewest(lose) };
    });
    this.app.get(`${ADMIN_PREFIX}/stats`, async () => ({
      requests: Object.fromEntries(this.requestCounts),
      bytes: Object.fromEntries(this.bytesSent),
    }));
    this.app.put<{ Body: unknown }>(`${ADMIN_PREFIX}/upstream`, async (req, reply) => {
      const body = req.body as Partial<Record<keyof UpstreamStatus, unknown>> | null;
      for (const key of ['slurmctld', 'slurmdbd'] as const) {
        const value = body?.[key];
        if (value === undefined) continue;
        if (value !== 'up' && value !== 'down') {
          return proxyError(reply, 400, 'Bad Request', `${key} must be "up" or "down"`);
        }
        this.upstream[key] = value === 'up';
        this.options.logger.warn({ [key]: value }, 'simulated upstream switched');
      }
      return this.upstream;
    });
  }

  /** Starts the cluster and listens; returns the base URL. */
  async start(): Promise<string> {
    await this.cluster.start();
    const { host, port } = this.options.config;
    try {
      await this.app.listen({ host, port });
    } catch (error) {
      await this.cluster.close();
      throw error;
    }
    const address = this.app.server.address();
    const actualPort = typeof address === 'object' && address ? address.port : port;
    const shownHost = host.includes(':') ? `[${host}]` : host;
    return `http://${shownHost}:${actualPort}`;
  }

  /** Stops listening, then the cluster; safe to call more than once. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      try {
        await this.app.close();
      } finally {
        await this.cluster.close();
      }
    })();
    return this.stopping;
  }
}

/**
 * A request Node's parser refused before any route: one whose request line and headers exceed
 * what slurmrestd reads gets slurmrestd's answer; anything else Fastify's (400, or 408 for a
 * request that took too long).
 */
function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, type, body] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? ['500 INTERNAL ERROR', 'text/plain', SLURMRESTD_TEXT.insaneLength]
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [
            '408 Request Timeout',
            'application/json',
            '{"error":"Request Timeout","message":"Client Timeout","statusCode":408}',
          ]
        : ['400 Bad Request', 'application/json', '{"error":"Bad Request","message":"Client Error","statusCode":400}'];
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: ${type}\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}
