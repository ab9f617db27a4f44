import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterSamplesSince } from '../../../src/db/cluster-samples.js';
import { createToken } from '../../../src/db/tokens.js';
import type { JobSpec } from '../../../src/sched/job-spec.js';
import { launchBrowser, type TestBrowser } from '../../helpers/browser.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { checkedFetch } from '../../helpers/openapi-check.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * The Cluster page in Chromium against the simulator: its figures are the API's (the same
 * shared answer), its charts have data (the sampled allocation, the nodes by state), a reader
 * without `admin` or `audit` sees the queue anonymised. Screenshots: /tmp/cluster-ui-*.png.
 */

let redis: TestRedis;
let sim: TestSim;
let td: TestDaemon;
let browser: TestBrowser;
let base: string;
let adminToken: string;
let readToken: string;

beforeAll(async () => {
  redis = await startTestRedis();
  sim = await startSim();
  td = await startTestDaemon(sim.url, redis.url, { clusterSampleEveryMs: 1000, clusterViewTtlMs: 4000 });
  if (!td.daemon.apiUrl) throw new Error('the test daemon has no local API');
  base = td.daemon.apiUrl;
  const store = td.daemon.history.store;
  adminToken = (await createToken(store, { name: 'cluster-admin', scopes: ['admin'] })).token;
  readToken = (await createToken(store, { name: 'cluster-reader', scopes: ['read'], owner: 'default' })).token;
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await td?.stop();
  await sim?.stop();
  await redis?.stop();
});

async function logIn(token: string, width?: number): Promise<Page> {
  const page = await browser.page({ width });
  await page.goto(`${base}/ui/jobs`);
  await page.getByLabel('Local API token').fill(token);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForURL(`${base}/ui/jobs`);
  return page;
}

async function api<T>(path: string, token: string): Promise<T> {
  const res = await checkedFetch(`${base}/api/v1/cluster/test/${path}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

interface PartitionsBody {
  fetched_at: string;
  partitions: {
    name: string;
    cpus: { allocated: number; idle: number; other: number; total: number };
    jobs: { running: number; pending: number };
  }[];
}
interface NodesBody {
  fetched_at: string;
  nodes: { name: string; allocated_cpus: number; cpus: number; job_ids: number[]; state: string }[];
}
interface QueueBody {
  jobs: { job_id: number; name: string | null; user: string | null }[];
}

/** Opens the page until its partitions and nodes are the answers the API gives (the view is read again every few seconds). */
async function pageMatching(page: Page, path: string, token: string) {
  for (let i = 0; ; i++) {
    await page.goto(`${base}${path}`);
    const shown = (view: string) =>
      page.locator(`[data-view="${view}"]`).getAttribute('data-view-fetched-at', { timeout: 5000 });
    const [shownPartitions, shownNodes] = [await shown('partitions'), await shown('nodes')];
    const partitions = await api<PartitionsBody>('partitions', token);
    const nodes = await api<NodesBody>('nodes', token);
    if (shownPartitions === partitions.fetched_at && shownNodes === nodes.fetched_at) return { partitions, nodes };
    if (i >= 20)
      throw new Error(`the page never showed the API's answer (${shownPartitions} vs ${partitions.fetched_at})`);
  }
}

