import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getRequest } from '../../../src/db/requests.js';
import { createToken } from '../../../src/db/tokens.js';
import { Secret } from '../../../src/lib/secret.js';
import { apiClient } from '../../helpers/api.js';
import { launchBrowser, type TestBrowser } from '../../helpers/browser.js';
import { runCli } from '../../helpers/cli-process.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import type { RecordedRequest } from '../../helpers/flaky-proxy.js';
import { waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';
import { pendingSubmitter, startWaitingDaemon } from './pending-why-daemon.js';

/**
 * Why a job waits, while it waits (issue 34): a job behind another on a full simulator shows
 * Slurm's reason, in plain words with what to do, and the scheduler's expected start, through
 * the API, the CLI and the UI; once it runs, all of it is gone.
 */

const UI_PASSWORD = 'pending why password';

let redis: TestRedis;
let sim: TestSim;
let td: TestDaemon;
let browser: TestBrowser;

beforeAll(async () => {
  redis = await startTestRedis();
  sim = await startSim({ cpus: 1 });
  // A pending job's record read every second (30 s by default), so the test need not wait.
  td = await startTestDaemon(sim.url, redis.url, { uiPassword: new Secret(UI_PASSWORD), pendingDetailsEveryMs: 1000 });
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await td?.stop();
  await sim?.stop();
  await redis?.stop();
});

interface PendingShown {
  reason: string | null;
  meaning: string | null;
  action: string | null;
  expected_start: string | null;
}

describe('a job waiting for Resources', () => {
  it('shows the reason, in plain words, and an expected start; cleared once it runs', async () => {
    const store = td.daemon.history.store;
    const api = apiClient(td);
    const token = await createToken(store, { name: 'pending-reader', scopes: ['admin'], owner: 'default' });
    const submit = pendingSubmitter(td, sim);
    const blocker = await submit('blocker', '#!/bin/sh\nsleep 300\n');
    const running = await td.waitForState(blocker, 'running');
    const waiting = await submit('waiter', '#!/bin/sh\ntrue\n');

    // The API: reason, words, what to do, and the forecast: the blocker's start + its 5 minutes.
    const shown = await waitFor(
      async () => {
        const res = await api.call('GET', `/api/v1/jobs/${waiting}`, { token: token.token });
        const job = res.json as { state: string; pending: PendingShown | null };
        return job.state === 'pending' && job.pending?.expected_start ? job.pending : undefined;
      },
      { what: 'the pending job with its reason and expected start', timeoutMs: 60_000 },
    );
    expect(shown.reason).toBe('Resources');
    expect(shown.meaning).toContain('free CPUs');
    expect(shown.action).toMatch(/\w/);
    const started = Math.floor((running.startedAt ?? 0) / 1000) * 1000;
    expect(Date.parse(shown.expected_start ?? '')).toBe(started + 5 * 60_000);
    // The list says it too.
    const list = await api.call('GET', '/api/v1/jobs?state=pending', { token: token.token });
    const listed = (list.json as { items: { id: string; pending: PendingShown | null }[] }).items;
    expect(listed.find((j) => j.id === waiting)?.pending?.reason).toBe('Resources');

    // The CLI, on the daemon's history.
    const [show, ls] = await Promise.all([
      runCli(['jobs', 'show', waiting, '--data-dir', td.dataDir]),
      runCli(['jobs', 'list', '--data-dir', td.dataDir]),
    ]);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toMatch(/^waits {5}Resources: it waits for enough free CPUs/m);
    expect(show.stdout).toMatch(/^to do {5}\w/m);
    expect(show.stdout).toMatch(/^expected {2}.+\(the scheduler's forecast\)/m);
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout.split('\n')[0]).toMatch(/STATE +PENDING +JOBID/);
    const line = ls.stdout.split('\n').find((l) => l.startsWith(waiting));
    expect(line).toMatch(/pending +Resources, start ~/);

    // The UI: the job page's facts and the list's column, as a person sees them.
    const page = await browser.page();
    const base = `${td.daemon.apiUrl}/ui`;
    await page.goto(`${base}/jobs`);
    await page.getByLabel('Local API token').fill(token.token);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${base}/jobs`);
    const row = page.locator('tr', { has: page.locator(`a[href$="/jobs/${waiting}"]`) });
    await expect(row.locator('td[data-label="Pending"]').textContent()).resolves.toMatch(/Resources\s*start ~/);
    await browser.screenshot(page, 'pending-why-list');
    await page.goto(`${base}/jobs/${waiting}`);
    const reason = await page.getByTestId('pending-reason').textContent();
    expect(reason).toContain('Resources: it waits for enough free CPUs');
    expect(reason).toContain('What you can do:');
    expect(await page.getByTestId('pending-expected-start').textContent()).toMatch(
      /\d{2}:\d{2}.* \(the scheduler's forecast\)$/,
    );
    await browser.screenshot(page, 'pending-why-job');

    // Once it runs, the forecast is gone from the history and nothing says it waits.
    expect((await api.call('DELETE', `/api/v1/jobs/${blocker}`, { token: token.token })).status).toBeLessThan(300);
    const ran = await td.waitForState(waiting, 'completed', 30_000);
    expect(ran.expectedStartAt).toBeNull();
    expect((await getRequest(store, waiting))?.expectedStartAt).toBeNull();
    const after = await api.call('GET', `/api/v1/jobs/${waiting}`, { token: token.token });
    expect((after.json as { pending: unknown }).pending).toBeNull();
    await page.goto(`${base}/jobs/${waiting}`);
    expect(await page.getByTestId('pending-reason').count()).toBe(0);
  }, 120_000);
});

describe('what it costs', () => {
  it('a slow listing of the pending jobs holds back no poll cycle: states go on being read, one listing at a time', async () => {
    const { proxy, daemon, submit, stop } = await startWaitingDaemon(redis.url);
    const isListing = (r: RecordedRequest) => r.method === 'GET' && /\/sched\/v[\d.]+\/jobs(\?|$)/.test(r.url);
    const isState = (r: RecordedRequest) => r.method === 'GET' && r.url.includes('/jobs/state');
    try {
      const blocker = await submit('blocker', '#!/bin/sh\nsleep 300\n');
      await daemon.waitForState(blocker, 'running');
      // Four due at once: read by one listing (up to three are read one by one).
      const held = proxy.holdAnswerOnce(isListing);
      await Promise.all(Array.from({ length: 4 }, (_, i) => submit(`waiter-${i}`, '#!/bin/sh\ntrue\n')));
      // The listing's answer held, as slurmrestd's for thousands of pending jobs takes seconds.
      await held;
      const heldAt = Date.now();
      try {
        // Poll cycles go on without the listing's answer, and start no second listing meanwhile.
        await waitFor(
          async () => (proxy.requests.filter((r) => isState(r) && r.atMs > heldAt).length >= 2 ? true : undefined),
          { what: 'two poll cycles while the listing is held', timeoutMs: 30_000 },
        );
        expect(proxy.requests.filter((r) => isListing(r) && r.atMs > heldAt)).toEqual([]);
      } finally {
        proxy.release();
      }
    } finally {
      await stop();
    }
  }, 120_000);

  it('five pending jobs are read in one controller listing a cycle, never one request each', async () => {
    const { proxy, daemon, submit, stop } = await startWaitingDaemon(redis.url);
    try {
      await daemon.waitForState(await submit('blocker', '#!/bin/sh\nsleep 300\n'), 'running');
      const waiting = await Promise.all(
        Array.from({ length: 5 }, (_, i) => submit(`waiter-${i}`, '#!/bin/sh\ntrue\n')),
      );
      const store = daemon.daemon.history.store;
      await waitFor(
        async () => {
          const rows = await Promise.all(waiting.map((id) => getRequest(store, id)));
          return rows.every((row) => row?.state === 'pending' && row.expectedStartAt !== null) ? rows : undefined;
        },
        { what: 'five pending jobs with their forecasts', timeoutMs: 60_000 },
      );
      // Three poll cycles (2 s apart: the cache lifetime), with at least one listing among them
      // once it is due (every second at first, less often while the records say the same).
      const before = proxy.requests.length;
      const isState = (r: RecordedRequest) => r.method === 'GET' && r.url.includes('/jobs/state');
      const isListing = (r: RecordedRequest) => r.method === 'GET' && /\/sched\/v[\d.]+\/jobs(\?|$)/.test(r.url);
      const window = await waitFor(
        async () => {
          const seen = proxy.requests.slice(before);
          const listing = seen.findIndex(isListing);
          if (listing < 0) return undefined;
          const states = seen.slice(listing).filter(isState);
          return states.length >= 3 ? seen.slice(0, seen.indexOf(states[2] as RecordedRequest) + 1) : undefined;
        },
        { what: 'a listing, then three poll cycles', timeoutMs: 60_000 },
      );
      expect(window.filter((r) => /\/job\/\d+/.test(r.url))).toEqual([]);
      // Never more than one listing a cycle.
      expect(window.filter(isListing).length).toBeLessThanOrEqual(window.filter(isState).length);
    } finally {
      await stop();
    }
  }, 120_000);
});
