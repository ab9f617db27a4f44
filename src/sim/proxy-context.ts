import type { FastifyReply, FastifyRequest } from 'fastify';
import { type ApiVersion, isApiVersion } from '../sched/versions.js';
import { type Authenticator, hasScope, type Principal } from './auth.js';
import type { Cluster } from './cluster.js';
import type { RenderContext } from './render/job-info.js';
import type { Plugin } from './render/meta.js';
import { envelope } from './render/meta.js';
import { cacheHeaders, isFresh, type ResponseCache, staleIfErrorSec, usableWhenStale } from './response-cache.js';
import type { CachedEndpoint, Scope, SimConfig } from './sim-config.js';
import type { SlurmError } from './slurm-errno.js';

/** Which simulated daemons the proxy can reach; switched by the admin endpoint. */
export interface UpstreamStatus {
  slurmctld: boolean;
  slurmdbd: boolean;
}

/** Header names a flavor reads for the user-name/token pair. */
export interface FlavorHeaders {
  userName: string;
  userToken: string;
}

export interface ProxyContext {
  config: SimConfig;
  cluster: Cluster;
  cache: ResponseCache;
  authenticator: Authenticator;
  upstream: UpstreamStatus;
  /** Uid of a bearer token's user: the configured one, or a stable made-up one. */
  uidOf(user: string): number;
}

/** The authenticated caller and resolved version of one request. */
export interface CallContext {
  version: ApiVersion;
  principal: Principal;
  render: RenderContext;
  envelope(plugin: Plugin, errors?: unknown[]): Record<string, unknown>;
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
    error: error.message,
    error_number: error.errno,
    description: error.description,
    source: error.source,
  };
}

/**
 * Resolves the version, authenticates and checks the scope. Sends the error
 * answer itself and returns undefined when the request may not proceed.
 */
export async function admit(
  ctx: ProxyContext,
  req: FastifyRequest<{ Params: { version: string } }>,
  reply: FastifyReply,
  scope: Scope,
  headers: FlavorHeaders,
): Promise<CallContext | undefined> {
  const served = ctx.config.versions;
  const segment = req.params.version;
  const version = segment === 'latest' ? latestServed(served) : segment;
  if (!isApiVersion(version) || !served.includes(version)) {
    proxyError(
      reply,
      400,
      'Bad Request',
      `unsupported API version "${segment}"; supported: ${served.join(', ')} (or latest)`,
    );
    return undefined;
  }
  const header = (name: string): string | undefined => {
    const value = req.headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const auth = await ctx.authenticator.authenticate(
    {
      authorization: header('authorization'),
      userName: header(headers.userName),
      userToken: header(headers.userToken),
    },
    req.ip,
  );
  if (!auth.ok) {
    reply.header('www-authenticate', 'Bearer realm="scheduler"');
    proxyError(reply, 401, 'Unauthorized', auth.message);
    return undefined;
  }
  const principal = auth.principal;
  if (!hasScope(principal, scope)) {
    proxyError(reply, 403, 'Forbidden', `token scope insufficient: this endpoint needs scope "${scope}"`);
    return undefined;
  }
  const { clusterName, nodeName } = ctx.config;
  return {
    version,
    principal,
    render: { version, clusterName, nodeName },
    envelope: (plugin, errors = []) =>
      envelope(
        plugin,
        { version, clusterName, clientSource: `${req.ip}:${req.socket.remotePort ?? 0}`, user: principal.user },
        errors,
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
 * Serves a GET through the proxy cache. The key includes the caller, since
 * what a caller may see can depend on who it is.
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
  const who =
    call.principal.kind === 'bearer'
      ? `b:${call.principal.user}:${call.principal.account}`
      : `m:${call.principal.user}`;
  const key = `${call.version} ${req.url.replace(/\/(latest|v0\.0\.\d+)\//, '/')} ${who}`;
  const now = Date.now();
  const entry = ctx.cache.get(key);
  if (entry && isFresh(entry, now)) {
    return reply.code(entry.status).headers(cacheHeaders(entry, now)).type('application/json').send(entry.body);
  }
  if (!upstreamUp(ctx, plugin)) {
    const allowed = staleIfErrorSec(req.headers['cache-control']);
    if (entry && usableWhenStale(entry, now, allowed)) {
      return reply
        .code(entry.status)
        .headers(cacheHeaders(entry, now))
        .header('warning', '111 - "Revalidation Failed"')
        .type('application/json')
        .send(entry.body);
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
  return reply.code(stored.status).headers(cacheHeaders(stored, now)).type('application/json').send(stored.body);
}