describe('the Cluster page', () => {
  it('shows the partitions, nodes and queue as the API does, with the allocation over time and the nodes by state', async () => {
    const store = td.daemon.history.store;
    // A maintenance window in an hour (the simulator's stand-in for `scontrol create reservation`).
    const reserved = await fetch(`${sim.url}/_sim/reservations/maint`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', ...sim.admin },
      body: JSON.stringify({ startInSec: 3600, durationMin: 30, users: ['alice'], flags: ['MAINT'] }),
    });
    expect(reserved.ok).toBe(true);
    const ids = [];
    for (const name of ['cluster-a', 'cluster-b']) {
      ids.push(
        await td.daemon.submit({
          spec: { name, script: '#!/bin/sh\nsleep 120\n', current_working_directory: sim.workDir } as JobSpec,
          owner: 'default',
          actor: 'test',
          origin: 'api',
        }),
      );
    }
    for (const id of ids) await td.waitForState(id, 'running');
    const since = Date.now();
    // A few samples with the jobs on the node, so the chart has a line.
    await waitFor(
      async () => {
        const rows = await clusterSamplesSince(store, 'test', since);
        return new Set(rows.filter((r) => r.cpusAllocated > 0).map((r) => r.at)).size >= 3 || undefined;
      },
      { what: 'three samples with the running jobs', timeoutMs: 90_000 },
    );

    const page = await logIn(adminToken);
    await page.getByRole('link', { name: 'Cluster', exact: true }).click();
    await page.waitForURL(`${base}/ui/cluster/test`);
    const { partitions, nodes } = await pageMatching(page, '/ui/cluster/test', adminToken);

    // Every partition of the API's answer, with its CPUs and jobs.
    expect(partitions.partitions.length).toBeGreaterThan(0);
    for (const p of partitions.partitions) {
      const row = page.locator(`tr[data-partition="${p.name}"]`);
      await expect(row.locator('[data-cpus]').getAttribute('data-cpus')).resolves.toBe(
        `${p.cpus.allocated}/${p.cpus.idle}/${p.cpus.other}/${p.cpus.total}`,
      );
      await expect(row.locator('[data-running]').textContent()).resolves.toBe(String(p.jobs.running));
      await expect(row.locator('[data-pending]').textContent()).resolves.toBe(String(p.jobs.pending));
    }
    expect(partitions.partitions.some((p) => p.cpus.allocated >= 2 && p.jobs.running >= 2)).toBe(true);
    for (const n of nodes.nodes) {
      const row = page.locator(`tr[data-node="${n.name}"]`);
      await expect(row.locator('[data-cpus]').getAttribute('data-cpus')).resolves.toBe(`${n.allocated_cpus}/${n.cpus}`);
      await expect(row.locator('[data-jobs]').getAttribute('data-jobs')).resolves.toBe(n.job_ids.join(','));
    }

    const { reservations } = await api<{ reservations: { name: string; users: string[]; flags: string[] }[] }>(
      'reservations',
      adminToken,
    );
    expect(reservations.map((r) => r.name)).toEqual(['maint']);
    const maint = page.locator('tr[data-reservation="maint"]');
    await expect(maint.locator('td[data-label="For"]').textContent()).resolves.toBe('users alice');
    await expect(maint.locator('td[data-label="Flags"]').textContent()).resolves.toContain('MAINT');

    // The allocation chart: the samples drawn, one line per partition that has them.
    const chart = page.locator('svg[aria-label="allocated CPUs by partition over time"]');
    expect(Number(await chart.getAttribute('data-samples'))).toBeGreaterThanOrEqual(3);
    expect(await chart.locator('path').count()).toBe(partitions.partitions.length);
    expect(await chart.locator('circle').count()).toBeGreaterThanOrEqual(3);
    // The nodes by state: the parts add up to the node listing.
    const parts = page.locator('svg[aria-label="nodes by state"] rect[data-state]');
    const counts = await parts.evaluateAll((els) => els.map((e) => Number(e.getAttribute('data-count'))));
    expect(counts.reduce((a, b) => a + b, 0)).toBe(nodes.nodes.length);

    // The queue: an admin sees whose jobs they are.
    const queue = await api<QueueBody>('queue', adminToken);
    for (const j of queue.jobs) {
      await expect(page.locator(`tr[data-job="${j.job_id}"] td[data-label="Name"]`).textContent()).resolves.toBe(
        j.name ?? '',
      );
    }
    await expect(page.locator('tr[data-job] td[data-label="Name"]', { hasText: 'cluster-a' }).count()).resolves.toBe(1);
    await page.screenshot({ path: '/tmp/cluster-ui-admin.png', fullPage: true });
    await browser.screenshot(page, 'cluster');

    // A reader without admin or audit: the same figures, the queue without names, users, accounts.
    const reader = await logIn(readToken);
    await reader.goto(`${base}/ui/cluster/test`);
    await expect(reader.getByText(/shown to admins and auditors only/).isVisible()).resolves.toBe(true);
    await expect(reader.locator('tr[data-job] td[data-label="Name"]', { hasText: 'cluster-a' }).count()).resolves.toBe(
      0,
    );
    await expect(reader.locator('tr[data-job] td[data-label="User"]').first().textContent()).resolves.toBe('hidden');
    await reader.screenshot({ path: '/tmp/cluster-ui-reader.png', fullPage: true });

    // On a phone: the tables become cards, the charts scale down.
    const phone = await logIn(adminToken, 390);
    await phone.goto(`${base}/ui/cluster/test?hours=1`);
    await phone.screenshot({ path: '/tmp/cluster-ui-phone.png', fullPage: true });
    // The first screen alone, at the phone's own size: the charts must be readable there.
    await phone.screenshot({ path: '/tmp/cluster-ui-phone-charts.png' });

    // An unknown profile: a page saying which there are, not an error.
    const missing = await page.goto(`${base}/ui/cluster/nope`);
    expect(missing?.status()).toBe(404);
    await expect(page.getByRole('link', { name: 'test' }).isVisible()).resolves.toBe(true);
  }, 240_000);
});
