import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../lib/clock.js';
import { type ApiVersion, isApiVersion } from '../sched/versions.js';
import type { Associations } from './associations.js';
import { type Authenticator, hasScope, type Principal } from './auth.js';
import type { Cluster } from './cluster.js';
import { type Flavor, hasRawComma, hasSlurmrestdCredential, SLURMRESTD_TEXT, sendSlurmrestdText } from './flavor.js';
import type { RenderContext } from './render/job-info.js';
import type { Plugin } from './render/meta.js';
import { envelope } from './render/meta.js';
import type { SimReservations } from './reservations.js';
import { cacheHeaders, isFresh, type ResponseCache, staleIfErrorSec, usableWhenStale } from './response-cache.js';
import type { CachedEndpoint, Scope, SimConfig } from './sim-config.js';
import type { SlurmError } from './slurm-errno.js';
import { UNSUPPORTED_BODY } from './submit-request.js';

/** Which simulated daemons the proxy can reach; switched by the admin endpoint. */
export interface UpstreamStatus {
  slurmctld: boolean;
  slurmdbd: boolean;
}

export interface ProxyContext {
  config: SimConfig;
  cluster: Cluster;
  cache: ResponseCache;
  /** What the cache's ages and lifetimes are read against (the jobs run in real time regardless). */
  clock: Clock;
  authenticator: Authenticator;
  associations: Associations;
  upstream: UpstreamStatus;
  /** Reservations made through the admin routes (`scontrol create reservation`'s stand-in). */
  reservations: SimReservations;
  /** Uid of a bearer token's user: the configured one, or a stable made-up one. */
  uidOf(user: string): number;
}

/** The caller and resolved version of one request. */
export interface CallContext {
  version: ApiVersion;
  flavor: Flavor;
  /**
   * Who the request acts for. Null on plain slurmrestd when the credential is one Slurm will not
   * accept: slurmrestd passes it on unchecked, and each endpoint answers slurmctld's or
   * slurmdbd's refusal its own way (see slurmrestd-answers.ts).
   */
  principal: Principal | null;
  render: RenderContext;
  envelope(plugin: Plugin, errors?: unknown[], warnings?: unknown[]): Record<string, unknown>;
}

export function latestServed(served: readonly ApiVersion[]): ApiVersion {
  return [...served].sort().at(-1) as ApiVersion;
}

/** Body of errors the proxy itself produces (not slurmrestd's): a short error and what to do. */
export function proxyError(reply: FastifyReply, status: number, error: string, message: string): FastifyReply {
  return reply.code(status).header('cache-control', 'no-store').send({ error, message, status });
}

export function slurmErrorEntry(error: SlurmError): Record<string, unknown> {
  return {
    description: error.description,
    error_number: error.errno,
    error: error.message,
    source: error.source,
  };
}

/**
 * A Slurm JSON answer, typed exactly as slurmrestd types it: `application/json`, no charset.
 * Sent as bytes, since Fastify adds `; charset=utf-8` to the type of a string it sends.
 */
export function sendSlurm(reply: FastifyReply, status: number, body: Record<string, unknown>): FastifyReply {
  return reply
    .code(status)
    .header('content-type', 'application/json')
    .send(Buffer.from(JSON.stringify(body)));
}

/**
 * Resolves the version, authenticates and checks the scope, in the order the flavor does:
 * the proxy checks the version first and answers in JSON; slurmrestd wants a credential
 * before anything (401 text), then a path it knows (404 text), then a query it can parse,
 * and leaves the credential itself to Slurm. Sends the answer itself and returns undefined
 * when the request may not proceed.
 */
