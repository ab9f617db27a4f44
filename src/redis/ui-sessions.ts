import { createHash, randomBytes } from 'node:crypto';
import { Signer } from '@fastify/cookie';
import type { SessionStore } from '@fastify/session';
import type { Session } from 'fastify';
import { Redis } from 'ioredis';
import { type RedisTarget, redisOptions } from './redis-server.js';

/**
 * A UI request waits at most this long for Redis: longer is an outage, and the page fails
 * rather than hanging.
 */
const ANSWER_MS = 2000;
/** Tries at the cookie secret when a web process starts: 20 s of a Redis too slow to answer. */
const START_ATTEMPTS = 10;

export interface UiSessionOptions {
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
  /** How often the cookie secret is looked at again. @defaultValue 10 s */
  secretCheckMs?: number;
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

/**
 * Reads a session and keeps it alive (idle time counts from the last use), or ends it when it
 * is past its age, by Redis's clock as the session's creation was: the hosts' need not agree.
 * KEYS: the session's hash, the set of every session. ARGV: its id, idle ms, max age ms, the
 * prefix of login sets. Answers the session's JSON, or false.
 */
const GET_SCRIPT = `
local s = redis.call('HMGET', KEYS[1], 'session', 'created', 'login')
if not s[1] then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
if now - tonumber(s[2]) > tonumber(ARGV[3]) then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  if s[3] and s[3] ~= '' then redis.call('ZREM', ARGV[4] .. s[3], ARGV[1]) end
  return false
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return s[1]
`;

/**
 * Keeps one live-feed stream of a session counted, or refuses it. KEYS: the session's hash, the
 * set of its streams (scored by when each was last seen). ARGV: the stream's id, most streams,
 * the ms after which a stream not seen again is taken for gone (its process died), max age ms,
 * `open` (a new stream, refused over the bound) or `beat` (one already open).
 * Answers 1 (counted), 0 (refused: the session has its most streams open) or -1 (the session is
 * gone: logged out, ended, idle or past its age).
 *
 * The count is the deployment's, like the sessions: streams of one session on several web
 * processes share one bound; a process that died stops renewing its streams, which then drop out.
 */
const STREAM_SCRIPT = `
local s = redis.call('HMGET', KEYS[1], 'created')
if not s[1] then
  redis.call('DEL', KEYS[2])
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
if now - tonumber(s[1]) > tonumber(ARGV[4]) then return -1 end
local id, most, stale = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.3f', now - stale))
if ARGV[5] == 'open' and redis.call('ZCARD', KEYS[2]) >= most then return 0 end
redis.call('ZADD', KEYS[2], string.format('%.3f', now), id)
redis.call('PEXPIRE', KEYS[2], stale)
return 1
`;

/**
 * Counts one failed login against each of its counters, in a window that starts with the first
 * failure. KEYS: the counters. ARGV: the window's ms.
 */
const LOGIN_FAILED_SCRIPT = `
for _, key in ipairs(KEYS) do
  if redis.call('INCR', key) == 1 then redis.call('PEXPIRE', key, ARGV[1]) end
end
return 1
`;

/**
 * How long logins are refused: the ms until the last of the counters at or over its bound
 * expires, 0 when none is. KEYS: the counters. ARGV: each one's bound, in order.
 */
const LOGIN_WAIT_SCRIPT = `
local wait = 0
for i, key in ipairs(KEYS) do
  local failed = tonumber(redis.call('GET', key) or '0')
  if failed >= tonumber(ARGV[i]) then
    local left = redis.call('PTTL', key)
    if left > wait then wait = left end
  end
end
return wait
`;

interface SessionCommands {
  schedflowUiSessionPut(session: string, all: string, ofLogin: string, ...args: (string | number)[]): Promise<number>;
  schedflowUiSessionGet(session: string, all: string, ...args: (string | number)[]): Promise<string | null>;
  schedflowUiStream(session: string, streams: string, ...args: (string | number)[]): Promise<number>;
  schedflowUiLoginFailed(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number>;
  schedflowUiLoginWait(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<number>;
}

/** A bound on failed logins: at most `most` failures counted under `key` in a window. */
export interface LoginCounter {
  /** What the failures are counted under: `ip:<address>`, or `password` for the UI password's. */
  key: string;
  most: number;
}

/** What a live-feed stream's check found: still counted, refused over its session's bound, or its session is gone. */
export type StreamCheck = 'counted' | 'refused' | 'session-gone';

/**
 * Calls a store callback once `work` settles, outside its promise: a callback that throws (the
 * plugin's, sending the answer) must reach the caller, not become an unhandled rejection.
 */
function settle<T>(work: Promise<T>, callback: (error: unknown, value?: T) => void): void {
  work.then(
    (value) => process.nextTick(callback, null, value),
    (error: unknown) => process.nextTick(callback, error),
  );
}

/**
 * A session's name in Redis: the SHA-256 of its id, never the id. The id is the cookie's
 * secret; whoever reads Redis (or its append-only file) learns nothing a browser could present.
 */
export function storedId(sessionId: string): string {
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
  readonly #redis: Redis & SessionCommands;
  readonly #idleMs: number;
  readonly #maxAgeMs: number;
  readonly #max: number;
  readonly #maxPerLogin: number;
  readonly #secretCheckMs: number;
  #secretCheck: NodeJS.Timeout | undefined;

  constructor(
    target: RedisTarget,
    private readonly prefix: string,
    options: UiSessionOptions = {},
  ) {
    const redis = new Redis({ ...redisOptions(target), maxRetriesPerRequest: 1, commandTimeout: ANSWER_MS });
    // A page that cannot reach Redis fails with its own error; outages are logged by the queues' watch.
    redis.on('error', () => {});
    redis.defineCommand('schedflowUiSessionPut', { numberOfKeys: 3, lua: PUT_SCRIPT });
    redis.defineCommand('schedflowUiSessionGet', { numberOfKeys: 2, lua: GET_SCRIPT });
    redis.defineCommand('schedflowUiStream', { numberOfKeys: 2, lua: STREAM_SCRIPT });
    // The number of counters varies: given first, with the call.
    redis.defineCommand('schedflowUiLoginFailed', { lua: LOGIN_FAILED_SCRIPT });
    redis.defineCommand('schedflowUiLoginWait', { lua: LOGIN_WAIT_SCRIPT });
    this.#redis = redis as Redis & SessionCommands;
    this.#idleMs = options.idleMs ?? 8 * 3600_000;
    this.#maxAgeMs = options.maxAgeMs ?? 24 * 3600_000;
    this.#max = options.maxSessions ?? 1000;
    this.#maxPerLogin = options.maxSessionsPerLogin ?? 10;
    this.#secretCheckMs = options.secretCheckMs ?? 10_000;
  }

  #key(what: string): string {
    return `${this.prefix}:ui:${what}`;
  }

  /**
   * What signs the session cookies: the deployment's secret, the same for every web process
   * (the first to start makes it), so a cookie one of them set is good in the others. Looked at
   * again and again: a Redis that lost its data gets this process's secret back, or,
   * when another process made a new one first, this process signs with that one and still takes
   * cookies signed with its own. Looked at every `secretCheckMs`.
   */
  async cookieSigner(): Promise<Signer> {
    let secrets = [await this.#firstSecret(randomBytes(32).toString('base64url'))];
    let signer = new Signer(secrets);
    this.#secretCheck = setInterval(() => {
      this.#sharedSecret(secrets[0] as string).then(
        (current) => {
          if (current === secrets[0]) return;
          secrets = [current, ...secrets].slice(0, 2);
          signer = new Signer(secrets);
        },
        // Redis away: the secret it had stands; the pages say the rest.
        () => {},
      );
    }, this.#secretCheckMs);
    this.#secretCheck.unref();
    return {
      sign: (value: string) => signer.sign(value),
      unsign: (input: string) => signer.unsign(input),
    } as Signer;
  }

