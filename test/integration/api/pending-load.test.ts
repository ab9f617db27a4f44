import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/logger.js';
import { RedisClusterCache } from '../../../src/redis/cluster-cache.js';
import { redisOptions } from '../../../src/redis/redis-server.js';
import { ClusterView } from '../../../src/sched/cluster-view.js';
import { apiClient } from '../../helpers/api.js';
import { launchBrowser } from '../../helpers/browser.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';

/**
 * Issue 34, "why a job waits": where the cluster view knows it, a pending job's page says its
 * partition's load, read from the view's last kept answer and never from the scheduler: with
 * nobody having viewed the cluster it is not known (and job pages read nothing upstream); once
 * one viewer has read the partitions, every job page shows it, still reading nothing more.
 */

const env = daemonTestEnv();

const partitionReads = async (sim: { url: string; admin: Record<string, string> }) => {
  const res = await fetch(`${sim.url}/_sim/stats`, { headers: sim.admin });
  const counts = ((await res.json()) as { requests: Record<string, number> }).requests;
  return {
    partitions: counts['GET /sched/:version/partitions'] ?? 0,
    nodes: counts['GET /sched/:version/nodes'] ?? 0,
  };
};

interface LoadShown {
  name: string;
  state: string;
  cpus_allocated: number;
  cpus_idle: number;
  cpus_total: number;
  jobs_running: number;
  jobs_pending: number;
  as_of: string;
}

