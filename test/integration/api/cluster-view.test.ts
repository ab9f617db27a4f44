import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/logger.js';
import { RedisClusterCache } from '../../../src/redis/cluster-cache.js';
import { redisOptions } from '../../../src/redis/redis-server.js';
import { ClusterView } from '../../../src/sched/cluster-view.js';
import { apiClient, errorOf } from '../../helpers/api.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { connectAsAlice } from '../../helpers/sim.js';

/**
 * Issue 34's cluster view through the local API of a daemon on the simulator, beside a second web
 * process of the same deployment (a ClusterView of its own, its own scheduler client and Redis
 * connection, the daemon's Redis and queue prefix): 50 viewers of each view at once cost
 * the upstream one request per listing, and again one once the answer has expired; the queue
 * lists every user's jobs, anonymised for a token without admin or audit; an outage serves the
 * last answer marked stale.
 */

const env = daemonTestEnv();

/** The simulator's count of requests served, by method and route (GET /_sim/stats). */
async function upstreamCounts(sim: { url: string; admin: Record<string, string> }): Promise<Record<string, number>> {
  const res = await fetch(`${sim.url}/_sim/stats`, { headers: sim.admin });
  return ((await res.json()) as { requests: Record<string, number> }).requests;
}

const LISTINGS = ['partitions', 'nodes', 'reservations', 'jobs'] as const;
const listingCounts = async (sim: { url: string; admin: Record<string, string> }) => {
  const counts = await upstreamCounts(sim);
  return Object.fromEntries(LISTINGS.map((l) => [l, counts[`GET /sched/:version/${l}`] ?? 0]));
};

const VIEWS = ['partitions', 'nodes', 'reservations', 'queue'] as const;

