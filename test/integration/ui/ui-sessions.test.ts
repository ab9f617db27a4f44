import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../../src/config/daemon-config.js';
import { createToken, revokeToken } from '../../../src/db/tokens.js';
import { createLogger } from '../../../src/logger.js';
import { startDaemon } from '../../../src/main.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * The web UI's sessions over a real socket, without a browser: logins are
 * plain form posts (the login form's double-submit cookie is any value sent
 * both as cookie and field), and a session is its cookie.
 */

let redis: TestRedis;
let sim: TestSim;
let td: TestDaemon;
let base: string;

beforeAll(async () => {
  redis = await startTestRedis();
  sim = await startSim();
  // A session's pages count against the API's rate limit (per session); these tests make a thousand sessions.
  td = await startTestDaemon(sim.url, redis.url, { apiRateLimitPerMin: 100_000 });
  if (!td.daemon.apiUrl) throw new Error('the test daemon has no local API');
  base = `${td.daemon.apiUrl}/ui`;
}, 60_000);

afterAll(async () => {
  await td?.stop();
  await sim?.stop();
  await redis?.stop();
});

/** Logs in with a token: the session cookie's value, or null with the answer's status and text. */
async function logIn(token: string): Promise<{ session: string | null; status: number; text: string }> {
  const nonce = 'login-nonce';
  const res = await fetch(`${base}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `schedflow_ui_login=${nonce}` },
    body: new URLSearchParams({ _login: nonce, token, next: '/ui/jobs' }).toString(),
  });
  const cookies = res.headers.getSetCookie();
  const session = cookies.map((c) => /^schedflow_ui=([^;]+)/.exec(c)?.[1]).find((v) => v) ?? null;
  return { session, status: res.status, text: await res.text() };
}

/** The status of a page asked for with a session cookie (303: sent to the login page). */
async function pageStatus(session: string, path = '/jobs'): Promise<number> {
  const res = await fetch(`${base}${path}`, { redirect: 'manual', headers: { cookie: `schedflow_ui=${session}` } });
  // Not read to its end: the event stream never ends.
  await res.body?.cancel();
  return res.status;
}

describe('web UI sessions', () => {
  it("bounds the sessions of one token: its logins drop its own oldest, never another token's", async () => {
    const admin = (
      await createToken(td.daemon.history.store, { owner: 'default', name: 'sessions-admin', scopes: ['admin'] })
    ).token;
    const noisy = (
      await createToken(td.daemon.history.store, { owner: 'default', name: 'sessions-noisy', scopes: ['read'] })
    ).token;
    const adminSession = (await logIn(admin)).session;
    if (!adminSession) throw new Error('the admin token did not log in');
    expect(await pageStatus(adminSession)).toBe(200);

    // More logins than the whole store holds (1,000), all with one token.
    const noisySessions: string[] = [];
    for (let i = 0; i < 1010; i++) {
      const { session } = await logIn(noisy);
      if (!session) throw new Error(`login ${i} of the noisy token failed`);
      noisySessions.push(session);
    }
    expect(await pageStatus(adminSession)).toBe(200);
    // The noisy token keeps its 10 newest sessions only.
    const [first, tenthLast, eleventhLast] = [noisySessions[0], noisySessions.at(-10), noisySessions.at(-11)];
    if (!first || !tenthLast || !eleventhLast) throw new Error('sessions missing');
    expect(await pageStatus(first)).toBe(303);
    expect(await pageStatus(eleventhLast)).toBe(303);
    expect(await pageStatus(tenthLast)).toBe(200);
    // 1,011 logins, each with its audit row: more than the default timeout on a loaded machine.
  }, 90_000);

  it('lets in only tokens with the read scope, as the API does, at login and on every request', async () => {
    const h = td.daemon.history.store;
    const submitter = await createToken(td.daemon.history.store, {
      owner: 'default',
      name: 'ui-submit-only',
      scopes: ['submit', 'cancel'],
    });
    const refused = await logIn(submitter.token);
    expect(refused.status).toBe(403);
    expect(refused.session).toBeNull();
    expect(refused.text).toContain('lacks the &quot;read&quot; scope');

    // A session whose token no longer has the scope is refused at its next request, and ended.
    const reader = await createToken(td.daemon.history.store, {
      owner: 'default',
      name: 'ui-reader-demoted',
      scopes: ['read'],
    });
    const session = (await logIn(reader.token)).session;
    if (!session) throw new Error('the read token did not log in');
    // Not the queue board: it holds every owner's jobs, for admins and auditors only (docs/owners.md).
    expect(await pageStatus(session, '/queues/')).toBe(403);
    for (const path of ['/jobs', '/history', '/profiles', '/events']) {
      expect(await pageStatus(session, path), path).not.toBe(403);
    }
    const { apiTokens } = h.t;
    await h.run(
      h.db
        .update(apiTokens)
        .set({ scopes: ['submit'] })
        .where(eq(apiTokens.id, reader.info.id)),
    );
    expect(await pageStatus(session, '/history')).toBe(403);
    expect(await pageStatus(session, '/jobs')).toBe(303);
  });

  it("refuses the queue boards' writes from another site however the path is spelled (the router decodes it)", async () => {
    const session = (
      await logIn(
        (
          await createToken(td.daemon.history.store, { owner: 'default', name: 'ui-board-admin', scopes: ['admin'] })
        ).token,
      )
    ).session;
    if (!session) throw new Error('the admin token did not log in');
    const queue = td.daemon.queues.submit;
    // No Origin nor Sec-Fetch-Site: not shown to come from a page of this UI.
    for (const board of ['queues-admin', '%71ueues-admin', 'queues%2Dadmin', 'queues', '%71ueues']) {
      const res = await fetch(`${base}/${board}/api/queues/${encodeURIComponent(queue.name)}/pause`, {
        method: 'PUT',
        redirect: 'manual',
        headers: { cookie: `schedflow_ui=${session}` },
      });
      await res.body?.cancel();
      expect(res.status, board).toBe(403);
    }
    expect(await queue.isPaused()).toBe(false);
    // From a page of this UI, the admin board's action goes through.
    for (const action of ['pause', 'resume']) {
      const res = await fetch(`${base}/queues-admin/api/queues/${encodeURIComponent(queue.name)}/${action}`, {
        method: 'PUT',
        headers: { cookie: `schedflow_ui=${session}`, 'sec-fetch-site': 'same-origin' },
      });
      await res.body?.cancel();
      expect(res.status, action).toBe(200);
      expect(await queue.isPaused()).toBe(action === 'pause');
    }
  });

  it('a login on one web process holds on another of the deployment: the sessions are in Redis', async () => {
    const { token } = await createToken(td.daemon.history.store, {
      owner: 'default',
      name: 'ui-two-webs',
      scopes: ['read'],
    });
    // A second process with the web role only, on the same data dir, Redis and queue prefix.
    const web = await startDaemon(
      loadDaemonConfig(
        {},
        {
          dataDir: td.dataDir,
          configDir: td.configDir,
          // The same history: PostgreSQL's too, under npm run test:postgres.
          databaseUrl: td.daemon.config.databaseUrl,
          webhookSecret: td.daemon.config.webhookSecret,
          redisUrl: redis.url,
          queuePrefix: td.daemon.config.queuePrefix,
          listen: '127.0.0.1:0',
          roles: ['web'],
          apiRateLimitPerMin: 100_000,
        },
      ),
      createLogger({ level: 'silent' }),
    );
    try {
      const other = `${web.apiUrl}/ui`;
      const session = (await logIn(token)).session;
      if (!session) throw new Error('the token did not log in');
      const status = async (at: string) => {
        const res = await fetch(`${at}/jobs`, { redirect: 'manual', headers: { cookie: `schedflow_ui=${session}` } });
        await res.body?.cancel();
        return res.status;
      };
      expect(await status(other)).toBe(200);
      // Revoked: the next request on either ends the session in both.
      await revokeToken(td.daemon.history.store, 'ui-two-webs');
      expect(await status(other)).toBe(303);
      expect(await status(base)).toBe(303);
    } finally {
      await web.stop();
    }
  });
});
