import { createHash, randomBytes } from 'node:crypto';
import type { SessionStore } from '@fastify/session';
import type { Session } from 'fastify';
import { Redis } from 'ioredis';
import { type RedisTarget, redisOptions } from './redis-server.js';

/**
 * A UI request waits at most this long for Redis: longer is an outage, and the page fails
 * rather than hanging.
 */
const ANSWER_MS = 2000;

export interface UiSessionBounds {
  /** A session unused this long is gone. @defaultValue 8 hours */
  idleMs?: number;
  /** A session is gone this long after login, used or not. @defaultValue 24 hours */
  maxAgeMs?: number;
  /** Oldest sessions are dropped beyond this many. @defaultValue 1000 */
  maxSessions?: number;
  /**
   * Sessions one token (or the password) may hold; its next login drops its own oldest, so no
   * login can push another token's session out. @defaultValue 10
   */
  maxSessionsPerLogin?: number;
}

/**
 * Stores a session, atomically with its bounds. KEYS: the session's hash, the set of every
 * session (by creation), the set of its login's sessions ('' before login). ARGV: id, the
 * session's JSON, its login ('' for none), idle ms, max age ms, most sessions, most sessions
 * per login, the prefix of session keys.
 *
 * The plugin saves a session at login (empty, as it regenerates the id), then again once the
 * login is in it: the bound per login applies when a session becomes one's. It comes first, so
 * one token logging in again and again only ever drops its own sessions.
 */
const PUT_SCRIPT = `
local id, json, login = ARGV[1], ARGV[2], ARGV[3]
local idle, max_age = tonumber(ARGV[4]), tonumber(ARGV[5])
-- Redis's clock, to the microsecond: sessions stored in the same millisecond keep their order.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local most, most_per_login, session_prefix = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]
local existing = redis.call('HMGET', KEYS[1], 'created', 'login')
-- As text to the microsecond: a Lua number passed to Redis keeps only 14 digits.
local created = existing[1] or string.format('%.3f', now)

local function drop_oldest(set, keep)
  local extra = redis.call('ZCARD', set) - keep
  if extra <= 0 then return end
  for _, old in ipairs(redis.call('ZRANGE', set, 0, extra - 1)) do
    redis.call('DEL', session_prefix .. old)
    redis.call('ZREM', set, old)
    redis.call('ZREM', KEYS[2], old)
  end
end

if login ~= '' and existing[2] ~= login then
  redis.call('ZREM', KEYS[3], id)
  drop_oldest(KEYS[3], most_per_login - 1)
  redis.call('ZADD', KEYS[3], created, id)
  redis.call('PEXPIRE', KEYS[3], max_age)
end
if not existing[1] then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.3f', now - max_age))
  drop_oldest(KEYS[2], most - 1)
  redis.call('ZADD', KEYS[2], created, id)
end
redis.call('HSET', KEYS[1], 'session', json, 'login', login, 'created', created)
redis.call('PEXPIRE', KEYS[1], idle)
return 1
`;

interface PutCommand {
  schedflowUiSessionPut(session: string, all: string, ofLogin: string, ...args: (string | number)[]): Promise<number>;
}

/**
 * A session's name in Redis: the SHA-256 of its id, never the id. The id is the cookie's
 * secret; whoever reads Redis (or its append-only file) learns nothing a browser could present.
 */
function storedId(sessionId: string): string {
  return createHash('sha256').update(sessionId).digest('base64url');
}

/** The login a session counts against: its token's id, or `password`. */
function loginKeyOf(session: Session): string {
  const login = session.login;
  if (!login) return '';
  return login.tokenId ?? login.who;
}

/**
 * The admin UI's sessions for @fastify/session, in Redis under the deployment's queue prefix
 * (`<prefix>:ui:…`): every process with the `web` role (on any host) knows every login, so
 * several of them can stand behind one address without sticky routing, and a revoked token's
 * sessions end in all of them. Bounded as a browser's sessions should be: by idle time and
 * age, by count, and per login. A session holds no token, only its id and scopes, and the
 * forms' CSRF secret, under the hash of its id; a Redis that lost its data asks for a new login.
 */
