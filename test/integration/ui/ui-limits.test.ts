import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createToken, revokeToken } from '../../../src/db/tokens.js';
import { Secret } from '../../../src/lib/secret.js';
import { launchBrowser } from '../../helpers/browser.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { bearer } from '../../helpers/http.js';
import { checkedFetch } from '../../helpers/openapi-check.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * The UI's limits over a real socket, as an attacker with no token (or an ordinary one) meets
 * them (issue 30, point 6): anonymous traffic from an address never locks its logged-in users
 * out, failed logins are bounded, a spent limit is a 429 saying when to come back, live-feed
 * streams end with their token and are bounded per session; and the API docs' framing policy.
 * Every request comes from 127.0.0.1, like every user behind one proxy. The default limits
 * (300 requests a minute) are the ones tested.
 */

const UI_PASSWORD = 'limits password';

let redis: TestRedis;
let sim: TestSim;
let td: TestDaemon;
let base: string;
let api: string;

beforeAll(async () => {
  redis = await startTestRedis();
  sim = await startSim();
  td = await startTestDaemon(sim.url, redis.url, { uiPassword: new Secret(UI_PASSWORD) });
  if (!td.daemon.apiUrl) throw new Error('the test daemon has no local API');
  api = td.daemon.apiUrl;
  base = `${api}/ui`;
}, 60_000);

afterAll(async () => {
  await td?.stop();
  await sim?.stop();
  await redis?.stop();
});

const tokenNamed = async (name: string, scopes: ('admin' | 'read')[] = ['admin']) =>
  (await createToken(td.daemon.history.store, { owner: 'default', name, scopes })).token;

/** Posts the login form (its double-submit nonce is any value sent as both cookie and field). */
async function logIn(
  secret: { token: string } | { password: string },
): Promise<{ session: string | null; status: number; text: string; headers: Headers }> {
  const nonce = 'login-nonce';
  const res = await fetch(`${base}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `schedflow_ui_login=${nonce}` },
    body: new URLSearchParams({ _login: nonce, next: '/ui/jobs', ...secret }).toString(),
  });
  const session = res.headers
    .getSetCookie()
    .map((c) => /^schedflow_ui=([^;]+)/.exec(c)?.[1])
    .find((v) => v);
  return { session: session ?? null, status: res.status, text: await res.text(), headers: res.headers };
}

async function loggedIn(token: string): Promise<string> {
  const { session, status, text } = await logIn({ token });
  if (!session) throw new Error(`the login failed (${status}): ${text.slice(0, 300)}`);
  return session;
}

async function page(path: string, session?: string): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(`${base}${path}`, {
    redirect: 'manual',
    headers: session ? { cookie: `schedflow_ui=${session}` } : {},
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** An open `/ui/events` stream: its status and headers, and its end (or its refusal's text). */
interface EventStream {
  status: number;
  headers: Headers;
  /** Resolves with what was read once the server ends the stream. */
  ended: Promise<string>;
  close(): Promise<void>;
}

const open: EventStream[] = [];

async function events(session: string): Promise<EventStream> {
  const controller = new AbortController();
  const res = await fetch(`${base}/events`, {
    redirect: 'manual',
    headers: { cookie: `schedflow_ui=${session}` },
    signal: controller.signal,
  });
  const body = res.body;
  const ended = (async () => {
    let text = '';
    if (!body) return text;
    const decoder = new TextDecoder();
    try {
      for await (const chunk of body) text += decoder.decode(chunk as Uint8Array, { stream: true });
    } catch {
      // Closed by the test.
    }
    return text;
  })();
  const stream = {
    status: res.status,
    headers: res.headers,
    ended,
    close: async () => {
      controller.abort();
      await ended;
    },
  };
  open.push(stream);
  return stream;
}

/** Whether `promise` settles within `ms`: a bound on how long the server takes, not a sleep. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | 'still open'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still open'>((resolve) => {
    timer = setTimeout(() => resolve('still open'), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

afterAll(async () => {
  for (const stream of open.splice(0)) await stream.close();
});

describe('the UI under a flood from its own address', () => {
  it('300 anonymous views of the login page lock nobody out: an admin logs in, a logged-in session goes on', async () => {
    const already = await loggedIn(await tokenNamed('flood-already'));
    const apiToken = await tokenNamed('flood-api');
    for (let i = 0; i < 320; i++) {
      const view = await page('/login');
      expect(view.status, `view ${i}`).toBe(200);
    }
    // Other anonymous pages: each answers its redirect to the login page, uncounted too.
    for (let i = 0; i < 20; i++) expect((await page('/jobs')).status).toBe(303);

    const admin = await logIn({ token: await tokenNamed('flood-admin') });
    expect(admin.status, admin.text.slice(0, 300)).toBe(303);
    expect(admin.session).not.toBeNull();
    expect((await page('/jobs', admin.session ?? '')).status).toBe(200);
    expect((await page('/jobs', already)).status).toBe(200);
    const apiAnswer = await checkedFetch(`${api}/api/v1/jobs`, { headers: bearer(apiToken) });
    await apiAnswer.body?.cancel();
    expect(apiAnswer.status).toBe(200);
  });

  it('a session past its own limit gets a 429 page saying when to retry; other sessions and the login go on', async () => {
    const busy = await loggedIn(await tokenNamed('limit-busy'));
    const calm = await loggedIn(await tokenNamed('limit-calm'));
    let last = await page('/assets/app.css', busy);
    for (let i = 0; i < 400 && last.status !== 429; i++) last = await page('/assets/app.css', busy);
    expect(last.status).toBe(429);
    const retryAfter = Number(last.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(last.headers.get('content-type')).toContain('text/html');
    expect(last.text).toContain('Too many requests');
    expect(last.text).toMatch(new RegExp(`Try again in ${retryAfter} s \\(at \\d\\d:\\d\\d:\\d\\d UTC\\)`));
    expect(last.text).not.toContain('Something went wrong');
    // Any page of the session says the same.
    expect((await page('/jobs', busy)).status).toBe(429);

    expect((await page('/jobs', calm)).status).toBe(200);
    expect((await logIn({ token: await tokenNamed('limit-after') })).status).toBe(303);
  });
});

describe("the live feed's streams", () => {
  it('ends a stream soon after its token is revoked, and one whose session logged out', async () => {
    const session = await loggedIn(await tokenNamed('feed-revoked', ['read']));
    const stream = await events(session);
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toContain('text/event-stream');
    await revokeToken(td.daemon.history.store, 'feed-revoked');
    // Checked every 2 s: ended within a few checks.
    const text = await within(stream.ended, 10_000);
    expect(text).not.toBe('still open');
    expect(text).toContain('event: ended');
    expect((await page('/jobs', session)).status).toBe(303);

    const other = await loggedIn(await tokenNamed('feed-logout', ['read']));
    const second = await events(other);
    expect(second.status).toBe(200);
    const csrf = /name="_csrf" value="([^"]+)"/.exec((await page('/jobs', other)).text)?.[1];
    if (!csrf) throw new Error('no CSRF token on the jobs page');
    const out = await fetch(`${base}/logout`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: `schedflow_ui=${other}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrf }).toString(),
    });
    await out.body?.cancel();
    expect(out.status).toBe(303);
    expect(await within(second.ended, 10_000)).not.toBe('still open');
  });

  it('holds at most 6 streams of one session: the next is refused with 429 and Retry-After until one closes', async () => {
    const session = await loggedIn(await tokenNamed('feed-cap', ['read']));
    const streams: EventStream[] = [];
    for (let i = 0; i < 6; i++) {
      const stream = await events(session);
      expect(stream.status, `stream ${i}`).toBe(200);
      streams.push(stream);
    }
    const refused = await events(session);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await refused.ended).toMatch(/already has 6 live pages open/);
    // The streams already open go on, and another session has its own.
    for (const stream of streams) expect(await within(stream.ended, 100)).toBe('still open');
    const elsewhere = await events(await loggedIn(await tokenNamed('feed-cap-other', ['read'])));
    expect(elsewhere.status).toBe(200);

    await streams[0]?.close();
    // The server hears of the close a moment later: the next stream is taken then.
    let next = await events(session);
    for (let i = 0; i < 50 && next.status === 429; i++) {
      await new Promise((r) => setTimeout(r, 100));
      next = await events(session);
    }
    expect(next.status).toBe(200);
  });
});

