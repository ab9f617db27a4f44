import { readdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { HistoryReader, HistoryStats } from './history-stats.js';
import type { SoakWorld } from './world.js';

/** One reading of every resource figure; undefined where it could not be read (the daemon or Redis down at that moment). */
export interface Sample {
  at: number;
  rssBytes?: number;
  heapUsedBytes?: number;
  fds?: number;
  /** The longest event-loop block since the last reading (the daemon's own gauge). */
  loopBlockMs?: number;
  redisKeys?: number;
  redisUsedBytes?: number;
  historyRows?: number;
  historyBytes?: number;
  walBytes?: number;
  pgConnections?: number;
}

/** The figures judged for flatness, with the words the report uses. */
export const FIGURES = [
  'rssBytes',
  'heapUsedBytes',
  'fds',
  'loopBlockMs',
  'redisKeys',
  'redisUsedBytes',
  'historyRows',
  'historyBytes',
  'walBytes',
  'pgConnections',
] as const satisfies readonly (keyof Sample)[];
export type Figure = (typeof FIGURES)[number];

/** `VmRSS` of /proc/PID/status, in bytes. */
function rssOf(pid: number): number | undefined {
  const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) * 1024 : undefined;
}

/** A sample's value in the daemon's /metrics text (the first series that matches). */
function metric(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

const quietly = async <T>(read: () => Promise<T> | T): Promise<T | undefined> => {
  try {
    return await read();
  } catch {
    return undefined;
  }
};

/**
 * Reads the figures: the daemon's process from /proc (RSS, open descriptors) and its /metrics
 * (heap in use, the longest event-loop block since the last scrape), Redis (DBSIZE, INFO
 * memory), the history (rows and bytes through `stats`, the WAL file, PostgreSQL's
 * connections).
 */
export class Gauges {
  readonly #redis: Redis;

  constructor(
    private readonly world: SoakWorld,
    private readonly history: HistoryReader,
    private readonly stats: () => Promise<HistoryStats>,
  ) {
    this.#redis = new Redis(world.redis.url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 1000,
    });
    this.#redis.on('error', () => {});
  }

  async read(): Promise<Sample> {
    const sample: Sample = { at: Date.now() };
    const proc = this.world.daemon.proc;
    if (proc?.alive()) {
      sample.rssBytes = await quietly(() => rssOf(proc.pid));
      sample.fds = await quietly(() => readdirSync(`/proc/${proc.pid}/fd`).length);
      const text = await quietly(async () => {
        const res = await fetch(`${this.world.daemon.apiUrl}/metrics`, { signal: AbortSignal.timeout(5000) });
        return res.ok ? res.text() : undefined;
      });
      if (text) {
        sample.heapUsedBytes = metric(text, 'schedflow_process_memory_bytes{kind="heap_used"}');
        const block = metric(text, 'schedflow_event_loop_block_max_seconds');
        if (block !== undefined) sample.loopBlockMs = block * 1000;
      }
    }
    if (this.#redis.status === 'wait') await quietly(() => this.#redis.connect());
    sample.redisKeys = await quietly(() => this.#redis.dbsize());
    const info = await quietly(() => this.#redis.info('memory'));
    const used = info ? /^used_memory:(\d+)/m.exec(info) : null;
    if (used) sample.redisUsedBytes = Number(used[1]);
    const stats = await quietly(() => this.stats());
    if (stats) {
      sample.historyRows = stats.rows;
      sample.historyBytes = stats.bytes;
    }
    sample.walBytes = this.history.walBytes();
    sample.pgConnections = await quietly(() => this.history.connections());
    return sample;
  }

  /** Redis's keys by kind (ids and numbers made `*`), the most first: where growth of DBSIZE comes from. */
  async redisKeyKinds(top = 10): Promise<[string, number][]> {
    const kinds = new Map<string, number>();
    let cursor = '0';
    do {
      const [next, keys] = await this.#redis.scan(cursor, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) {
        const kind = key.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '<uuid>').replace(/\d+/g, '*');
        kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      }
    } while (cursor !== '0');
    return [...kinds].sort((a, b) => b[1] - a[1]).slice(0, top);
  }

  close(): void {
    this.#redis.disconnect();
  }
}
