import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { createToken } from '../../../src/db/tokens.js';
import { Secret } from '../../../src/lib/secret.js';
import type { JobSpec } from '../../../src/sched/job-spec.js';
import { launchBrowser, type TestBrowser } from '../../helpers/browser.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * What the browser tests of the admin web UI share (ui.test.ts, ui-replayed.test.ts): one
 * in-process daemon on the simulator and real Redis per file, and headless Chromium (Debian's,
 * through playwright-core). Each test opens its own browser contexts (its own cookies), closed
 * after it; every page is saved as a screenshot in test/artifacts/ui/. The file's daemon, browser
 * and tokens are live bindings, set in the file's beforeAll.
 */

const PIPELINE = [
  'params:',
  '  greeting: hi',
  'steps:',
  '  first:',
  '    script: |',
  '      #!/bin/sh',
  '      echo ${params.greeting}',
  '  second:',
  '    needs: [first]',
  '    script: |',
  '      #!/bin/sh',
  '      echo done',
  '  third:',
  '    needs: [first]',
  '    script: |',
  '      #!/bin/sh',
  '      true',
].join('\n');

/** A run that stays running until cancelled. */
const SLOW = ['steps:', '  wait:', '    script: |', '      #!/bin/sh', '      sleep 120'].join('\n');

const NIGHTLY = [
  'description: weekday report',
  'schedule:',
  "  cron: '30 2 * * 1-5'",
  '  timezone: UTC',
  'steps:',
  '  report:',
  '    script: |',
  '      #!/bin/sh',
  '      true',
].join('\n');

export const UI_PASSWORD = 'correct horse battery staple';

let redis: TestRedis;
export let sim: TestSim;
export let td: TestDaemon;
export let browser: TestBrowser;
export let base: string;
export let adminToken: string;
export let readToken: string;

export const shell = (name: string, body: string): JobSpec =>
  ({ name, script: `#!/bin/sh\n${body}\n`, current_working_directory: sim.workDir }) as JobSpec;

/** The file's hooks: its daemon, simulator, Redis and browser, started before its tests and stopped after. */
export function useUiDaemon(): void {
  beforeAll(async () => {
    redis = await startTestRedis();
    sim = await startSim();
    td = await startTestDaemon(
      sim.url,
      redis.url,
      { uiPassword: new Secret(UI_PASSWORD) },
      {},
      { 'greet.yaml': PIPELINE, 'nightly.yaml': NIGHTLY, 'slow.yaml': SLOW },
    );
    if (!td.daemon.apiUrl) throw new Error('the test daemon has no local API');
    base = `${td.daemon.apiUrl}/ui`;
    adminToken = (await createToken(td.daemon.history.store, { name: 'ui-admin', scopes: ['admin'] })).token;
    // Of the owner `default` (as tokens made before owners are): it reads what the tests submit.
    readToken = (await createToken(td.daemon.history.store, { name: 'ui-reader', scopes: ['read'], owner: 'default' }))
      .token;
    browser = await launchBrowser();
  }, 60_000);

  // Each test's pages are its own: closed after it, not left following the daemon to the file's end.
  afterEach(async () => {
    await browser?.closePages();
  });

  afterAll(async () => {
    await browser?.close();
    await td?.stop();
    await sim?.stop();
    await redis?.stop();
  });
}

export async function logIn(token: string, options: { width?: number } = {}): Promise<Page> {
  const page = await browser.page(options);
  await page.goto(`${base}/jobs`);
  await page.getByLabel('Local API token').fill(token);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForURL(`${base}/jobs`);
  return page;
}

/** Waits for the state badge of the page's main facts to show `state` (it changes through the event stream). */
export async function liveState(page: Page, id: string, state: string, timeout: number): Promise<void> {
  await page.locator(`main dd [data-live-state="${id}"]`, { hasText: new RegExp(`^${state}$`) }).waitFor({ timeout });
}
