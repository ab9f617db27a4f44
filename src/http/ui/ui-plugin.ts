import { randomBytes } from 'node:crypto';
import fastifyCookie from '@fastify/cookie';
import csrfProtection from '@fastify/csrf-protection';
import fastifySession from '@fastify/session';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DEFAULT_OWNER, uiActor } from '../../access/principal.js';
import { grants } from '../../access/visibility.js';
import { findToken, liveTokenGrant } from '../../db/tokens.js';
import { type LoginCounter, storedId, UiSessions } from '../../redis/ui-sessions.js';
import { ApiError, RateLimitedApiError } from '../api/api-errors.js';
import type { ApiDeps } from '../deps.js';
import { APP_CSS, APP_JS } from './assets.js';
import { field, queryField, sendPage, sessionOf, type UiContext, type UiSettings } from './context.js';
import { type Html, html } from './html.js';
import { page, UI_PREFIX } from './layout.js';
import { LiveChanges } from './live-changes.js';
import { LiveStreams } from './live-streams.js';
import { auditLogin, UNKNOWN_UI_ACTOR } from './login-audit.js';
import { OIDC_CALLBACK_PATH, OIDC_START_PATH, OidcLogin } from './oidc-login.js';
import { goOn, oidcRoutes } from './oidc-routes.js';
import { QUEUE_BOARD_ADMIN_PATH, QUEUE_BOARD_PATH, registerQueueBoards } from './queue-board.js';
import { auditPages } from './routes/audit.js';
import { clusterPages } from './routes/cluster.js';
import { historyPages } from './routes/history.js';
import { jobControlPages } from './routes/job-control.js';
import { jobPages } from './routes/jobs.js';
import { pipelinePages } from './routes/pipelines.js';
import { profilePages } from './routes/profiles.js';
import { isAdmin, sameText, type UiLogin } from './sessions.js';
import type { LoginFailureBounds } from './ui-settings.js';

export const SESSION_COOKIE = 'schedflow_ui';
/** The login form's double-submit cookie: a login cannot be posted from another site. */
const LOGIN_COOKIE = 'schedflow_ui_login';

const CSP = [
  "default-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "frame-ancestors 'none'",
  "form-action 'self'",
  "base-uri 'self'",
].join('; ');

/** Paths under /ui that need no session. */
const PUBLIC = new Set([
  `${UI_PREFIX}/login`,
  `${UI_PREFIX}/assets/app.css`,
  `${UI_PREFIX}/assets/app.js`,
  OIDC_START_PATH,
  OIDC_CALLBACK_PATH,
]);

/**
 * The UI's cookies: for its pages only, never read by scripts, never sent
 * with a request from another site, and Secure when the page came over https
 * (on plain http a Secure cookie would not come back at all).
 */
const cookieOptions = (request: FastifyRequest) =>
  ({ path: UI_PREFIX, httpOnly: true, sameSite: 'strict', secure: request.protocol === 'https' }) as const;

/** Errors of @fastify/csrf-protection: a form without its token, or with a wrong one. */
const CSRF_ERRORS = new Set(['FST_CSRF_INVALID_TOKEN', 'FST_CSRF_MISSING_SECRET']);

const LOGIN_FAILURES: LoginFailureBounds = { perAddress: 10, perPassword: 50, windowMs: 5 * 60_000 };

/** Only a path of this UI is followed after login (never another site). */
function safeNext(next: string | undefined): string {
  return next && /^\/ui\/[A-Za-z0-9/_.%?=&-]*$/.test(next) && !next.includes('..') ? next : `${UI_PREFIX}/jobs`;
}

/**
 * The admin web UI under /ui: server-rendered pages, a session cookie after
 * logging in with a local API token, the UI password or single sign-on
 * (OpenID Connect, src/http/ui/oidc-routes.ts), CSRF tokens on every
 * form, live updates over Server-Sent Events, and the BullMQ dashboard.
 * Registered inside the local API's Fastify app (same address, same process).
 */
