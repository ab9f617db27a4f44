import { timingSafeEqual } from 'node:crypto';
import type { Principal } from '../../access/principal.js';
import type { ApiScope } from '../../db/schema.js';

/** How a session was logged in: as the audit log's `ui.login` rows say it. */
export type LoginVia = 'token' | 'password' | 'oidc';

/**
 * Who logged in: a local API token (by id, never the token), the configured password, or a
 * user of the identity provider (single sign-on, src/http/ui/oidc-login.ts).
 */
export interface UiLogin {
  /** `token <name>`, `password`, or `<user> (<provider>)` for single sign-on. */
  who: string;
  /** Absent on sessions made before single sign-on existed (token or password logins). */
  via?: LoginVia;
  /**
   * When the session ends, in ms since the epoch, used or not (single sign-on:
   * `sessionMaxAgeSec` after login); absent: the store's own bounds alone.
   */
  expiresAt?: number;
  tokenId: string | null;
  /** The scopes at login; a token's are read again on every request (see ui-plugin.ts). */
  scopes: ApiScope[];
  /** Whose requests and runs it acts on (a token's owner; `default` for the password). */
  owner: string;
  /** As the history and the audit log record it: `ui:token:<name>`, `ui:password`. */
  actor: string;
}

/** The logged-in user as a principal (src/access/principal.ts). */
export const principalOfLogin = (s: UiLogin): Principal => ({ owner: s.owner, actor: s.actor, scopes: s.scopes });

declare module 'fastify' {
  interface Session {
    /** Set by a successful login; a session without it is nobody's. */
    login?: UiLogin;
    /**
     * A single-sign-on session's ID token: sent back to the provider as `id_token_hint` when
     * logging out there. Never shown; the UI calls no API with it.
     */
    oidcIdToken?: string;
  }
}

/** The logged-in user of one request, as the pages see it. */
export interface UiSession extends UiLogin {
  /**
   * The session's id as Redis keeps it (a hash, never the cookie's id): what its own request
   * limit and its live-feed streams are counted under.
   */
  sessionKey: string;
  /** For the hidden field of every form (and the header of scripted POSTs): made from the session's CSRF secret. */
  csrfToken: string;
}

/** Constant-time comparison of two texts (the login form's nonce, the UI password). */
export function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

export const isAdmin = (s: UiLogin): boolean => s.scopes.includes('admin');