describe('failed logins', () => {
  // Last in the file: the address's failures stay counted for 5 minutes.
  it('are bounded per address: past 10, a 429 saying when; a valid token still logs in, the password is not tried', async () => {
    for (let i = 0; i < 10; i++) {
      const wrong = await logIn({ token: `sfa_wrong${i}` });
      expect(wrong.status, `attempt ${i}`).toBe(401);
    }
    const refused = await logIn({ token: 'sfa_wrong-again' });
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(200);
    expect(retryAfter).toBeLessThanOrEqual(300);
    expect(refused.text).toMatch(
      /Too many failed logins from this address\. Try again in \d+ s \(at \d\d:\d\d:\d\d UTC\)/,
    );
    // Even the right password: it is not compared past the bound.
    const password = await logIn({ password: UI_PASSWORD });
    expect(password.status).toBe(429);
    expect(password.session).toBeNull();
    // A token cannot be guessed: a valid one logs in from the same address.
    const admin = await logIn({ token: await tokenNamed('after-failures') });
    expect(admin.status).toBe(303);
    expect((await page('/jobs', admin.session ?? '')).status).toBe(200);
    // Viewing the login page was never refused.
    expect((await page('/login')).status).toBe(200);
  });
});

describe('the API docs', () => {
  it('answer with a Content-Security-Policy and frame protection, as do the OpenAPI document and the API', async () => {
    for (const path of [
      '/api/v1/docs',
      '/api/v1/docs/static/index.html',
      '/api/v1/docs/static/swagger-ui-bundle.js',
      '/api/v1/docs/json',
      '/api/v1/openapi.json',
      '/healthz',
      '/api/v1/jobs',
    ]) {
      const res = await checkedFetch(`${api}${path}`);
      await res.body?.cancel();
      expect(res.status, path).toBeLessThan(500);
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('content-security-policy'), path).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
    const docs = await fetch(`${api}/api/v1/docs`);
    await docs.body?.cancel();
    expect(docs.headers.get('content-security-policy')).toContain("script-src 'self'");
  });

  it('the docs page still works under its policy: Swagger UI renders the document, nothing is refused', async () => {
    const browser = await launchBrowser();
    try {
      const tab = await browser.page();
      const refused: string[] = [];
      tab.on('console', (message) => {
        if (/Content Security Policy/i.test(message.text())) refused.push(message.text());
      });
      await tab.goto(`${api}/api/v1/docs`);
      // Swagger UI's bundle is 1.5 MB of script: parsing it beside the whole suite on two
      // cores took over 20 s once, so the wait is generous; alone it renders in a few seconds.
      await tab.locator('.swagger-ui .info .title', { hasText: 'schedflow local API' }).waitFor({ timeout: 60_000 });
      await tab.locator('.opblock-tag', { hasText: 'jobs' }).first().waitFor({ timeout: 30_000 });
      await browser.screenshot(tab, 'api-docs');
      expect(refused).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 120_000);
});
