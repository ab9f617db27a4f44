import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { OidcSettingsInput } from '../../../src/config/oidc-settings.js';
import { listAudit } from '../../../src/db/audit.js';
import type { AuditRow } from '../../../src/db/schema.js';
import { createToken } from '../../../src/db/tokens.js';
import { launchBrowser, type TestBrowser } from '../../helpers/browser.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { freePort } from '../../helpers/free-port.js';
import { startOidcProvider, type TestOidcProvider } from '../../helpers/oidc-provider.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * Single sign-on to the web UI against a real OpenID provider (the `oidc-provider` package on
 * loopback), in Chromium: the code flow with PKCE through the provider's own login and consent
 * pages, groups mapped to owners and scopes, logout at the provider, an expired session, an
 * edited callback, and a user in no mapped group. Two daemons share the simulator, Redis and
 * provider: the second one's sessions end two seconds after login.
 */

const USERS = {
  alice: { groups: ['hpc-admins', 'staff'] },
  bob: { groups: ['lab-a', 'staff'] },
  dave: { groups: ['auditors'] },
  carol: { groups: ['visitors'] },
};
const CLIENT_SECRET = 'test-client-secret-value';

let redis: TestRedis;
let sim: TestSim;
let td: TestDaemon;
let shortTd: TestDaemon;
let provider: TestOidcProvider;
let browser: TestBrowser;
let secretDir: string;
let base: string;
let shortBase: string;

beforeAll(async () => {
  redis = await startTestRedis();
  sim = await startSim();
  const providerPort = await freePort();
  secretDir = mkdtempSync(join(tmpdir(), 'schedflow-oidc-'));
  const secretFile = join(secretDir, 'client-secret');
  writeFileSync(secretFile, `${CLIENT_SECRET}\n`, { mode: 0o600 });
  const oidc: OidcSettingsInput = {
    issuer: `http://127.0.0.1:${providerPort}`,
    name: 'Test IdP',
    clientId: 'schedflow-ui',
    clientSecretFile: secretFile,
    scopes: ['openid', 'profile', 'groups'],
    claim: 'groups',
    map: [
      { value: 'hpc-admins', scopes: ['admin'] },
      { value: 'auditors', scopes: ['read', 'audit'] },
      { value: 'lab-a', owner: 'lab-a', scopes: ['read', 'submit', 'cancel'] },
    ],
  };
  [td, shortTd] = await Promise.all([
    startTestDaemon(sim.url, redis.url, { oidc }),
    startTestDaemon(sim.url, redis.url, { oidc: { ...oidc, sessionMaxAgeSec: 2 } }),
  ]);
  if (!td.daemon.apiUrl || !shortTd.daemon.apiUrl) throw new Error('a test daemon has no local API');
  base = `${td.daemon.apiUrl}/ui`;
  shortBase = `${shortTd.daemon.apiUrl}/ui`;
  // The daemons discover the provider at the first login, so it can start after them, knowing their addresses.
  provider = await startOidcProvider(
    providerPort,
    {
      clientId: 'schedflow-ui',
      clientSecret: CLIENT_SECRET,
      redirectUris: [`${base}/login/oidc/callback`, `${shortBase}/login/oidc/callback`],
      postLogoutRedirectUris: [`${base}/login`, `${shortBase}/login`],
    },
    USERS,
  );
  browser = await launchBrowser();
}, 60_000);

afterEach(async () => {
  await browser?.closePages();
});

afterAll(async () => {
  await browser?.close();
  await provider?.stop();
  await Promise.all([td?.stop(), shortTd?.stop()]);
  await sim?.stop();
  await redis?.stop();
  if (secretDir) rmSync(secretDir, { recursive: true, force: true });
});

/** From the UI's login page through the provider's login and consent pages, as `user`: where the browser ends. */
async function ssoLogIn(page: Page, user: string, ui = base): Promise<void> {
  await page.goto(`${ui}/jobs`);
  await page.getByRole('link', { name: 'Log in with Test IdP' }).click();
  await page.locator('input[name="login"]').fill(user, { timeout: 10_000 });
  await page.locator('input[name="password"]').fill('any password');
  await page.getByRole('button', { name: 'Sign-in' }).click();
  await page.getByRole('button', { name: 'Continue' }).click();
}

async function auditRows(daemon: TestDaemon, action: string): Promise<AuditRow[]> {
  return (await listAudit(daemon.daemon.history.store, { limit: 200 })).filter((r) => r.action === action);
}

const detailOf = (row: AuditRow | undefined) => JSON.parse(row?.detail ?? '{}') as { via?: string; reason?: string };

