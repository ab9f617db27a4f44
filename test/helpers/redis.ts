import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './free-port.js';
import { onHost, type TestHost } from './netns.js';

export interface TestRedis {
  url: string;
  /** Kills the server (SIGKILL, as a crash) and starts it again on the same port and files. */
  restart(): Promise<void>;
  kill(): Promise<void>;
  start(): Promise<void>;
  /** Kills the server and starts a new one on the same port without its data (as a Redis restarted empty). */
  restartEmpty(): Promise<void>;
  /** SIGSTOP: the server holds its connections but answers nothing, until `resume` (SIGCONT). */
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

/**
 * A real redis-server on a free loopback port with its own directory (appendonly, so a restart
 * keeps data); or on a host of a test network (test/helpers/netns.ts), on its address.
 */
export async function startTestRedis(options: { host?: TestHost } = {}): Promise<TestRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-redis-'));
  const { host } = options;
  // A host's ports are its own: Redis's usual one is free there.
  const port = host ? 6379 : await freePort();
  const address = host?.address ?? '127.0.0.1';
  // Off loopback Redis wants a password (protected mode), as a shared Redis should have.
  const password = host ? randomBytes(12).toString('hex') : undefined;
  const url = password ? `redis://:${password}@${address}:${port}` : `redis://${address}:${port}`;
  let child: ChildProcess | undefined;
  const start = async () => {
    const args = [
      '--port',
      String(port),
      '--bind',
      address,
      '--dir',
      dir,
      '--appendonly',
      'yes',
      // Written to the file before each reply (redis-server writes its append-only buffer
      // before it answers), so a SIGKILL loses nothing: only a crash of the machine would,
      // which fsync guards against. 'always' fsynced every write, 1–4 ms each on this disk
      // (redis-benchmark: 800 SETs a second against 27,000), and every BullMQ call waited.
      '--appendfsync',
      'no',
      '--save',
      '',
      ...(password ? ['--requirepass', password] : []),
    ];
    const [command, argv] = host ? onHost(host, 'redis-server', args) : ['redis-server', args];
    child = spawn(command, argv, { stdio: 'ignore' });
    for (let i = 0; i < 100; i++) {
      const client = new Redis(url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 1 });
      client.on('error', () => {});
      try {
        await client.connect();
        if ((await client.ping()) === 'PONG') return;
      } catch {
        // not up yet
      } finally {
        client.disconnect();
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGKILL');
    throw new Error('redis-server did not start (is it installed? apt-get install redis-server)');
  };
  const kill = async () => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    url,
    start,
    kill,
    restart: async () => {
      await kill();
      await start();
    },
    restartEmpty: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dir, { recursive: true });
      await start();
    },
    pause: () => {
      child?.kill('SIGSTOP');
    },
    resume: () => {
      child?.kill('SIGCONT');
    },
    stop: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