describe('the cluster view', () => {
  it('50 viewers of each view, over two web processes, cost the upstream one read per listing per lifetime', {
    timeout: 90_000,
  }, async () => {
    const sim = await env.sim({
      cpus: 2,
      partitions: [
        { name: 'debug', default: true },
        { name: 'lab-owner', allowAccounts: ['lab'] },
      ],
    });
    // Long enough for 200 API calls on a loaded machine to fit in one lifetime (10 s did not,
    // beside four other files).
    const ttlMs = 20_000;
    const a = await env.daemon(sim.url, { clusterViewTtlMs: ttlMs });
    const apiA = apiClient(a);
    const reader = await apiA.token(['read'], 'viewer');
    // The other web process: the same Redis and prefix, a client and a connection of its own.
    const logger = createLogger({ level: 'silent' });
    const otherClient = await connectAsAlice(sim.url, logger);
    const otherRedis = new Redis({ ...redisOptions(a.daemon.redis), maxRetriesPerRequest: 1 });
    env.defer(async () => {
      await otherClient.close();
      otherRedis.disconnect();
    });
    const other = new ClusterView({
      cache: new RedisClusterCache(otherRedis),
      prefix: a.daemon.config.queuePrefix,
      clientFor: () => otherClient,
      ttlMs,
      logger,
    });

    // A job of alice's on the node, so that the views have something in them.
    await fetch(`${sim.url}/_sim/reservations/maint`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', ...sim.admin },
      body: JSON.stringify({ startInSec: 3600, durationMin: 30, users: ['alice'], flags: ['MAINT'] }),
    });

    // The partition samples' tick (workers/cluster-samples.ts) reads the view as the workers
    // start: once its answer is in, it is let go, so that the viewers below find none.
    const prefix = a.daemon.config.queuePrefix;
    const keys = LISTINGS.filter((l) => l !== 'reservations').map((l) => `${prefix}:cluster:test:${l}`);
    await waitFor(async () => ((await otherRedis.exists(...keys)) === keys.length ? true : undefined), {
      what: "the samples tick's read of the partitions",
      timeoutMs: 30_000,
    });
    await otherRedis.del(...keys);
    const before = await listingCounts(sim);
    // 40 viewers of each view through the API, 10 through the other process.
    const viewAll = async () => {
      const [api, elsewhere] = await Promise.all([
        Promise.all(
          VIEWS.flatMap((view) =>
            Array.from({ length: 40 }, () => apiA.call('GET', `/api/v1/cluster/test/${view}`, { token: reader })),
          ),
        ),
        Promise.all(VIEWS.flatMap((view) => Array.from({ length: 10 }, () => other.view('test', view)))),
      ]);
      for (const answer of elsewhere) expect(answer.stale).toBe(false);
      return api;
    };
    const first = await viewAll();
    for (const r of first) expect(r.status, r.text).toBe(200);
    const after = await listingCounts(sim);
    // Partitions are made of partitions, nodes and jobs; nodes of nodes and jobs; the queue of jobs.
    expect(Object.fromEntries(LISTINGS.map((l) => [l, (after[l] ?? 0) - (before[l] ?? 0)]))).toEqual({
      partitions: 1,
      nodes: 1,
      reservations: 1,
      jobs: 1,
    });
    // Every viewer got the same answer, of one read.
    const fetchedAt = new Set(first.map((r) => (r.json as { fetched_at: string }).fetched_at));
    expect(fetchedAt.size).toBeLessThanOrEqual(LISTINGS.length);

    const partitions = first[0]?.json as { partitions: { name: string; access: { allowed_accounts: string[] } }[] };
    expect(partitions.partitions.map((p) => [p.name, p.access.allowed_accounts])).toEqual([
      ['debug', []],
      ['lab-owner', ['lab']],
    ]);
    const reservations = first[80]?.json as { reservations: { name: string; flags: string[]; users: string[] }[] };
    expect(reservations.reservations).toMatchObject([
      { name: 'maint', flags: ['MAINT', 'SPEC_NODES'], users: ['alice'] },
    ]);

    // Within the lifetime: nothing more upstream.
    const firstBody = first[0]?.json as { fetched_at: string };
    const readAt = Date.parse(firstBody.fetched_at);
    await viewAll();
    if (Date.now() - readAt < ttlMs) expect(await listingCounts(sim)).toEqual(after);

    // Past it: one more read per listing, however many ask. The lifetime runs from when each
    // answer was kept (its entry's fetchedAtMs), which comes after Slurm produced it (the answer's
    // fetched_at): under load, seconds after.
    const keptAt = await Promise.all(
      LISTINGS.map(async (l) => {
        const text = await otherRedis.get(`${prefix}:cluster:test:${l}`);
        return text === null ? 0 : ((JSON.parse(text) as { fetchedAtMs?: number }).fetchedAtMs ?? 0);
      }),
    );
    const expiresAt = Math.max(readAt, ...keptAt) + ttlMs;
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now()) + 200));
    const expiredFrom = await listingCounts(sim);
    await viewAll();
    const later = await listingCounts(sim);
    expect(Object.fromEntries(LISTINGS.map((l) => [l, (later[l] ?? 0) - (expiredFrom[l] ?? 0)]))).toEqual({
      partitions: 1,
      nodes: 1,
      reservations: 1,
      jobs: 1,
    });
  });

  it('the queue: every user’s jobs, anonymised without admin or audit; an outage serves the last answer, stale', {
    timeout: 60_000,
  }, async () => {
    const sim = await env.sim({ cpus: 2 });
    const td = await env.daemon(sim.url, { clusterViewTtlMs: 1000 });
    const api = apiClient(td);
    const reader = await api.token(['read'], 'reader');
    const admin = await api.token(['admin'], 'ops');
    const submitted = await api.call('POST', '/api/v1/jobs', {
      token: admin,
      body: { spec: { name: 'queued-one', script: '#!/bin/sh\nsleep 30\n', current_working_directory: sim.workDir } },
    });
    expect(submitted.status, submitted.text).toBe(201);
    const seen = await waitFor(
      async () => {
        const r = await api.call('GET', '/api/v1/cluster/test/queue', { token: admin });
        const jobs = (r.json as { jobs: { name: string | null; state: string }[] }).jobs;
        return jobs.some((j) => j.name === 'queued-one' && j.state === 'RUNNING') ? r : undefined;
      },
      { what: 'the job running in the queue view', timeoutMs: 20_000, intervalMs: 300 },
    );
    expect(seen.json).toMatchObject({ anonymised: false, stale: false, view: 'queue' });
    const asReader = await api.call('GET', '/api/v1/cluster/test/queue', { token: reader });
    const body = asReader.json as { anonymised: boolean; jobs: Record<string, unknown>[] };
    expect(body.anonymised).toBe(true);
    expect(body.jobs.length).toBeGreaterThan(0);
    for (const job of body.jobs) expect([job.name, job.user, job.account]).toEqual([null, null, null]);
    expect(body.jobs[0]).toMatchObject({ state: 'RUNNING', partition: expect.any(String) });
    const nodes = await api.call('GET', '/api/v1/cluster/test/nodes', { token: reader });
    expect((nodes.json as { nodes: { job_ids: number[]; allocated_cpus: number }[] }).nodes[0]).toMatchObject({
      allocated_cpus: 1,
      job_ids: [expect.any(Number)],
    });

    // slurmctld gone: past the lifetime, the last answer, said stale and why.
    await fetch(`${sim.url}/_sim/upstream`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', ...sim.admin },
      body: JSON.stringify({ slurmctld: 'down' }),
    });
    await new Promise((r) => setTimeout(r, 1200));
    const stale = await waitFor(
      async () => {
        const r = await api.call('GET', '/api/v1/cluster/test/nodes', { token: reader });
        return (r.json as { stale?: boolean }).stale ? r : undefined;
      },
      { what: 'a stale answer', timeoutMs: 30_000, intervalMs: 500 },
    );
    expect(stale.status).toBe(200);
    expect(stale.json).toMatchObject({ stale: true, stale_reason: expect.any(String) });

    // A view never read before has nothing to serve: 503 with what the scheduler said.
    const none = await api.call('GET', '/api/v1/cluster/test/reservations', { token: reader });
    expect(none.status, none.text).toBe(503);
    expect(errorOf(none).code).toBe('SCHEDFLOW_ERR_CLUSTER_VIEW_UNAVAILABLE');

    // Unknown profile and view: 404 and 400; no token: 401.
    expect((await api.call('GET', '/api/v1/cluster/nope/nodes', { token: reader })).status).toBe(404);
    expect((await api.call('GET', '/api/v1/cluster/test/gpus', { token: reader })).status).toBe(400);
    expect((await api.call('GET', '/api/v1/cluster/test/nodes')).status).toBe(401);
  });
});