describe('web UI single sign-on (OpenID Connect)', () => {
  it('logs a group member in as its owner, with its scopes, and logs out at the provider too', async () => {
    const page = await browser.page();
    await page.goto(`${base}/login`);
    // Token login stays, beside the provider's button.
    await expect(page.getByLabel('Local API token').isVisible()).resolves.toBe(true);
    await ssoLogIn(page, 'bob');
    await page.waitForURL(`${base}/jobs`, { timeout: 10_000 });
    await expect(page.getByText('bob (Test IdP) · read-only · owner lab-a').isVisible()).resolves.toBe(true);
    const cookie = (await page.context().cookies()).find((c) => c.name === 'schedflow_ui');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    // The begun login's cookie is gone once used.
    expect((await page.context().cookies()).some((c) => c.name === 'schedflow_ui_oidc')).toBe(false);
    await browser.screenshot(page, 'sso-logged-in');

    const [login] = await auditRows(td, 'ui.login');
    expect(login).toMatchObject({ actor: 'ui:bob', owner: 'lab-a', outcome: 'ok' });
    expect(detailOf(login).via).toBe('oidc');
    expect(login?.httpRequestId).toBeTruthy();

    // Logging out ends the session here, then at the provider (its own confirmation page), and back.
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('button', { name: 'Yes, sign me out' }).click({ timeout: 10_000 });
    await page.waitForURL(`${base}/login`, { timeout: 10_000 });
    const [logout] = await auditRows(td, 'ui.logout');
    expect(logout).toMatchObject({ actor: 'ui:bob', owner: 'lab-a', outcome: 'ok' });
    expect(detailOf(logout).via).toBe('oidc');
    await page.goto(`${base}/jobs`);
    expect(new URL(page.url()).pathname).toBe('/ui/login');
    // The provider's session ended too: logging in again asks for the user again.
    await page.getByRole('link', { name: 'Log in with Test IdP' }).click();
    await expect(page.locator('input[name="login"]').isVisible({ timeout: 10_000 })).resolves.toBe(true);
  });

  it('maps an admin group to admin rights, and an auditors group to read and audit', async () => {
    const page = await browser.page();
    await ssoLogIn(page, 'alice');
    await page.waitForURL(`${base}/jobs`, { timeout: 10_000 });
    await expect(page.getByText('alice (Test IdP) · admin · owner default').isVisible()).resolves.toBe(true);
    // An admin sees the admin queue board (a session of the read scope alone would not).
    expect((await page.goto(`${base}/queues-admin/`))?.status()).toBe(200);

    const other = await browser.page();
    await ssoLogIn(other, 'dave');
    await other.waitForURL(`${base}/jobs`, { timeout: 10_000 });
    await expect(other.getByText('dave (Test IdP) · read-only · owner default').isVisible()).resolves.toBe(true);
  });

  it('refuses a user in no mapped group with a page saying so, and an audit row', async () => {
    const page = await browser.page();
    await ssoLogIn(page, 'carol');
    await page.waitForURL(/\/ui\/login\/oidc\/callback/, { timeout: 10_000 });
    await expect(page.getByText('carol is in no group this schedflow gives access to').isVisible()).resolves.toBe(true);
    expect((await page.context().cookies()).some((c) => c.name === 'schedflow_ui')).toBe(false);
    await page.goto(`${base}/jobs`);
    expect(new URL(page.url()).pathname).toBe('/ui/login');
    const refused = (await auditRows(td, 'ui.login')).find((r) => r.actor === 'ui:carol');
    expect(refused).toMatchObject({ outcome: 'refused', owner: null });
    expect(detailOf(refused)).toMatchObject({ via: 'oidc', reason: 'no mapped claim value' });
  });

  it('refuses an edited callback and one that was not begun here, with a page, never a stack trace', async () => {
    // A genuine login, whose callback and login cookie the test keeps.
    const page = await browser.page();
    const callback = page.waitForRequest(/\/ui\/login\/oidc\/callback\?/);
    await page.goto(`${base}/login`);
    await page.getByRole('link', { name: 'Log in with Test IdP' }).click();
    await page.locator('input[name="login"]').fill('bob', { timeout: 10_000 });
    const pendingCookie = (await page.context().cookies()).find((c) => c.name === 'schedflow_ui_oidc');
    await page.locator('input[name="password"]').fill('any password');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.getByRole('button', { name: 'Continue' }).click();
    await page.waitForURL(`${base}/jobs`, { timeout: 10_000 });
    const genuine = new URL((await callback).url());
    if (!pendingCookie) throw new Error('no login cookie while at the provider');

    // The same browser's login cookie with the callback's state edited: refused before the code is used.
    const edited = await browser.page();
    await edited.context().addCookies([pendingCookie]);
    const tampered = new URL(genuine);
    tampered.searchParams.set('state', 'edited-state-value');
    const answer = await edited.goto(tampered.href);
    expect(answer?.status()).toBe(400);
    await expect(edited.getByText('This login answer is not valid; log in again.').isVisible()).resolves.toBe(true);
    expect(await edited.content()).not.toMatch(/\bat .*\.(js|ts):\d+/);
    expect((await edited.context().cookies()).some((c) => c.name === 'schedflow_ui')).toBe(false);
    // The genuine callback replayed: its code was used once already, and the provider refuses it.
    await edited.context().addCookies([pendingCookie]);
    const replayed = await edited.goto(genuine.href);
    expect(replayed?.status()).toBe(401);
    await expect(edited.getByText('The identity provider did not accept this login').isVisible()).resolves.toBe(true);
    expect((await edited.context().cookies()).some((c) => c.name === 'schedflow_ui')).toBe(false);

    // No login cookie at all (a callback URL pasted or replayed), and one whose signature was edited.
    const bare = await fetch(`${base}/login/oidc/callback?code=abc&state=def`, { redirect: 'manual' });
    expect(bare.status).toBe(400);
    expect(await bare.text()).toContain('This login was not started here, or it has expired.');
    const begun = await fetch(`${base}/login/oidc`, { redirect: 'manual' });
    expect(begun.status).toBe(303);
    const pending = begun.headers
      .getSetCookie()
      .map((c) => /^schedflow_ui_oidc=([^;]+)/.exec(c)?.[1])
      .find(Boolean);
    if (!pending) throw new Error('no login cookie');
    const state = new URL(begun.headers.get('location') ?? '').searchParams.get('state') ?? '';
    const editedCookie = `${pending.slice(0, -3)}${pending.endsWith('AAA') ? 'BBB' : 'AAA'}`;
    const forged = await fetch(`${base}/login/oidc/callback?code=abc&state=${state}`, {
      redirect: 'manual',
      headers: { cookie: `schedflow_ui_oidc=${editedCookie}` },
    });
    expect(forged.status).toBe(400);
    // With the real cookie and state but a made-up code: the provider refuses the code.
    const iss = encodeURIComponent(provider.issuer);
    const madeUp = await fetch(`${base}/login/oidc/callback?code=made-up-code&state=${state}&iss=${iss}`, {
      redirect: 'manual',
      headers: { cookie: `schedflow_ui_oidc=${pending}` },
    });
    expect(madeUp.status).toBe(401);
    expect(await madeUp.text()).toContain('The identity provider did not accept this login');
    const reasons = (await auditRows(td, 'ui.login'))
      .filter((r) => r.outcome === 'refused')
      .map((r) => detailOf(r).reason);
    expect(reasons).toEqual(
      expect.arrayContaining([
        'no valid login cookie',
        'login cookie with a wrong signature',
        'token endpoint: invalid_grant',
      ]),
    );
  });

  it('ends a single-sign-on session at its max age', async () => {
    const page = await browser.page();
    await ssoLogIn(page, 'bob', shortBase);
    await page.waitForURL(`${shortBase}/jobs`, { timeout: 10_000 });
    await expect(page.getByText('bob (Test IdP) · read-only · owner lab-a').isVisible()).resolves.toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 2200));
    await page.goto(`${shortBase}/jobs`);
    expect(new URL(page.url()).pathname).toBe('/ui/login');
  });

  it("keeps a token login's session on its token's owner and scopes as they are now", async () => {
    const store = td.daemon.history.store;
    const { token, info } = await createToken(store, { name: 'sso-token', owner: 'lab-b', scopes: ['read'] });
    const page = await browser.page();
    await page.goto(`${base}/login`);
    await page.getByLabel('Local API token').fill(token);
    await page.getByRole('button', { name: 'Log in', exact: true }).click();
    await page.waitForURL(`${base}/jobs`);
    await expect(page.getByText('token sso-token · read-only · owner lab-b').isVisible()).resolves.toBe(true);
    const t = store.t.apiTokens;
    await store.run(
      store.db
        .update(t)
        .set({ owner: 'lab-c', scopes: ['admin'] })
        .where(eq(t.id, info.id)),
    );
    await page.reload();
    await expect(page.getByText('token sso-token · admin · owner lab-c').isVisible()).resolves.toBe(true);
    const ok = (await auditRows(td, 'ui.login')).find((r) => r.actor === 'ui:token:sso-token');
    expect(ok).toMatchObject({ outcome: 'ok', owner: 'lab-b' });
    expect(detailOf(ok).via).toBe('token');
  });
});
