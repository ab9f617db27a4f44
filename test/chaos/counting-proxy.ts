import { appendFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TokenBucket } from '../../src/lib/token-bucket.js';

/** What the upstream was asked, by kind of request, and how it answered. */
export interface UpstreamCounts {
  total: number;
  byEndpoint: Record<string, number>;
  /** Answers by status (`429`, `502`, …; `network` when the upstream could not be reached). */
  byStatus: Record<string, number>;
}

export interface CountingProxy {
  url: string;
  counts(): UpstreamCounts;
  reset(): void;
  /**
   * For `durationMs`, every request is answered 429 with `Retry-After: retryAfterSec` by the proxy
   * itself, never forwarded (a site proxy's rate limit tripped by others: a 429 storm).
   */
  storm(durationMs: number, retryAfterSec?: number): void;
  close(): Promise<void>;
}

/** The kind of a scheduler-API request, from its method and path. */
export function endpointOf(method: string, url: string): string {
  const path = url.split('?')[0] ?? '';
  if (method === 'POST' && /\/job\/submit$/.test(path)) return 'submit';
  if (/^\/(sched|slurm)\/[^/]+\/jobs\/state$/.test(path)) return 'jobs/state';
  if (/^\/(sched|slurm)\/[^/]+\/jobs$/.test(path)) return 'controller listing';
  if (method === 'DELETE') return 'cancel';
  if (/^\/(sched|slurm)\/[^/]+\/job\//.test(path)) return 'controller job';
  if (path.startsWith('/scheddb/') || path.startsWith('/slurmdb/')) return 'accounting';
  if (/ping$/.test(path)) return 'ping';
  return 'other';
}

/** A site proxy's rate limit: a token bucket over every request, answered 429 when empty. */
export interface ProxyBucket {
  capacity: number;
  refillPerSecond: number;
}

/**
 * A loopback HTTP proxy in front of the simulator (or a real slurmrestd) that counts every request the daemon
 * sends upstream (the simulator's own counters start again when it restarts; these do not).
 * An upstream that cannot be reached (stopped, restarting) drops the client's connection,
 * as a dead upstream would, and counts as `network`. `latencyMs` delays every request (a slow
 * site proxy), so work is in flight when a fault lands. With a `bucket`, it limits the rate as
 * the site proxy does: a request that finds the bucket empty is answered 429, never forwarded.
 */
export async function startCountingProxy(
  target: string,
  latencyMs = 0,
  options: {
    bucket?: ProxyBucket;
    /** Told of every request as it comes: its kind and when (a benchmark's timeline). */
    onRequest?(endpoint: string, atMs: number): void;
  } = {},
): Promise<CountingProxy> {
  const { bucket, onRequest } = options;
  const limit = bucket && new TokenBucket(bucket.capacity, bucket.refillPerSecond);
  const upstream = new URL(target);
  // Every request's time, status and URL, for finding out where a scenario's requests go.
  const urlLog = process.env.CHAOS_URL_LOG;
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  let counts: UpstreamCounts = { total: 0, byEndpoint: {}, byStatus: {} };
  let stormUntil = 0;
  let stormRetryAfterSec = 1;
  const bump = (record: Record<string, number>, key: string) => {
    record[key] = (record[key] ?? 0) + 1;
  };
  const server = createServer((req, res) => {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    counts.total++;
    const endpoint = endpointOf(method, url);
    bump(counts.byEndpoint, endpoint);
    onRequest?.(endpoint, performance.now());
    const limited = limit !== undefined && !limit.tryTake();
    if (limited || Date.now() < stormUntil) {
      bump(counts.byStatus, '429');
      req.resume();
      // The body the scheduler proxy's own rate limit answers with (src/sim/proxy-context.ts).
      res.writeHead(429, {
        'content-type': 'application/json',
        'cache-control': 'no-store',
        'retry-after': String(limited ? 1 : stormRetryAfterSec),
      });
      const message = limited ? 'rate limit exceeded' : 'rate limit exceeded (storm)';
      res.end(JSON.stringify({ error: 'Too Many Requests', message, status: 429 }));
      return;
    }
    const headers = { ...req.headers, host: upstream.host };
    const startedAt = Date.now();
    req.pause();
    setTimeout(() => forward(), latencyMs);
    const forward = () => {
      const out = request(
        { host: upstream.hostname, port: upstream.port, method, path: url, headers, agent },
        (answer) => {
          bump(counts.byStatus, String(answer.statusCode ?? 0));
          if (urlLog) {
            appendFileSync(urlLog, `${Date.now()} ${answer.statusCode} ${method} ${url} ${Date.now() - startedAt}ms\n`);
          }
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
          answer.on('error', () => res.destroy());
        },
      );
      out.on('error', () => {
        bump(counts.byStatus, 'network');
        req.socket.destroy();
      });
      req.pipe(out);
      req.resume();
      req.on('error', () => out.destroy());
    };
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    counts: () => structuredClone(counts),
    reset: () => {
      counts = { total: 0, byEndpoint: {}, byStatus: {} };
    },
    storm: (durationMs, retryAfterSec = 1) => {
      stormUntil = Date.now() + durationMs;
      stormRetryAfterSec = retryAfterSec;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        agent.destroy();
        server.close(() => resolve());
      }),
  };
}

/** What was counted between two readings of the same proxy. */
export function countsSince(before: UpstreamCounts, after: UpstreamCounts): UpstreamCounts {
  const minus = (a: Record<string, number>, b: Record<string, number>) =>
    Object.fromEntries(
      Object.entries(a)
        .map(([k, n]) => [k, n - (b[k] ?? 0)] as const)
        .filter(([, n]) => n > 0),
    );
  return {
    total: after.total - before.total,
    byEndpoint: minus(after.byEndpoint, before.byEndpoint),
    byStatus: minus(after.byStatus, before.byStatus),
  };
}