export async function uiPlugin(app: FastifyInstance, opts: { deps: ApiDeps; settings: UiSettings }): Promise<void> {
  const ctx: UiContext = {
    deps: opts.deps,
    settings: opts.settings,
    sessions: new UiSessions(opts.settings.sessions.redis, opts.settings.sessions.prefix),
    live: new LiveChanges(opts.deps.store, opts.deps.logger.child({ component: 'ui' })),
  };
  const log = opts.deps.logger.child({ component: 'ui' });
  const streams = new LiveStreams(
    {
      sessions: ctx.sessions,
      store: opts.deps.store,
      live: ctx.live,
      logger: log,
      // Absent until the pipelines are loaded: none lets anyone in then.
      pipelines: async () => (await opts.deps.pipelines?.list()) ?? [],
    },
    opts.settings.liveStreams,
  );
  const loginBounds = opts.settings.loginFailures ?? LOGIN_FAILURES;
  // Signs the session cookie and a begun single-sign-on login's cookie alike.
  const signer = await ctx.sessions.cookieSigner();
  const oidc = opts.settings.oidc
    ? new OidcLogin(
        opts.settings.oidc,
        () => opts.settings.oidc?.redirectUrl ?? `${listenUrl(app)}${OIDC_CALLBACK_PATH}`,
        signer,
        log,
      )
    : null;

  // Pages are not API operations: kept out of the OpenAPI document.
  app.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, hide: true };
  });
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    const fields: Record<string, string> = {};
    for (const [k, v] of new URLSearchParams(String(body))) fields[k] = v;
    done(null, fields);
  });
  app.decorateRequest('uiSession', null);

  app.addHook('onClose', async () => ctx.sessions.close());
  await app.register(fastifyCookie);
  await app.register(fastifySession, {
    // Sessions live in Redis, for every web process of the deployment: so does the secret that
    // signs their cookies.
    secret: signer,
    cookieName: SESSION_COOKIE,
    // No Max-Age: the cookie lasts as long as the browser's session; the store ends it sooner.
    cookie: { path: UI_PREFIX, httpOnly: true, sameSite: 'strict', secure: false },
    store: ctx.sessions,
    // A session is kept and its cookie set at login only, not for every visitor nor on every page.
    saveUninitialized: false,
    rolling: false,
    idGenerator: () => randomBytes(32).toString('base64url'),
  });
  // The CSRF secret lives in the session; every page's forms carry a token made from it.
  await app.register(csrfProtection, { sessionPlugin: '@fastify/session' });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-frame-options', 'DENY');
    reply.header('x-content-type-options', 'nosniff');
    reply.header('referrer-policy', 'same-origin');
    // Nothing leaves this origin: also keeps bull-board's page from fetching its web fonts
    // from Google (its template links them), which would tell a third party who opens it.
    reply.header('content-security-policy', CSP);
    const path = request.url.split('?')[0] ?? '';
    // Secure when the page came over https; no session (a path outside the cookie's) has no cookie.
    if (request.session?.cookie) request.session.cookie.secure = request.protocol === 'https';
    // A revoked token's session is gone from the store; this request leaves it unchanged,
    // so the plugin does not save it back.
    const login = await currentLogin(ctx, request.session?.login, Date.now());
    // A session past its end is removed now, not left to the store's bounds.
    if (!login && request.session?.login) await request.session.destroy();
    // A session without the read scope is ended below: it gets no CSRF secret (which would
    // change the session, and so save it again).
    request.uiSession = login && {
      ...login,
      sessionKey: storedId(request.session.sessionId),
      csrfToken: grants(login.scopes, 'read') ? reply.generateCsrf() : '',
    };
    if (PUBLIC.has(path)) return;
    const session = request.uiSession;
    if (!session) {
      if (request.method === 'GET' || request.method === 'HEAD') {
        const next = path === UI_PREFIX || path === `${UI_PREFIX}/` ? '' : `?next=${encodeURIComponent(request.url)}`;
        return reply.redirect(`${UI_PREFIX}/login${next}`, 303);
      }
      return reply.code(401).type('text/plain').send('log in first');
    }
    // Every page shows what the API answers only to `read` (jobs, output, history, the
    // queues' failed reasons): a session whose token lost the scope since its login ends.
    if (!grants(session.scopes, 'read')) {
      log.warn({ path, who: session.who }, 'UI request refused: the token lacks the read scope');
      if (session.tokenId !== null) await ctx.sessions.destroyOfToken(session.tokenId);
      reply.clearCookie(SESSION_COOKIE, cookieOptions(request));
      return sendPage(
        reply,
        page({ title: 'Refused', nav: 'login', session: null, body: lacksRead(session.who) }),
        403,
      );
    }
    if (request.method === 'GET' || request.method === 'HEAD') return;
    // By the route the router chose, not the raw URL: the router decodes the path, so
    // /ui/queues%2Dadmin/… reaches the admin board while its raw text does not name it.
    const route = request.routeOptions.url ?? '';
    // The BullMQ dashboard posts JSON from its own script, without our CSRF field: its
    // actions are for admins only and must come from a page of this origin (besides
    // the SameSite=Strict cookie, which a cross-site request does not carry).
    if (route.startsWith(`${QUEUE_BOARD_ADMIN_PATH}/`)) {
      if (!isAdmin(session) || !sameOrigin(request)) return reply.code(403).type('text/plain').send('forbidden');
      return;
    }
    // The read-only board writes nothing (bull-board refuses too; this does not depend on it).
    if (route.startsWith(`${QUEUE_BOARD_PATH}/`)) return reply.code(403).type('text/plain').send('read-only');
  });
  // CSRF for every form of these pages (the `_csrf` field, or the X-CSRF-Token header of
  // scripted POSTs): after body parsing, before the handler. A refusal is an error of the
  // plugin's, answered by the error handler below.
  app.addHook('preHandler', (request, reply, done) => {
    if (request.method === 'GET' || request.method === 'HEAD') return done();
    // The login form has its own double-submit nonce (there is no session yet); the
    // boards' own writes were judged above, by their route (see there).
    const route = request.routeOptions.url ?? '';
    if (route === `${UI_PREFIX}/login` || route.startsWith(`${QUEUE_BOARD_ADMIN_PATH}/`)) return done();
    app.csrfProtection(request, reply, done);
  });

  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, request, reply) => {
    if (error.code !== undefined && CSRF_ERRORS.has(error.code)) {
      log.warn(
        { path: request.url.split('?')[0], who: request.uiSession?.who },
        'UI action refused: missing or wrong CSRF token',
      );
      return sendPage(
        reply,
        page({
          title: 'Refused',
          nav: 'jobs',
          session: request.uiSession,
          body: html`<h1>Refused</h1><p>This form has expired or did not come from this site. Go back, reload the page and try again.</p>`,
        }),
        403,
      );
    }
    // The session's own request limit (app.ts), met on any page: a 429 saying when to come back.
    if (error instanceof RateLimitedApiError) {
      const retryAfterSec = Number(error.headers['retry-after'] ?? 60);
      log.warn({ path: request.url.split('?')[0], who: request.uiSession?.who }, 'UI request refused: rate limit');
      return sendPage(
        reply.headers(error.headers),
        page({ title: 'Too many requests', nav: 'jobs', session: request.uiSession, body: slowDown(retryAfterSec) }),
        429,
      );
    }
    const status =
      error instanceof ApiError
        ? error.status
        : error.statusCode && error.statusCode >= 400 && error.statusCode < 500
          ? error.statusCode
          : 500;
    if (error instanceof ApiError) reply.headers(error.headers);
    if (status >= 500) log.error({ err: error, url: request.url.split('?')[0] }, 'UI page failed');
    return sendPage(
      reply,
      page({
        title: 'Error',
        nav: 'jobs',
        session: request.uiSession,
        body: html`<h1>${status >= 500 ? 'Something went wrong' : 'Not possible'}</h1><p>${
          status >= 500 ? 'The page could not be made; the daemon log says why.' : error.message
        }</p>`,
      }),
      status,
    );
  });

  app.get(`${UI_PREFIX}/assets/app.css`, async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'max-age=300').send(APP_CSS),
  );
  app.get(`${UI_PREFIX}/assets/app.js`, async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'max-age=300').send(APP_JS),
  );
  app.get(UI_PREFIX, async (_request, reply) => reply.redirect(`${UI_PREFIX}/jobs`, 303));
  app.get(`${UI_PREFIX}/`, async (_request, reply) => reply.redirect(`${UI_PREFIX}/jobs`, 303));

  app.get(`${UI_PREFIX}/login`, async (request, reply) => {
    if (request.uiSession) return reply.redirect(safeNext(queryField(request, 'next')), 303);
    return loginPage(ctx, oidc, request, reply, null);
  });
  if (oidc) await app.register(oidcRoutes, { ctx, oidc, log, loginBounds, safeNext });
  app.post(`${UI_PREFIX}/login`, async (request, reply) => {
    const expected = request.cookies[LOGIN_COOKIE];
    const presented = field(request.body, '_login');
    if (!expected || !presented || !sameText(expected, presented)) {
      return loginPage(ctx, oidc, request, reply, 'The login form expired; try again.', 403);
    }
    const token = field(request.body, 'token')?.trim() ?? '';
    const password = field(request.body, 'password') ?? '';
    // Failures are counted per address, and the password's across addresses too: it is one
    // login a person chose, where a token is 32 random bytes no number of guesses finds.
    const counters: LoginCounter[] = [{ key: `ip:${request.ip}`, most: loginBounds.perAddress }];
    if (!token) counters.push({ key: 'password', most: loginBounds.perPassword });
    const waitMs = await ctx.sessions.loginWaitMs(counters);
    const refuse = (ms: number) => {
      const retryAfterSec = Math.max(1, Math.ceil(ms / 1000));
      log.warn({ with: token ? 'token' : 'password', retryAfterSec }, 'UI login refused: too many failed logins');
      reply.header('retry-after', String(retryAfterSec));
      return loginPage(ctx, oidc, request, reply, tooManyFailures(retryAfterSec, !token), 429);
    };
    // The password is not even compared past its bound. A token is looked up still: a valid one
    // logs in, so that a guesser at the same address (behind the same proxy) locks nobody out.
    if (waitMs > 0 && !token) return refuse(waitMs);
    let login: UiLogin | null = null;
    const via = token ? 'token' : 'password';
    const audit = (outcome: 'ok' | 'refused', actor: string, owner: string | null, reason?: string) =>
      auditLogin(ctx.deps.store, {
        action: 'ui.login',
        outcome,
        via,
        actor,
        owner,
        httpRequestId: request.id,
        at: Date.now(),
        ...(reason && { reason }),
      });
    if (token) {
      const found = await findToken(ctx.deps.store, token);
      if (found.kind === 'valid' && !grants(found.token.scopes, 'read')) {
        log.warn({ who: `token ${found.token.name}` }, 'UI login refused: the token lacks the read scope');
        await audit('refused', uiActor(`token:${found.token.name}`), found.token.owner, 'token lacks read');
        return loginPage(ctx, oidc, request, reply, lacksReadText(`token ${found.token.name}`), 403);
      }
      if (found.kind === 'valid') {
        login = {
          who: `token ${found.token.name}`,
          via: 'token',
          tokenId: found.token.id,
          scopes: found.token.scopes,
          owner: found.token.owner,
          actor: uiActor(`token:${found.token.name}`),
        };
      }
    } else if (password && ctx.settings.password) {
      if (sameText(password, ctx.settings.password.reveal())) {
        login = {
          who: 'password',
          via: 'password',
          tokenId: null,
          scopes: ['admin'],
          owner: DEFAULT_OWNER,
          actor: uiActor('password'),
        };
      }
    }
    if (!login) {
      if (waitMs > 0) return refuse(waitMs);
      await ctx.sessions.loginFailed(counters, loginBounds.windowMs);
      log.warn({ with: token ? 'token' : 'password' }, 'UI login refused');
      await audit('refused', UNKNOWN_UI_ACTOR, null, `wrong ${via}`);
      return loginPage(ctx, oidc, request, reply, 'That token or password is not valid.', 401);
    }
    log.info({ who: login.who }, 'UI login');
    await audit('ok', login.actor, login.owner);
    // A new session id at login: one planted in the browser before it (session fixation) is worth nothing.
    await request.session.regenerate();
    request.session.cookie.secure = request.protocol === 'https';
    request.session.login = login;
    reply.generateCsrf();
    reply.clearCookie(LOGIN_COOKIE, cookieOptions(request));
    return reply.redirect(safeNext(field(request.body, 'next')), 303);
  });
  app.post(`${UI_PREFIX}/logout`, async (request, reply) => {
    const session = request.uiSession;
    const idToken = request.session.oidcIdToken;
    if (session) {
      await request.session.destroy();
      await auditLogin(ctx.deps.store, {
        action: 'ui.logout',
        outcome: 'ok',
        via: session.via,
        actor: session.actor,
        owner: session.owner,
        httpRequestId: request.id,
        at: Date.now(),
      });
      log.info({ who: session.who }, 'UI logout');
    }
    reply.clearCookie(SESSION_COOKIE, cookieOptions(request));
    // A single-sign-on session is ended at the provider too (RP-initiated logout), when it has
    // an end_session_endpoint: by a page that moves on, since this form's answer may only
    // redirect within this site (the CSP's form-action).
    if (session?.via === 'oidc' && oidc) {
      const loginUrl = `${opts.settings.oidc?.redirectUrl ? new URL(opts.settings.oidc.redirectUrl).origin : listenUrl(app)}${UI_PREFIX}/login`;
      const end = await oidc.endSessionUrl(idToken, loginUrl);
      if (end) return sendPage(reply, goOn(end, `Logged out; logging out of ${oidc.name}`));
    }
    return reply.redirect(`${UI_PREFIX}/login`, 303);
  });

  app.get(`${UI_PREFIX}/events`, async (request, reply) => {
    const session = sessionOf(request);
    // The headers set so far (CSP, request id) go with the stream, which is written raw.
    for (const [name, value] of Object.entries(reply.getHeaders())) {
      if (value !== undefined) reply.raw.setHeader(name, value);
    }
    reply.hijack();
    await streams.open(session, reply.raw);
  });
  // At close: the poller stops and open event streams end, rather than waiting on the
  // server's close to cut them.
  app.addHook('preClose', async () => {
    ctx.live.close();
    streams.close();
  });

  await app.register(jobPages, { ctx });
  await app.register(jobControlPages, { ctx });
  await app.register(pipelinePages, { ctx });
  await app.register(historyPages, { ctx });
  await app.register(profilePages, { ctx });
  await app.register(clusterPages, { ctx });
  await app.register(auditPages, { ctx });
  await registerQueueBoards(app, ctx);
}