export class UiSessions implements SessionStore {
  readonly #redis: Redis & PutCommand;
  readonly #idleMs: number;
  readonly #maxAgeMs: number;
  readonly #max: number;
  readonly #maxPerLogin: number;

  constructor(
    target: RedisTarget,
    private readonly prefix: string,
    bounds: UiSessionBounds = {},
  ) {
    const redis = new Redis({ ...redisOptions(target), maxRetriesPerRequest: 1, commandTimeout: ANSWER_MS });
    // A page that cannot reach Redis fails with its own error; outages are logged by the queues' watch.
    redis.on('error', () => {});
    redis.defineCommand('schedflowUiSessionPut', { numberOfKeys: 3, lua: PUT_SCRIPT });
    this.#redis = redis as Redis & PutCommand;
    this.#idleMs = bounds.idleMs ?? 8 * 3600_000;
    this.#maxAgeMs = bounds.maxAgeMs ?? 24 * 3600_000;
    this.#max = bounds.maxSessions ?? 1000;
    this.#maxPerLogin = bounds.maxSessionsPerLogin ?? 10;
  }

  #key(what: string): string {
    return `${this.prefix}:ui:${what}`;
  }

  /**
   * The secret that signs the session cookies, the same for every web process of the
   * deployment (the first to start makes it): a cookie one of them set is good in the others.
   */
  async cookieSecret(): Promise<string> {
    const key = this.#key('cookie-secret');
    await this.#redis.set(key, randomBytes(32).toString('base64url'), 'NX');
    const secret = await this.#redis.get(key);
    if (!secret) throw new Error('the UI cookie secret is missing from Redis');
    return secret;
  }

  set(sessionId: string, session: Session, callback: (err?: unknown) => void): void {
    const login = loginKeyOf(session);
    const id = storedId(sessionId);
    this.#redis
      .schedflowUiSessionPut(
        this.#key(`session:${id}`),
        this.#key('sessions'),
        login ? this.#key(`login:${login}`) : this.#key('login:'),
        id,
        JSON.stringify(session),
        login,
        this.#idleMs,
        this.#maxAgeMs,
        this.#max,
        this.#maxPerLogin,
        this.#key('session:'),
      )
      .then(() => callback(), callback);
  }

  get(sessionId: string, callback: (err: unknown, result?: Session | null) => void): void {
    this.#get(storedId(sessionId)).then(
      (session) => callback(null, session),
      (error: unknown) => callback(error),
    );
  }

  destroy(sessionId: string, callback: (err?: unknown) => void): void {
    this.#destroy(storedId(sessionId)).then(() => callback(), callback);
  }

  /** Ends every session of a token (revoked, or without the scope the UI needs, now). */
  async destroyOfToken(tokenId: string): Promise<void> {
    const ofLogin = this.#key(`login:${tokenId}`);
    const ids = await this.#redis.zrange(ofLogin, 0, -1);
    const multi = this.#redis.multi();
    for (const id of ids) multi.del(this.#key(`session:${id}`)).zrem(this.#key('sessions'), id);
    await multi.del(ofLogin).exec();
  }

  close(): void {
    this.#redis.disconnect();
  }

  /** `id`: the session's stored id (storedId), as every method below. */
  async #get(id: string): Promise<Session | null> {
    const key = this.#key(`session:${id}`);
    // Read and kept alive in one round trip: idle time counts from the last use.
    const answers = await this.#redis.multi().hmget(key, 'session', 'created').pexpire(key, this.#idleMs).exec();
    const [json, created] = (answers?.[0]?.[1] ?? []) as (string | null)[];
    if (!json || !created) return null;
    if (Date.now() - Number(created) > this.#maxAgeMs) {
      await this.#destroy(id);
      return null;
    }
    return JSON.parse(json) as Session;
  }

  async #destroy(id: string): Promise<void> {
    const key = this.#key(`session:${id}`);
    const login = await this.#redis.hget(key, 'login');
    const multi = this.#redis.multi().del(key).zrem(this.#key('sessions'), id);
    if (login) multi.zrem(this.#key(`login:${login}`), id);
    await multi.exec();
  }
}
