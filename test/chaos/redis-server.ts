import { mkdirSync, rmSync } from 'node:fs';
import { Redis } from 'ioredis';
import { freePort } from '../helpers/free-port.js';
import { pollUntil, type Spawned, spawnTracked } from './processes.js';

/**
 * An external redis-server the harness owns (the daemon reaches it through REDIS_URL), on a
 * free loopback port with append-only persistence, so it can be killed and started again
 * with its data, or with none (its files removed: a Redis that came back empty).
 */
export class ExternalRedis {
  private proc: Spawned | undefined;

  private constructor(
    private readonly dir: string,
    private readonly port: number,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  static async start(dir: string): Promise<ExternalRedis> {
    const redis = new ExternalRedis(dir, await freePort());
    await redis.startProcess();
    return redis;
  }

  async startProcess(): Promise<void> {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    this.proc = spawnTracked(
      'redis-server',
      [
        ...['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir],
        ...['--appendonly', 'yes', '--appendfsync', 'always', '--save', ''],
      ],
      { stdio: 'ignore' },
    );
    const up = await pollUntil(
      async () => {
        const client = new Redis(this.url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 1 });
        client.on('error', () => {});
        try {
          await client.connect();
          return (await client.ping()) === 'PONG' ? true : undefined;
        } finally {
          client.disconnect();
        }
      },
      10_000,
      50,
    );
    if (!up) throw new Error('redis-server did not start (apt-get install redis-server)');
  }

  /** SIGKILL, as a crash. */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc?.alive()) return;
    proc.child.kill('SIGKILL');
    await proc.exited;
  }

  /** Starts again on the same port: with the append-only file, or with none (empty). */
  async restart(keepData: boolean): Promise<void> {
    await this.kill();
    if (!keepData) rmSync(this.dir, { recursive: true, force: true });
    await this.startProcess();
  }
}