/**
 * The login of a request's session as it stands now, or null: none, past its end (a
 * single-sign-on session's `expiresAt`), or its token was revoked.
 */
async function currentLogin(ctx: UiContext, login: UiLogin | undefined, now: number): Promise<UiLogin | null> {
  if (!login) return null;
  // The request goes on as nobody's; the store's own bounds remove the session soon after.
  if (login.expiresAt !== undefined && now >= login.expiresAt) return null;
  if (login.tokenId === null) return login;
  // A token revoked since the login ends its sessions at their next request.
  const grant = await liveTokenGrant(ctx.deps.store, login.tokenId);
  if (!grant) {
    await ctx.sessions.destroyOfToken(login.tokenId);
    return null;
  }
  // The token's owner and scopes as they are now (`tokens update`), not as they were at login.
  return { ...login, owner: grant.owner, scopes: grant.scopes };
}

/** The address the API listens on, as a URL (the default redirect URL is made of it). */
function listenUrl(app: FastifyInstance): string {
  const address = app.server.address();
  if (!address || typeof address === 'string') throw new Error('the local API does not listen on a TCP address');
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `http://${host}:${address.port}`;
}

/** A UTC clock time `sec` seconds from now, to say when to come back. */
function inSeconds(sec: number): string {
  return `${new Date(Date.now() + sec * 1000).toISOString().slice(11, 19)} UTC`;
}

