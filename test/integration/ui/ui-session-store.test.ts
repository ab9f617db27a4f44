import { randomBytes } from 'node:crypto';
import type { Session } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type UiSessionOptions, UiSessions } from '../../../src/redis/ui-sessions.js';
import { waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';

/**
 * The admin UI's sessions in Redis (issue 17): what one web process stores, another reads and
 * ends, within the same bounds the UI had in one process's memory.
 */

let redis: TestRedis;
const opened: UiSessions[] = [];
let n = 0;

beforeAll(async () => {
  redis = await startTestRedis();
});

afterEach(() => {
  for (const store of opened.splice(0)) store.close();
});

afterAll(async () => {
  await redis.stop();
});

/** Two stores on one Redis and prefix, as two web processes of one deployment. */
let prefix = '';
function twoProcesses(bounds: UiSessionOptions = {}): [UiSessions, UiSessions] {
  prefix = `ui-sessions-${process.pid}-${++n}`;
  const a = new UiSessions({ url: redis.url }, prefix, bounds);
  const b = new UiSessions({ url: redis.url }, prefix, bounds);
  opened.push(a, b);
  return [a, b];
}

const put = (store: UiSessions, id: string, session: Partial<Session>) =>
  new Promise<void>((resolve, reject) =>
    store.set(id, session as Session, (error) => (error ? reject(error) : resolve())),
  );
const get = (store: UiSessions, id: string) =>
  new Promise<Session | null | undefined>((resolve, reject) =>
    store.get(id, (error, session) => (error ? reject(error) : resolve(session))),
  );
const destroy = (store: UiSessions, id: string) =>
  new Promise<void>((resolve, reject) => store.destroy(id, (error) => (error ? reject(error) : resolve())));

const ofToken = (tokenId: string) => ({
  login: {
    who: `token ${tokenId}`,
    tokenId,
    scopes: ['read' as const],
    owner: 'default',
    actor: `ui:token:${tokenId}`,
  },
  _csrf: 'csrf secret',
});

describe('UI sessions kept in Redis', () => {
  it('a session one process stores, another reads and ends; both sign cookies with one secret', async () => {
    const [a, b] = twoProcesses();
    const [signA, signB] = [await a.cookieSigner(), await b.cookieSigner()];
    expect(signB.unsign(signA.sign('session-id'))).toMatchObject({ valid: true, value: 'session-id' });
    expect(signA.unsign(`session-id.${'x'.repeat(43)}`).valid).toBe(false);
    await put(a, 's1', ofToken('t1'));
    expect(await get(b, 's1')).toEqual(ofToken('t1'));
    await destroy(b, 's1');
    expect(await get(a, 's1')).toBeNull();
  });

  it('keeps a session under the hash of its id: reading Redis gives no id a browser could present', async () => {
    const [a] = twoProcesses();
    const id = randomBytes(32).toString('base64url');
    await put(a, id, ofToken('t1'));
    const raw = new Redis(redis.url);
    try {
      const keys = await raw.keys(`${prefix}:*`);
      const stored = await Promise.all(
        keys.map(async (key) => {
          const type = await raw.type(key);
          if (type === 'hash') return JSON.stringify(await raw.hgetall(key));
          if (type === 'zset') return JSON.stringify(await raw.zrange(key, 0, -1));
          return String(await raw.get(key));
        }),
      );
      expect(keys.length).toBeGreaterThan(0);
      expect([...keys, ...stored].join('\n')).not.toContain(id);
    } finally {
      raw.disconnect();
    }
    expect(await get(a, id)).toEqual(ofToken('t1'));
  });

  it('after Redis lost the cookie secret, every process signs with one again and takes the cookies it signed', async () => {
    const [a] = twoProcesses({ secretCheckMs: 100 });
    const signA = await a.cookieSigner();
    const before = signA.sign('old-session');
    const raw = new Redis(redis.url);
    try {
      await raw.del(`${prefix}:ui:cookie-secret`);
    } finally {
      raw.disconnect();
    }
    // A process that starts first after the loss makes a new secret; the running one follows.
    const c = new UiSessions({ url: redis.url }, prefix, { secretCheckMs: 100 });
    opened.push(c);
    const signC = await c.cookieSigner();
    await waitFor(async () => (signA.unsign(signC.sign('new-session')).valid ? true : undefined), {
      timeoutMs: 5000,
      intervalMs: 50,
      what: 'the running process to take the new secret',
    });
    expect(signC.unsign(signA.sign('x')).valid).toBe(true);
    expect(signA.unsign(before)).toMatchObject({ valid: true, value: 'old-session' });
  });

  it("a token's sessions end everywhere when it is revoked; another token's stay", async () => {
    const [a, b] = twoProcesses();
    await put(a, 's1', ofToken('t1'));
    await put(b, 's2', ofToken('t1'));
    await put(a, 's3', ofToken('t2'));
    await b.destroyOfToken('t1');
    expect(await get(a, 's1')).toBeNull();
    expect(await get(a, 's2')).toBeNull();
    expect(await get(a, 's3')).toEqual(ofToken('t2'));
  });

  it("one token's logins drop its own oldest sessions, never another token's", async () => {
    const [a, b] = twoProcesses({ maxSessionsPerLogin: 3 });
    await put(a, 'other', ofToken('t2'));
    for (let i = 0; i < 5; i++) await put(i % 2 ? a : b, `mine-${i}`, ofToken('t1'));
    const left = await Promise.all([0, 1, 2, 3, 4].map((i) => get(a, `mine-${i}`)));
    expect(left.map((s) => s !== null)).toEqual([false, false, true, true, true]);
    expect(await get(b, 'other')).toEqual(ofToken('t2'));
    // Saved again (a page that changed it): still one of the token's, nothing else dropped.
    await put(b, 'mine-4', ofToken('t1'));
    expect(await get(a, 'mine-2')).not.toBeNull();
  });

  it('keeps at most so many sessions in all, dropping the oldest', async () => {
    const [a, b] = twoProcesses({ maxSessions: 3 });
    for (let i = 0; i < 5; i++) await put(i % 2 ? a : b, `s${i}`, ofToken(`t${i}`));
    const left = await Promise.all([0, 1, 2, 3, 4].map((i) => get(b, `s${i}`)));
    expect(left.map((s) => s !== null)).toEqual([false, false, true, true, true]);
  });

  it('ends a session left unused for its idle time, and one past its age however used', async () => {
    const [idle] = twoProcesses({ idleMs: 2000 });
    await put(idle, 'unused', ofToken('t1'));
    await put(idle, 'used', ofToken('t1'));
    // Twice its idle time, 'used' read every 250 ms (each read keeps it, however late a loaded
    // machine makes the next), 'unused' never.
    for (let i = 0; i < 17; i++) {
      expect(await get(idle, 'used')).not.toBeNull();
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(await get(idle, 'unused')).toBeNull();
    expect(await get(idle, 'used')).not.toBeNull();
    const [aged] = twoProcesses({ maxAgeMs: 300 });
    await put(aged, 'old', ofToken('t1'));
    await waitFor(async () => ((await get(aged, 'old')) === null ? true : undefined), {
      timeoutMs: 5000,
      intervalMs: 100,
      what: 'the session past its age to end',
    });
  });

  it('starts behind a Redis too slow to answer for a moment (past the 2 s a page waits), instead of failing', async () => {
    const pauser = new Redis(redis.url);
    try {
      // Every other client's commands wait 3 s: the first read of the cookie secret times out.
      await pauser.call('CLIENT', 'PAUSE', '3000', 'ALL');
      const [store] = twoProcesses();
      const started = performance.now();
      const signer = await store.cookieSigner();
      expect(performance.now() - started).toBeGreaterThan(2000);
      expect(signer.unsign(signer.sign('session-id'))).toMatchObject({ valid: true, renew: false });
    } finally {
      pauser.disconnect();
    }
  }, 30_000);
});
