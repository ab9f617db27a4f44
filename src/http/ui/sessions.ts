import { timingSafeEqual } from 'node:crypto';
import type { SessionStore } from '@fastify/session';
import type { Session } from 'fastify';
import type { ApiScope } from '../../db/schema.js';

/** Who logged in: a local API token (by id, never the token) or the configured password. */
export interface UiLogin {
  /** `token <name>` or `password`. */
  who: string;
  tokenId: string | null;
  /** The scopes at login; a token's are read again on every request (see ui-plugin.ts). */
  scopes: ApiScope[];
}

declare module 'fastify' {
  interface Session {
    /** Set by a successful login; a session without it is nobody's. */
    login?: UiLogin;
  }
}

/** The logged-in user of one request, as the pages see it. */
export interface UiSession extends UiLogin {
  /** For the hidden field of every form (and the header of scripted POSTs): made from the session's CSRF secret. */
  csrfToken: string;
}

export interface MemorySessionStoreOptions {
  /** A session unused this long is gone. @defaultValue 8 hours */
  idleMs?: number;
  /** A session is gone this long after login, used or not. @defaultValue 24 hours */
  maxAgeMs?: number;
  /** Oldest sessions are dropped beyond this many. @defaultValue 1000 */
  maxSessions?: number;
  /**
   * Sessions one token (or the password) may hold; its next login drops its own oldest,
   * so no login can push another token's session out. @defaultValue 10
   */
  maxSessionsPerLogin?: number;
}

interface Entry {
  session: Session;
  /** Whose login the session is: the token's id or the password's; null before login. */
  login: string | null;
  createdAt: number;
  lastSeenAt: number;
}

/**
 * The UI's sessions for @fastify/session, in memory, behind the plugin's store
 * interface (so another store, Redis for one, can replace it). In memory
 * rather than in SQLite: a session holds nothing worth keeping (no token,
 * only its id and scopes), a restart of the daemon simply asks for a new
 * login, and nothing secret or short-lived is written to the history file.
 * Processes with the `web` role each have their own sessions, so several web
 * processes behind one address need sticky routing.
 *
 * The plugin's own memory store keeps every session forever; this one bounds
 * them: by idle time and age, by count, and per login.
 */
export class MemorySessionStore implements SessionStore {
  readonly #entries = new Map<string, Entry>();
  readonly #idleMs: number;
  readonly #maxAgeMs: number;
  readonly #max: number;
  readonly #maxPerLogin: number;

  constructor(options: MemorySessionStoreOptions = {}) {
    this.#idleMs = options.idleMs ?? 8 * 3600_000;
    this.#maxAgeMs = options.maxAgeMs ?? 24 * 3600_000;
    this.#max = options.maxSessions ?? 1000;
    this.#maxPerLogin = options.maxSessionsPerLogin ?? 10;
  }

  set(sessionId: string, session: Session, callback: (err?: unknown) => void): void {
    this.#put(sessionId, session, Date.now());
    callback();
  }

  get(sessionId: string, callback: (err: unknown, result?: Session | null) => void): void {
    callback(null, this.#find(sessionId, Date.now()));
  }

  destroy(sessionId: string, callback: (err?: unknown) => void): void {
    this.#entries.delete(sessionId);
    callback();
  }

  /** Ends the sessions of a token (revoked, or without the scope the UI needs, now). */
  destroyOfToken(tokenId: string): void {
    for (const [id, entry] of this.#entries) if (entry.session.login?.tokenId === tokenId) this.#entries.delete(id);
  }

  #put(id: string, session: Session, now: number): void {
    const login = session.login ? (session.login.tokenId ?? session.login.who) : null;
    const existing = this.#entries.get(id);
    // The plugin saves a session on login (empty, as it regenerates the id), then again
    // once the login is in it: the bound per login applies when a session becomes one's.
    // It comes first, so one token logging in again and again only ever drops its own
    // sessions, and the store's bound is not reached by it alone. Maps iterate in
    // insertion order: the first of a login's sessions is its oldest.
    if (login !== null && existing?.login !== login) {
      const own = [...this.#entries].filter(([other, e]) => other !== id && e.login === login);
      for (const [old] of own.slice(0, Math.max(0, own.length - this.#maxPerLogin + 1))) this.#entries.delete(old);
    }
    if (existing) {
      existing.session = session;
      existing.login = login;
      existing.lastSeenAt = now;
      return;
    }
    while (this.#entries.size >= this.#max) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) break;
      this.#entries.delete(oldest);
    }
    this.#entries.set(id, { session, login, createdAt: now, lastSeenAt: now });
  }

  #find(id: string, now: number): Session | null {
    const entry = this.#entries.get(id);
    if (!entry) return null;
    if (now - entry.lastSeenAt > this.#idleMs || now - entry.createdAt > this.#maxAgeMs) {
      this.#entries.delete(id);
      return null;
    }
    entry.lastSeenAt = now;
    return entry.session;
  }
}

/** Constant-time comparison of two texts (the login form's nonce, the UI password). */
export function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

export const isAdmin = (s: UiLogin): boolean => s.scopes.includes('admin');