/** For a password login, the bound met may be the password's own, which counts every address. */
function tooManyFailures(retryAfterSec: number, password: boolean): string {
  const whose = password ? 'from this address, or with the UI password from anywhere' : 'from this address';
  return `Too many failed logins ${whose}. Try again in ${retryAfterSec} s (at ${inSeconds(retryAfterSec)}).`;
}

function slowDown(retryAfterSec: number): Html {
  return html`<h1>Too many requests</h1><p>This session has made more requests in the last minute than the daemon takes. Try again in ${retryAfterSec} s (at ${inSeconds(retryAfterSec)}); reloading sooner only counts against it.</p>`;
}

function lacksReadText(who: string): string {
  return `This ${who} lacks the "read" scope the web UI needs. Log in with a token made with --scopes read (or admin).`;
}

function lacksRead(who: string): Html {
  return html`<h1>Refused</h1><p>${lacksReadText(who)}</p><p><a href="${UI_PREFIX}/login">Log in again</a></p>`;
}

/** A browser's same-origin request: Sec-Fetch-Site, or else the Origin header against Host. */
function sameOrigin(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site'];
  if (typeof site === 'string') return site === 'same-origin';
  const origin = request.headers.origin;
  if (typeof origin !== 'string') return false;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}

function loginPage(
  ctx: UiContext,
  oidc: OidcLogin | null,
  request: FastifyRequest,
  reply: FastifyReply,
  error: string | null,
  status = 200,
): FastifyReply {
  const loginNonce = randomBytes(18).toString('base64url');
  reply.setCookie(LOGIN_COOKIE, loginNonce, { ...cookieOptions(request), maxAge: 600 });
  const next = field(request.body, 'next') ?? queryField(request, 'next') ?? '';
  const body = html`<div class="login"><h1>Log in to schedflow</h1>
<form class="stack" method="post" action="${UI_PREFIX}/login">
<input type="hidden" name="_login" value="${loginNonce}"><input type="hidden" name="next" value="${safeNext(next)}">
<label>Local API token<input type="password" name="token" autocomplete="off" spellcheck="false" placeholder="sfa_…"></label>
${
  ctx.settings.password
    ? html`<label>or the UI password<input type="password" name="password" autocomplete="current-password"></label>`
    : ''
}
<button type="submit">Log in</button></form>
${
  oidc
    ? html`<p class="sso"><a class="button" href="${OIDC_START_PATH}?next=${encodeURIComponent(safeNext(next))}">Log in with ${oidc.name}</a></p>`
    : ''
}
<p class="muted">Make a token with <code>schedflow tokens create --name &lt;you&gt; --scopes admin</code> (or <code>read</code> for a read-only view). The page keeps a session, never the token.</p></div>`;
  return sendPage(
    reply,
    page({ title: 'Log in', nav: 'login', session: null, body, flash: error ? { text: error, error: true } : null }),
    status,
  );
}