describe("a pending job's partition load", () => {
  it('is null with an empty cluster view (no upstream read), and shown once the view was read', {
    timeout: 90_000,
  }, async () => {
    const sim = await env.sim({
      cpus: 2,
      partitions: [
        { name: 'debug', default: true },
        { name: 'lab-owner', allowAccounts: ['lab'] },
      ],
    });
    // The daemon samples the partitions for the Cluster page's chart once at its start, then
    // not within this test.
    const td = await env.daemon(sim.url, {
      clusterViewTtlMs: 30_000,
      clusterSampleEveryMs: 3_600_000,
      pendingDetailsEveryMs: 1000,
    });
    const redis = new Redis({ ...redisOptions(td.daemon.redis), maxRetriesPerRequest: 1 });
    env.defer(async () => {
      redis.disconnect();
    });
    const viewKeys = `${td.daemon.config.queuePrefix}:cluster:test:*`;
    const api = apiClient(td);
    const admin = await api.token(['admin'], 'ops');
    const submit = async (name: string, script: string) => {
      const res = await api.call('POST', '/api/v1/jobs', {
        token: admin,
        // No partition named: the default one, as the controller's listing of the job says.
        body: { spec: { name, script, cpus_per_task: 2, time_limit: 5, current_working_directory: sim.workDir } },
      });
      expect(res.status, res.text).toBe(201);
      return (res.json as { id: string }).id;
    };
    const blocker = await submit('blocker', '#!/bin/sh\nsleep 300\n');
    await td.waitForState(blocker, 'running', 30_000);
    const waiter = await submit('waiter', '#!/bin/sh\ntrue\n');
    await td.waitForState(waiter, 'pending', 30_000);
    const detail = async () => {
      const res = await api.call('GET', `/api/v1/jobs/${waiter}`, { token: admin });
      expect(res.status, res.text).toBe(200);
      return (res.json as { pending: { reason: string | null; partition: LoadShown | null } | null }).pending;
    };

    // Nobody has viewed the cluster: its cache emptied (of the start's sample), not known, and
    // twenty job pages read nothing upstream.
    const sampled = ['partitions', 'nodes', 'jobs'].map((l) => `${td.daemon.config.queuePrefix}:cluster:test:${l}`);
    await waitFor(async () => ((await redis.exists(...sampled)) === sampled.length ? true : undefined), {
      what: "the start's sample of the partitions",
      timeoutMs: 30_000,
    });
    await redis.del(...(await redis.keys(viewKeys)));
    const before = await partitionReads(sim);
    const pages = await Promise.all(Array.from({ length: 20 }, detail));
    for (const pending of pages) expect(pending?.partition).toBeNull();
    const unknown = await runCli(['jobs', 'show', waiter, '--data-dir', td.dataDir]);
    expect(unknown.code, unknown.stderr).toBe(0);
    expect(unknown.stdout).toMatch(/^partition load not known: the cluster view keeps no recent answer/m);
    expect(await partitionReads(sim)).toEqual(before);

    // One viewer reads the partitions (one upstream read), and every job page knows the load.
    const view = await api.call('GET', '/api/v1/cluster/test/partitions', { token: admin });
    expect(view.status, view.text).toBe(200);
    const filled = await partitionReads(sim);
    expect(filled.partitions - before.partitions).toBe(1);
    const viewFetchedAt = (view.json as { fetched_at: string }).fetched_at;

    const shown = await Promise.all(Array.from({ length: 20 }, detail));
    for (const pending of shown) {
      expect(pending?.partition).toEqual({
        name: 'debug',
        state: 'UP',
        cpus_allocated: 2,
        cpus_idle: 0,
        cpus_total: 2,
        jobs_running: 1,
        jobs_pending: 1,
        as_of: expect.any(String),
      });
      expect(Date.parse(pending?.partition?.as_of ?? '')).toBeLessThanOrEqual(Date.parse(viewFetchedAt) + 1000);
    }
    const show = await runCli(['jobs', 'show', waiter, '--data-dir', td.dataDir]);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toMatch(/^partition debug: 2\/2 CPUs allocated, 1 job running, 1 job pending \(as of .+\)$/m);
    const json = await runCli(['jobs', 'show', waiter, '--data-dir', td.dataDir, '--json']);
    expect(
      (JSON.parse(json.stdout) as { request: { pending: { partition: LoadShown | null } } }).request.pending.partition
        ?.name,
    ).toBe('debug');
    // The job pages and the CLI read nothing more upstream.
    expect(await partitionReads(sim)).toEqual(filled);

    // The last answer only, never a read (a client that throws is never asked), and none once
    // it is older than 10 lifetimes.
    const lastOnly = (skewMs: number) =>
      new ClusterView({
        cache: new RedisClusterCache(redis),
        prefix: td.daemon.config.queuePrefix,
        clientFor: () => {
          throw new Error('lastAnswer must not read the scheduler');
        },
        ttlMs: 30_000,
        logger: createLogger({ level: 'silent' }),
        clock: { now: () => Date.now() + skewMs, sleep: (ms) => new Promise((r) => setTimeout(r, ms)) },
      });
    expect((await lastOnly(0).lastAnswer('test', 'partitions'))?.data.map((p) => p.name)).toEqual([
      'debug',
      'lab-owner',
    ]);
    expect(await lastOnly(11 * 30_000).lastAnswer('test', 'partitions')).toBeNull();
    expect(await lastOnly(0).lastAnswer('other-profile', 'partitions')).toBeNull();

    // The UI's job page says it, as a person reads it.
    const browser = await launchBrowser();
    env.defer(() => browser.close());
    const page = await browser.page();
    const base = `${td.daemon.apiUrl}/ui`;
    await page.goto(`${base}/jobs`);
    await page.getByLabel('Local API token').fill(admin);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${base}/jobs`);
    await page.goto(`${base}/jobs/${waiter}`);
    expect(await page.getByTestId('pending-partition').textContent()).toMatch(
      /^debug: 2\/2 CPUs allocated, 1 job running, 1 job pending \(as of .*\d{2}:\d{2}.*\)$/,
    );
    await browser.screenshot(page, 'pending-load-job');
    expect(await partitionReads(sim)).toEqual(filled);

    // The list omits it; once the job runs, nothing says it waits.
    const list = await api.call('GET', '/api/v1/jobs?state=pending', { token: admin });
    const listed = (list.json as { items: { id: string; pending: object | null }[] }).items.find(
      (j) => j.id === waiter,
    );
    expect(listed?.pending).not.toHaveProperty('partition');
    expect((await api.call('DELETE', `/api/v1/jobs/${blocker}`, { token: admin })).status).toBeLessThan(300);
    await waitFor(async () => ((await detail()) === null ? true : undefined), {
      what: 'the waiter no longer pending',
      timeoutMs: 30_000,
    });
  });
});
