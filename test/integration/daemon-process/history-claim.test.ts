import { join } from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { cleanEnv, READY_TIMEOUT_MS, spawnDaemon } from '../../helpers/cli-process.js';
import { daemonProcessEnv, SHUTDOWN_GRACE_MS } from './daemon-process-env.js';

/**
 * Processes that share one Redis and queue prefix must share one history (issue 17): with
 * separate SQLite files, the worker would never find the web role's requests ("no job request
 * …", the request queued forever). The second history refuses to start instead, saying what
 * to configure; the registration lives only as long as a process of its history.
 */

const dproc = daemonProcessEnv();

/** At most three starts, one after the other (a refused one loads every module first), and 30 s. */
const THREE_STARTS_MS = 3 * READY_TIMEOUT_MS + 30_000;
/** Starts side by side, then a CLI's 30 s and the stops. */
const STARTS_AND_CLI_MS = READY_TIMEOUT_MS + 60_000;

describe('two data dirs, one Redis', { timeout: THREE_STARTS_MS }, () => {
  it('under one queue prefix: the second refuses (exit 2) naming the first; once the first stops, it starts', async () => {
    const t = await dproc.setUp();
    const env = cleanEnv({ REDIS_URL: t.redisUrl, SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS) });
    const first = spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env, cwd: t.root });
    await first.ready();
    const otherDir = join(t.root, 'other-data');
    const refused = spawnDaemon({
      dataDir: otherDir,
      configDir: t.configDir,
      env,
      cwd: t.root,
      extraArgs: ['--roles', 'worker,scheduler'],
    });
    const exit = await refused.exited;
    expect(exit.code, refused.stderr).toBe(2);
    expect(refused.stderr).toMatch(
      new RegExp(
        `another history is in use under queue prefix "schedflow" in this Redis: ${join(t.dataDir, 'history.sqlite')} on \\S+ \\(pid ${first.pid}, roles worker,scheduler,web\\)`,
      ),
    );
    expect(refused.stderr).toMatch(
      /start this one with the same data dir \(--data-dir, SCHEDFLOW_DATA_DIR\) on that host, or give it a SCHEDFLOW_QUEUE_PREFIX of its own/,
    );
    expect(refused.stderr).not.toMatch(/^\s+at /m);
    expect(first.child.exitCode).toBeNull();

    // The data dir moved: the old daemon stopped, the new one starts at once.
    expect((await first.stop('SIGTERM')).code).toBe(143);
    const moved = spawnDaemon({ dataDir: otherDir, configDir: t.configDir, env, cwd: t.root });
    await moved.ready();
    expect((await moved.stop('SIGTERM')).code).toBe(143);
  });

  it('the first killed (SIGKILL): its registration lapses within 30 s, then the other starts', async () => {
    const t = await dproc.setUp();
    const env = cleanEnv({ REDIS_URL: t.redisUrl, SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS) });
    const first = spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env, cwd: t.root });
    await first.ready();
    const killedAt = Date.now();
    await first.stop('SIGKILL');
    const otherDir = join(t.root, 'other-data');
    const early = spawnDaemon({ dataDir: otherDir, configDir: t.configDir, env, cwd: t.root });
    expect((await early.exited).code, early.stderr).toBe(2);
    expect(early.stderr).toMatch(/A registration lapses 30 s after the last process of its history stops/);
    // Its registration lapses within 30 s of the kill (Redis's clock, this machine's too)...
    const redis = new Redis(t.redisUrl);
    try {
      const held = await redis.zrange('schedflow:history', 0, -1, 'WITHSCORES');
      expect(held).toHaveLength(2);
      expect(JSON.parse(held[0] as string)).toMatchObject({ pid: first.pid });
      expect(Number(held[1])).toBeLessThanOrEqual(killedAt + 30_000 + 1000);
      // ...and once it has (the clock moved on, rather than this test waiting 30 s for it):
      await redis.zadd('schedflow:history', 'XX', Date.now() - 1, held[0] as string);
    } finally {
      redis.disconnect();
    }
    const later = spawnDaemon({ dataDir: otherDir, configDir: t.configDir, env, cwd: t.root });
    await later.ready();
    expect((await later.stop('SIGTERM')).code).toBe(143);
  });

  it('under different queue prefixes: both start', async () => {
    const t = await dproc.setUp();
    const env = (prefix: string) =>
      cleanEnv({
        REDIS_URL: t.redisUrl,
        SCHEDFLOW_QUEUE_PREFIX: prefix,
        SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS),
      });
    const a = spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env: env('site-a'), cwd: t.root });
    const b = spawnDaemon({
      dataDir: join(t.root, 'other-data'),
      configDir: t.configDir,
      env: env('site-b'),
      cwd: t.root,
    });
    await Promise.all([a.ready(), b.ready()]);
    expect((await a.stop('SIGTERM')).code).toBe(143);
    expect((await b.stop('SIGTERM')).code).toBe(143);
  });
});

describe('one data dir, its roles in separate processes', { timeout: STARTS_AND_CLI_MS }, () => {
  it('all start: they share the history', async () => {
    const t = await dproc.setUp();
    const env = cleanEnv({ REDIS_URL: t.redisUrl, SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS) });
    const roles = ['web', 'worker,scheduler'].map((r) =>
      spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env, cwd: t.root, extraArgs: ['--roles', r] }),
    );
    await Promise.all(roles.map((r) => r.ready()));
    const submit = await t.cli(
      ['jobs', 'submit', t.jobFile('split', '#!/bin/sh\ntrue\n'), '--wait', '--data-dir', t.dataDir],
      30_000,
    );
    expect(submit.code, submit.stderr).toBe(0);
    expect(submit.stdout).toMatch(/completed \(exit 0\)/);
    for (const r of roles) expect((await r.stop('SIGTERM')).code).toBe(143);
  });
});
