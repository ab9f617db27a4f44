import { Redis } from 'ioredis';
import { ConfigError } from '../errors.js';
import { answerWithin } from '../lib/with-timeout.js';
import type { Logger } from '../logger.js';
import { type RedisTarget, redisOptions } from './redis-server.js';

/** A process's registration lapses this long after its last heartbeat (it died, or Redis was away). */
export const CLAIM_TTL_MS = 30_000;
const HEARTBEAT_MS = 10_000;

/** Which history a process works on, and where, for the message of the one refused. */
export interface HistoryHolder {
  /** The history's own id (src/db/history-meta.ts). */
  id: string;
  host: string;
  /** The history file. */
  path: string;
  pid: number;
  roles: readonly string[];
}

/**
 * KEYS[1]: the sorted set of live processes, each a JSON member scored by when its registration
 * lapses (Redis's clock). ARGV: this process's member, its history id, the TTL. Drops lapsed
 * members; answers a live one of another history, else (re)registers this one and answers nil.
 */
const CLAIM_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local ok, holder = pcall(cjson.decode, member)
  if not ok or holder.id ~= ARGV[2] then return member end
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
return false
`;

interface ClaimCommands {
  schedflowClaimHistory(key: string, member: string, id: string, ttlMs: string): Promise<string | null>;
}

function describeHolder(holder: Partial<HistoryHolder>): string {
  const roles = holder.roles?.length ? `, roles ${holder.roles.join(',')}` : '';
  return `${holder.path ?? '?'} on ${holder.host ?? '?'} (pid ${holder.pid ?? '?'}${roles})`;
}

function refusal(prefix: string, self: HistoryHolder, member: string): ConfigError {
  let other: Partial<HistoryHolder> = {};
  try {
    other = JSON.parse(member) as Partial<HistoryHolder>;
  } catch {
    // Not ours to read: said as unknown.
  }
  return new ConfigError(
    `another history is in use under queue prefix "${prefix}" in this Redis: ${describeHolder(other)}, ` +
      `while this process's is ${self.path} on ${self.host}. Processes sharing a Redis and a queue prefix must share ` +
      'one history, or requests queued by one are never found by the other: start this one with the same data dir ' +
      '(--data-dir, SCHEDFLOW_DATA_DIR) on that host, or give it a SCHEDFLOW_QUEUE_PREFIX of its own. ' +
      `(A registration lapses ${CLAIM_TTL_MS / 1000} s after the last process of its history stops.)`,
  );
}

/**
 * This process's registration of its history under the queue prefix (`<prefix>:history`), so
 * that processes sharing one Redis and prefix but not one history (separate SQLite files)
 * refuse to start instead of losing each other's requests. Each process registers itself for
 * {@link CLAIM_TTL_MS} and renews it every 10 s while it runs; a stop withdraws it at once. So a
 * history holds the prefix exactly while a process of it is alive: a daemon whose data dir
 * moved starts as soon as the old one's processes have stopped (30 s after a crash).
 */
export class HistoryClaim {
  readonly #redis: Redis & ClaimCommands;
  readonly #key: string;
  readonly #member: string;
  readonly #timer: NodeJS.Timeout;
  #renewing = false;
  #saidConflict: string | null = null;

  private constructor(
    redis: Redis & ClaimCommands,
    private readonly prefix: string,
    private readonly self: HistoryHolder,
    private readonly logger: Logger,
  ) {
    this.#redis = redis;
    this.#key = `${prefix}:history`;
    this.#member = JSON.stringify(self);
    this.#timer = setInterval(() => void this.#renew(), HEARTBEAT_MS);
    this.#timer.unref();
  }

  /**
   * Registers the process, or throws a ConfigError naming the other history when one is in use
   * under the prefix. Waits for Redis as the queues do.
   */
  static async take(target: RedisTarget, prefix: string, self: HistoryHolder, logger: Logger): Promise<HistoryClaim> {
    const redis = new Redis(redisOptions(target)) as Redis & ClaimCommands;
    // An outage is said by the queues' watch; a renewal that fails is tried again.
    redis.on('error', () => {});
    redis.defineCommand('schedflowClaimHistory', { numberOfKeys: 1, lua: CLAIM_SCRIPT });
    const claim = new HistoryClaim(redis, prefix, self, logger);
    try {
      const other = await claim.#claim();
      if (other !== null) throw refusal(prefix, self, other);
    } catch (error) {
      await claim.release();
      throw error;
    }
    return claim;
  }

  #claim(): Promise<string | null> {
    return this.#redis.schedflowClaimHistory(this.#key, this.#member, this.self.id, String(CLAIM_TTL_MS));
  }

  async #renew(): Promise<void> {
    // A renewal waiting for Redis is not joined by another.
    if (this.#renewing) return;
    this.#renewing = true;
    try {
      const other = await this.#claim();
      // Only after this one's registration lapsed (Redis away longer than the TTL) can another
      // history have taken the prefix: both run now, and this one cannot tell which to stop.
      if (other !== null && other !== this.#saidConflict) {
        this.logger.error({ prefix: this.prefix }, refusal(this.prefix, this.self, other).message);
      }
      this.#saidConflict = other;
    } catch {
      // Redis away: the next renewal registers again.
    } finally {
      this.#renewing = false;
    }
  }

  /** Withdraws the registration (at most a second's wait for Redis) and closes the connection. */
  async release(): Promise<void> {
    clearInterval(this.#timer);
    await answerWithin(
      this.#redis.zrem(this.#key, this.#member).catch(() => 0),
      1000,
    );
    this.#redis.disconnect();
  }
}
