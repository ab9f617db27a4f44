import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';

/** Debian's chromium (test/setup.sh installs it); playwright's own browser download does not work here. */
export const CHROMIUM = process.env.SCHEDFLOW_CHROMIUM ?? '/usr/bin/chromium';

/** Where the UI tests leave their screenshots (gitignored). */
export const SCREENSHOT_DIR = join(import.meta.dirname, '..', 'artifacts', 'ui');

export interface TestBrowser {
  browser: Browser;
  /** A new context (its own cookies) and a page in it; closed with the browser. */
  page(options?: { width?: number; height?: number }): Promise<Page>;
  /** A full-page PNG in test/artifacts/ui/<name>.png. */
  screenshot(page: Page, name: string): Promise<void>;
  /**
   * Closes the contexts (and their pages) opened so far. A page left open goes on working: a job
   * page follows the event stream, the queue dashboard polls its API every few seconds, so a
   * file's pages kept open to its end made the browser and the daemon busier with each test.
   */
  closePages(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Headless Chromium with the flags this machine needs: no sandbox (tests run as
 * root), no GPU, and no background networking (the closed network refuses
 * Chromium's own connections). The profile is fresh: playwright makes a
 * temporary --user-data-dir for every launch (and refuses one in `args`).
 */
export async function launchBrowser(): Promise<TestBrowser> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const contexts: BrowserContext[] = [];
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  return {
    browser,
    async page(options = {}) {
      const context = await browser.newContext({
        viewport: { width: options.width ?? 1280, height: options.height ?? 900 },
        timezoneId: 'Europe/Paris',
      });
      contexts.push(context);
      return context.newPage();
    },
    async screenshot(page, name) {
      await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
    },
    async closePages() {
      for (const c of contexts.splice(0)) await c.close().catch(() => {});
    },
    async close() {
      for (const c of contexts.splice(0)) await c.close().catch(() => {});
      await browser.close();
    },
  };
}