  /**
   * The secret at start: a Redis slow to answer for a moment (a command past ANSWER_MS, as on a
   * loaded host) is asked again, up to START_ATTEMPTS times, rather than failing the start. A
   * Redis that is not there fails it at once, as before.
   */
  async #firstSecret(mine: string): Promise<string> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#sharedSecret(mine);
      } catch (error) {
        if (attempt >= START_ATTEMPTS || !(error instanceof Error) || error.message !== 'Command timed out')
          throw error;
      }
    }
  }

  /** The deployment's cookie secret, `mine` when there is none yet. */
  async #sharedSecret(mine: string): Promise<string> {
    const key = this.#key('cookie-secret');
    await this.#redis.set(key, mine, 'NX');
    const secret = await this.#redis.get(key);
    if (!secret) throw new Error('the UI cookie secret is missing from Redis');
    return secret;
  }

  set(sessionId: string, session: Session, callback: (err?: unknown) => void): void {
    const login = loginKeyOf(session);
    const id = storedId(sessionId);
    settle(
      this.#redis.schedflowUiSessionPut(
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
      ),
      (error) => callback(error ?? undefined),
    );
  }

  get(sessionId: string, callback: (err: unknown, result?: Session | null) => void): void {
    settle(this.#get(storedId(sessionId)), callback);
  }

  destroy(sessionId: string, callback: (err?: unknown) => void): void {
    settle(this.#destroy(storedId(sessionId)), (error) => callback(error ?? undefined));
  }

  /** Ends every session of a token (revoked, or without the scope the UI needs, now). */
  async destroyOfToken(tokenId: string): Promise<void> {
    const ofLogin = this.#key(`login:${tokenId}`);
    const ids = await this.#redis.zrange(ofLogin, 0, -1);
    const multi = this.#redis.multi();
    for (const id of ids) multi.del(this.#key(`session:${id}`)).zrem(this.#key('sessions'), id);
    await multi.del(ofLogin).exec();
  }

  /**
   * Counts a live-feed stream of a session (by its stored id, storedId) or renews it, unless the
   * session is gone or, for a new one (`open`), already has `most` streams open. A stream not
   * renewed within `staleMs` no longer counts.
   */
  async checkStream(
    sessionKey: string,
    streamId: string,
    how: { open: boolean; most: number; staleMs: number },
  ): Promise<StreamCheck> {
    const answer = await this.#redis.schedflowUiStream(
      this.#key(`session:${sessionKey}`),
      this.#key(`streams:${sessionKey}`),
      streamId,
      how.most,
      how.staleMs,
      this.#maxAgeMs,
      how.open ? 'open' : 'beat',
    );
    return answer === 1 ? 'counted' : answer === 0 ? 'refused' : 'session-gone';
  }

  /** A stream that ended stops counting against its session at once. */
  async endStream(sessionKey: string, streamId: string): Promise<void> {
    await this.#redis.zrem(this.#key(`streams:${sessionKey}`), streamId);
  }

  /** Counts a failed login against each counter, for `windowMs` from the first failure. */
  async loginFailed(counters: readonly LoginCounter[], windowMs: number): Promise<void> {
    if (counters.length === 0) return;
    await this.#redis.schedflowUiLoginFailed(
      counters.length,
      ...counters.map((c) => this.#key(`login-failures:${c.key}`)),
      windowMs,
    );
  }

  /** Ms until a login may be tried again: 0 while no counter is at its bound. */
  async loginWaitMs(counters: readonly LoginCounter[]): Promise<number> {
    if (counters.length === 0) return 0;
    return this.#redis.schedflowUiLoginWait(
      counters.length,
      ...counters.map((c) => this.#key(`login-failures:${c.key}`)),
      ...counters.map((c) => c.most),
    );
  }

  close(): void {
    clearInterval(this.#secretCheck);
    this.#redis.disconnect();
  }

  /** `id`: the session's stored id (storedId), as every method below. */
  async #get(id: string): Promise<Session | null> {
    const json = await this.#redis.schedflowUiSessionGet(
      this.#key(`session:${id}`),
      this.#key('sessions'),
      id,
      this.#idleMs,
      this.#maxAgeMs,
      this.#key('login:'),
    );
    return json ? (JSON.parse(json) as Session) : null;
  }

  async #destroy(id: string): Promise<void> {
    const key = this.#key(`session:${id}`);
    const login = await this.#redis.hget(key, 'login');
    const multi = this.#redis.multi().del(key).zrem(this.#key('sessions'), id);
    if (login) multi.zrem(this.#key(`login:${login}`), id);
    await multi.exec();
  }
}
