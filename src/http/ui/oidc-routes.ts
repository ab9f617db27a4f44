import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { uiActor } from '../../access/principal.js';
import { grants } from '../../access/visibility.js';
import type { Logger } from '../../logger.js';
import type { LoginCounter } from '../../redis/ui-sessions.js';
import { queryField, sendPage, type UiContext } from './context.js';
import { type Html, html } from './html.js';
import { page } from './layout.js';
import { auditLogin, UNKNOWN_UI_ACTOR } from './login-audit.js';
import { OIDC_CALLBACK_PATH, OIDC_START_PATH, type OidcLogin, OidcRefusal, PENDING_MAX_AGE_SEC } from './oidc-login.js';
import type { UiLogin } from './sessions.js';
import type { LoginFailureBounds } from './ui-settings.js';

/** The begun login's cookie: for the callback's path only, and sent back on the provider's cross-site redirect (Lax). */
export const OIDC_COOKIE = 'schedflow_ui_oidc';

export interface OidcRouteOptions {
  ctx: UiContext;
  oidc: OidcLogin;
  log: Logger;
  loginBounds: LoginFailureBounds;
  /** Only a page of this UI is followed after login. */
  safeNext(next: string | undefined): string;
}

const pendingCookie = (request: FastifyRequest) =>
  ({ path: OIDC_START_PATH, httpOnly: true, sameSite: 'lax', secure: request.protocol === 'https' }) as const;

/**
 * The single-sign-on login (docs/sso.md): `GET /ui/login/oidc` sends the browser to the
 * provider with a new state, nonce and PKCE challenge; the provider sends it back to
 * `GET /ui/login/oidc/callback`, where the code is traded for the ID token and the user's
 * claim is mapped to an owner and scopes. Every refusal is a page (400, 401, 403, 502), never
 * a stack trace, and an audit row (`ui.login`, refused).
 */
export async function oidcRoutes(app: FastifyInstance, opts: OidcRouteOptions): Promise<void> {
  const { ctx, oidc, log } = opts;
  const store = ctx.deps.store;

  app.get(OIDC_START_PATH, async (request, reply) => {
    const next = opts.safeNext(queryField(request, 'next'));
    if (request.uiSession) return reply.redirect(next, 303);
    let begun: { url: string; cookie: string };
    try {
      begun = await oidc.begin(next, Date.now());
    } catch (error) {
      if (error instanceof OidcRefusal) return refusedPage(reply, error.status, error.message);
      throw error;
    }
    reply.setCookie(OIDC_COOKIE, begun.cookie, { ...pendingCookie(request), maxAge: PENDING_MAX_AGE_SEC });
    return reply.redirect(begun.url, 303);
  });

  app.get(OIDC_CALLBACK_PATH, async (request, reply) => {
    // One use: whatever comes of this callback, the begun login is over.
    reply.clearCookie(OIDC_COOKIE, pendingCookie(request));
    const counters: LoginCounter[] = [{ key: `ip:${request.ip}`, most: opts.loginBounds.perAddress }];
    const refuse = async (status: number, text: string, reason: string, actor = UNKNOWN_UI_ACTOR) => {
      // Failed callbacks count as failed logins: past the bound, a 429 and no audit row, so
      // edited callbacks cannot fill the audit log.
      const waitMs = await ctx.sessions.loginWaitMs(counters);
      if (waitMs > 0) {
        const retryAfterSec = Math.max(1, Math.ceil(waitMs / 1000));
        reply.header('retry-after', String(retryAfterSec));
        return refusedPage(reply, 429, `Too many failed logins from this address. Try again in ${retryAfterSec} s.`);
      }
      await ctx.sessions.loginFailed(counters, opts.loginBounds.windowMs);
      log.warn({ via: 'oidc', reason, actor }, 'UI login refused');
      await auditLogin(store, {
        action: 'ui.login',
        outcome: 'refused',
        via: 'oidc',
        actor,
        owner: null,
        httpRequestId: request.id,
        reason,
        at: Date.now(),
      });
      return refusedPage(reply, status, text);
    };
    const search = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : '';
    let user: Awaited<ReturnType<OidcLogin['finish']>>;
    let next: string;
    try {
      const pending = oidc.pendingOf(request.cookies[OIDC_COOKIE], Date.now());
      next = opts.safeNext(pending.next);
      user = await oidc.finish(search, pending);
    } catch (error) {
      if (error instanceof OidcRefusal) return refuse(error.status, error.message, error.reason);
      throw error;
    }
    const actor = uiActor(user.username);
    if (!user.grant) {
      return refuse(
        403,
        `${user.username} is in no group this schedflow gives access to. Ask its administrators to map one of yours.`,
        'no mapped claim value',
        actor,
      );
    }
    if (!grants(user.grant.scopes, 'read')) {
      return refuse(
        403,
        `${user.username} is mapped to scopes without "read", which the web UI needs. Ask its administrators.`,
        'mapped scopes lack read',
        actor,
      );
    }
    const now = Date.now();
    const login: UiLogin = {
      // Never just `password` (that login's bucket of sessions is keyed by its `who`, src/redis/ui-sessions.ts).
      who: `${user.username} (${oidc.name})`,
      via: 'oidc',
      tokenId: null,
      scopes: user.grant.scopes,
      owner: user.grant.owner,
      actor,
      expiresAt: now + (ctx.settings.oidc?.sessionMaxAgeSec ?? 8 * 3600) * 1000,
    };
    // A new session id at login: one planted in the browser before it (session fixation) is worth nothing.
    await request.session.regenerate();
    request.session.cookie.secure = request.protocol === 'https';
    request.session.login = login;
    request.session.oidcIdToken = user.idToken;
    reply.generateCsrf();
    await auditLogin(store, {
      action: 'ui.login',
      outcome: 'ok',
      via: 'oidc',
      actor,
      owner: login.owner,
      httpRequestId: request.id,
      at: now,
    });
    log.info({ who: login.who, owner: login.owner, via: 'oidc' }, 'UI login');
    // Not a redirect: this answer ends a navigation the provider's page started, and the
    // session cookie (SameSite=Strict) is not sent on a redirect of it; a page of this site
    // moving on is a navigation of this site, which sends it.
    return sendPage(reply, goOn(next, 'Logged in'));
  });
}

/** A page that moves on to `url` at once (and says where, for a browser that does not). */
export function goOn(url: string, title: string): string {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${url}">
<title>${title} · schedflow</title></head>
<body><p>${title}. <a href="${url}">Continue</a></p></body></html>`.text;
}

function refusedPage(reply: FastifyReply, status: number, text: string): FastifyReply {
  const body: Html = html`<h1>Not logged in</h1><p>${text}</p><p><a href="/ui/login">Back to the login page</a></p>`;
  return sendPage(reply, page({ title: 'Not logged in', nav: 'login', session: null, body }), status);
}