export async function admit(
  ctx: ProxyContext,
  req: FastifyRequest<{ Params: { version: string } }>,
  reply: FastifyReply,
  scope: Scope,
  flavor: Flavor,
): Promise<CallContext | undefined> {
  const served = ctx.config.versions;
  const segment = req.params.version;
  const header = (name: string): string | undefined => {
    const value = req.headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  let version: ApiVersion;
  if (flavor.kind === 'slurmrestd') {
    if (!hasSlurmrestdCredential(req.headers)) {
      sendSlurmrestdText(reply, 401, SLURMRESTD_TEXT.unauthenticated);
      return undefined;
    }
    // slurmrestd serves the data parsers it was started with, by their names only (no `latest`).
    if (!isApiVersion(segment) || !served.includes(segment)) {
      sendSlurmrestdText(reply, 404, SLURMRESTD_TEXT.notFound);
      return undefined;
    }
    version = segment;
  } else {
    const resolved = segment === 'latest' ? latestServed(served) : segment;
    if (!isApiVersion(resolved) || !served.includes(resolved)) {
      proxyError(
        reply,
        400,
        'Bad Request',
        `unsupported API version "${segment}"; supported: ${served.join(', ')} (or latest)`,
      );
      return undefined;
    }
    version = resolved;
  }
  const auth = await ctx.authenticator.authenticate(
    {
      authorization: header('authorization'),
      userName: header(flavor.userName),
      userToken: header(flavor.userToken),
    },
    req.ip,
  );
  let principal: Principal | null = null;
  if (auth.ok) {
    principal = auth.principal;
  } else if (flavor.kind === 'proxy') {
    reply.header('www-authenticate', 'Bearer realm="scheduler"');
    proxyError(reply, 401, 'Unauthorized', auth.message);
    return undefined;
  }
  // Scopes are the proxy's; plain slurmrestd lets Slurm decide what a user may do.
  if (flavor.kind === 'proxy' && principal && !hasScope(principal, scope)) {
    proxyError(reply, 403, 'Forbidden', `token scope insufficient: this endpoint needs scope "${scope}"`);
    return undefined;
  }
  if (req.body === UNSUPPORTED_BODY) {
    if (flavor.kind === 'slurmrestd') sendSlurmrestdText(reply, 415, SLURMRESTD_TEXT.unknownMimeType);
    else proxyError(reply, 415, 'Unsupported Media Type', 'send the body as JSON, with Content-Type: application/json');
    return undefined;
  }
  if (hasRawComma(req.url)) {
    sendSlurmrestdText(reply, 500, SLURMRESTD_TEXT.unparsableQuery);
    return undefined;
  }
  const { clusterName, nodeName } = ctx.config;
  const user = principal?.user ?? header(flavor.userName) ?? '';
  return {
    version,
    flavor,
    principal,
    render: { version, clusterName, nodeName },
    envelope: (plugin, errors = [], warnings = []) =>
      envelope(
        plugin,
        { version, clusterName, clientSource: `${req.ip}:${req.socket.remotePort ?? 0}`, user },
        errors,
        warnings,
      ),
  };
}

function upstreamUp(ctx: ProxyContext, plugin: Plugin): boolean {
  return plugin === 'slurmctld' ? ctx.upstream.slurmctld : ctx.upstream.slurmdbd;
}

export function upstreamDown(reply: FastifyReply, plugin: Plugin): FastifyReply {
  return proxyError(
    reply,
    500,
    'Internal Server Error',
    `the scheduler (${plugin}) is unreachable; retry later, or send Cache-Control: stale-if-error=300 on reads to accept cached data`,
  );
}

/** A produced answer: status and JSON body. */
export interface Produced {
  status: number;
  body: Record<string, unknown>;
}

/**
 * Serves a GET: through the proxy's cache on the proxy flavor (the key includes the caller,
 * since what a caller may see can depend on who it is); plain slurmrestd has no cache and
 * sends no caching headers. `produce` answers an unreachable slurmctld or slurmdbd itself, as
 * slurmrestd does; the proxy never calls it then (it has its cache or its own 500).
 */
export async function cachedGet(
  ctx: ProxyContext,
  call: CallContext,
  req: FastifyRequest,
  reply: FastifyReply,
  endpoint: CachedEndpoint,
  plugin: Plugin,
  produce: () => Produced,
): Promise<FastifyReply> {
  if (call.flavor.kind === 'slurmrestd') {
    // No cache to fall back on: `produce` answers an outage as slurmrestd does.
    const produced = produce();
    return sendSlurm(reply, produced.status, produced.body);
  }
  const principal = call.principal;
  const who = !principal
    ? 'anonymous'
    : principal.kind === 'bearer'
      ? `b:${principal.user}:${principal.account}`
      : `m:${principal.user}`;
  const key = `${call.version} ${req.url.replace(/\/(latest|v0\.0\.\d+)\//, '/')} ${who}`;
  const now = ctx.clock.now();
  const entry = ctx.cache.get(key);
  if (entry && isFresh(entry, now)) {
    return reply
      .code(entry.status)
      .headers(cacheHeaders(entry, now))
      .header('content-type', 'application/json')
      .send(Buffer.from(entry.body));
  }
  if (!upstreamUp(ctx, plugin)) {
    const allowed = staleIfErrorSec(req.headers['cache-control']);
    if (entry && usableWhenStale(entry, now, allowed)) {
      return reply
        .code(entry.status)
        .headers(cacheHeaders(entry, now))
        .header('warning', '111 - "Revalidation Failed"')
        .header('content-type', 'application/json')
        .send(Buffer.from(entry.body));
    }
    return upstreamDown(reply, plugin);
  }
  const produced = produce();
  const stored = {
    status: produced.status,
    body: JSON.stringify(produced.body),
    storedAtMs: now,
    ttlSec: ctx.config.cacheTtlSec[endpoint],
  };
  if (produced.status === 200) ctx.cache.set(key, stored);
  return reply
    .code(stored.status)
    .headers(cacheHeaders(stored, now))
    .header('content-type', 'application/json')
    .send(Buffer.from(stored.body));
}
