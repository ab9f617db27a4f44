import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { ConfigError, RedisStartError } from '../errors.js';
import { sleep } from '../lib/sleep.js';
import { answerWithin } from '../lib/with-timeout.js';
import type { Logger } from '../logger.js';

/** How to reach Redis: a URL, or a unix socket path. */
export type RedisTarget = { url: string } | { path: string };

export function redisOptions(target: RedisTarget): RedisOptions {
  // BullMQ workers need blocking commands without a per-request retry limit.
  const common: RedisOptions = { maxRetriesPerRequest: null, enableReadyCheck: true };
  if ('path' in target) return { ...common, path: target.path };
  const url = new URL(target.url);
  return {
    ...common,
    host: url.hostname,
    port: Number(url.port || 6379),
    username: url.username || undefined,
    password: url.password ? decodeURIComponent(url.password) : undefined,
    db: url.pathname.length > 1 ? Number(url.pathname.slice(1)) : undefined,
    tls: url.protocol === 'rediss:' ? {} : undefined,
  };
}

export function createRedis(target: RedisTarget): Redis {
  return new Redis(redisOptions(target));
}

async function answers(target: RedisTarget): Promise<boolean> {
  const client = new Redis({
    ...redisOptions(target),
    maxRetriesPerRequest: 1,
    lazyConnect: true,
    retryStrategy: () => null,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

export interface PrivateRedis {
  target: RedisTarget;
  /** False when an instance left running for this data dir was reused. */
  started: boolean;
  stop(): Promise<void>;
}

/**
 * Starts schedflow's own redis-server for a data dir: a unix socket and its
 * append-only file in `<dataDir>/redis`, so queued work survives a restart.
 * One left running by a daemon that died is reused.
 */
export async function startPrivateRedis(dataDir: string, logger: Logger): Promise<PrivateRedis> {
  const dir = join(dataDir, 'redis');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const target = { path: join(dir, 'redis.sock') };
  const pidFile = join(dir, 'redis.pid');
  if (existsSync(target.path) && (await answers(target))) {
    logger.info({ socket: target.path }, 'reusing the redis-server left running for this data dir');
    const pid = Number(readFileSync(pidFile, 'utf8'));
    const untilExit = stopAtExit(() => signalPid(pid));
    return {
      target,
      started: false,
      stop: async () => {
        untilExit.cancel();
        await stopPid(pid);
      },
    };
  }
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error) {
    throw new ConfigError(
      'redis-server is not installed: install it (Debian/Ubuntu: sudo apt-get install redis-server) or set REDIS_URL to a Redis server',
    );
  }
  // redis-server makes its append-only files, log and pid file with the umask it inherits:
  // 077, so they are the owner's alone whatever umask schedflow was started with.
  const child: ChildProcess = spawn(
    '/bin/sh',
    [
      '-c',
      'umask 077 && exec redis-server "$@"',
      'redis-server',
      '--port',
      '0',
      '--unixsocket',
      target.path,
      '--unixsocketperm',
      '700',
      '--dir',
      dir,
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
      '--save',
      '',
      '--pidfile',
      pidFile,
      '--daemonize',
      'no',
      '--logfile',
      join(dir, 'redis.log'),
    ],
    // Detached: a session and process group of its own, so the SIGINT or SIGTERM a terminal
    // (Ctrl-C) or a supervisor sends to the daemon's whole group does not reach it. The daemon
    // still needs it to shut down (workers hand their jobs back, queues close), and stops it last.
    { stdio: 'ignore', detached: true },
  );
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  for (let waited = 0; !(await answers(target)); waited += 100) {
    const early = await Promise.race([exited, sleep(100).then(() => undefined)]);
    if (early !== undefined || waited > 10_000) {
      child.kill('SIGKILL');
      throw new RedisStartError(`redis-server did not start; see ${join(dir, 'redis.log')}`);
    }
  }
  const untilExit = stopAtExit(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  });
  logger.info({ socket: target.path, redisPid: child.pid }, 'started a private redis-server');
  return {
    target,
    started: true,
    stop: async () => {
      untilExit.cancel();
      if (child.exitCode !== null || child.signalCode !== null) return;
      // SIGTERM: redis-server flushes its append-only file and exits.
      child.kill('SIGTERM');
      // Its timer cleared once it exits: a 10 s timer left pending would hold the process open.
      await answerWithin(exited, 10_000);
    },
  };
}

/**
 * Out of the daemon's process group, the private Redis would outlive a daemon that exits
 * without its shutdown (a second Ctrl-C, a fatal error): it is sent SIGTERM as the process
 * exits (it flushes its append-only file and ends). A daemon killed with SIGKILL runs no
 * code: its Redis is left running, and its restart reuses it.
 */
function stopAtExit(signal: () => void): { cancel(): void } {
  process.once('exit', signal);
  return { cancel: () => process.off('exit', signal) };
}

function signalPid(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 'SIGTERM');
    return true;
  } catch {
    return false;
  }
}

async function stopPid(pid: number): Promise<void> {
  if (!signalPid(pid)) return;
  for (let i = 0; i < 100; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await sleep(100);
  }
}
