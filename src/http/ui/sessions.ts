import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { ApiScope } from '../../db/schema.js';

/** Who is logged in: a local API token (by id, never the token) or the configured password. */
export interface UiSession {
  id: string;
  /** Compared with the hidden field of every form (and the header of scripted POSTs). */
  csrfToken: string;
  /** `token:<name>` or `password`. */
  who: string;
  tokenId: string | null;
  scopes: ApiScope[];
  createdAt: number;
  lastSeenAt: number;
}

export interface SessionStoreOptions {
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

/**
 * Sessions in memory, keyed by a random 32-byte id (the cookie). In memory
 * rather than in SQLite: a session holds nothing worth keeping (no token, only
 * its id and scopes), a restart of the daemon simply asks for a new login, and
 * nothing secret or short-lived is written to the history file. Processes
 * with the `web` role each have their own sessions, so several web processes
 * behind one address need sticky routing.
 */
export class SessionStore {
  readonly #sessions = new Map<string, UiSession>();
  readonly #idleMs: number;
  readonly #maxAgeMs: number;
  readonly #max: number;
  readonly #maxPerLogin: number;

  constructor(options: SessionStoreOptions = {}) {
    this.#idleMs = options.idleMs ?? 8 * 3600_000;
    this.#maxAgeMs = options.maxAgeMs ?? 24 * 3600_000;
    this.#max = options.maxSessions ?? 1000;
    this.#maxPerLogin = options.maxSessionsPerLogin ?? 10;
  }

  create(input: { who: string; tokenId: string | null; scopes: ApiScope[] }, now = Date.now()): UiSession {
    const session: UiSession = {
      ...input,
      id: randomBytes(32).toString('base64url'),
      csrfToken: randomBytes(24).toString('base64url'),
      createdAt: now,
      lastSeenAt: now,
    };
    // Maps iterate in insertion order: the first of a login's sessions is its oldest.
    // The bound per login comes first, so one token logging in again and again only
    // ever drops its own sessions, and the store's bound is not reached by it alone.
    const own = [...this.#sessions.values()].filter((s) => loginOf(s) === loginOf(session));
    for (const old of own.slice(0, Math.max(0, own.length - this.#maxPerLogin + 1))) this.#sessions.delete(old.id);
    while (this.#sessions.size >= this.#max) {
      const oldest = this.#sessions.keys().next().value;
      if (oldest === undefined) break;
      this.#sessions.delete(oldest);
    }
    this.#sessions.set(session.id, session);
    return session;
  }

  get(id: string | undefined, now = Date.now()): UiSession | undefined {
    if (!id) return undefined;
    const session = this.#sessions.get(id);
    if (!session) return undefined;
    if (now - session.lastSeenAt > this.#idleMs || now - session.createdAt > this.#maxAgeMs) {
      this.#sessions.delete(id);
      return undefined;
    }
    session.lastSeenAt = now;
    return session;
  }

  delete(id: string): void {
    this.#sessions.delete(id);
  }

  /** Ends the sessions of a token (revoked or unknown now). */
  deleteOfToken(tokenId: string): void {
    for (const [id, s] of this.#sessions) if (s.tokenId === tokenId) this.#sessions.delete(id);
  }
}

/** Whose login a session is: the token's id, or the password's. */
const loginOf = (s: Pick<UiSession, 'tokenId' | 'who'>): string => s.tokenId ?? s.who;

/** Constant-time comparison of two texts (CSRF tokens, the UI password). */
export function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

export const isAdmin = (s: UiSession): boolean => s.scopes.includes('admin');
