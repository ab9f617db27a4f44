import { Redis } from 'ioredis';
import type { Profile } from '../sched/profile.js';
import { MIN_RATE_PER_SEC, RECOVERY_SHARE_PER_SEC } from '../sched/request-budget.js';
import { type SharedBucket, type SharedBucketAnswer, SharedRequestBudget } from '../sched/shared-request-budget.js';
import { type RedisTarget, redisOptions } from './redis-server.js';

/**
 * A request waits at most this long for the bucket's answer: Redis answers in well under a
 * millisecond, so longer is an outage or a stalled server, and the request fails (retryably)
 * instead of waiting for it.
 */
const BUDGET_ANSWER_MS = 2000;
/** An untouched profile's bucket is dropped after a day: by then it would be full anyway. */
const BUCKET_TTL_MS = 86_400_000;

/**
 * One profile's bucket, atomically: refill by the time elapsed since the last call, then take a
 * token or say how long until one (op `take`), only say (`peek`), or record a 429 (`limited`).
 * The clock is Redis's own (`TIME`), so the hosts' clocks need not agree. The pace after 429s
 * follows RequestBudget's (src/sched/request-budget.ts): halved per overrun, never below the
 * minimum, grown back by a share of the refused pace a second up to it, then of the configured.
 *
 * KEYS[1] the bucket (a hash). ARGV: op, capacity, refill a second, Retry-After ms ('' for
 * none), minimum rate, recovery share, now in ms ('' for Redis's clock: tests pass theirs),
 * TTL ms, tokens wanted (a take: as many as there are, up to it). Answers: wait ms, pace (a
 * string: Lua numbers become integers), limited (0/1), held ms, tokens taken.
 */
const BUCKET_SCRIPT = `
local key = KEYS[1]
local op = ARGV[1]
local capacity = tonumber(ARGV[2])
local rate = tonumber(ARGV[3])
local retry_after = tonumber(ARGV[4])
local min_rate = tonumber(ARGV[5])
local share = tonumber(ARGV[6])
local now = tonumber(ARGV[7])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local ttl = tonumber(ARGV[8])
local want = tonumber(ARGV[9]) or 1

local s = redis.call('HMGET', key, 'tokens', 'at', 'held', 'lrate', 'lrefused', 'lsince')
local tokens = tonumber(s[1]) or capacity
local at = tonumber(s[2]) or now
local held = tonumber(s[3]) or 0
local lrate, lrefused, lsince = tonumber(s[4]), tonumber(s[5]), tonumber(s[6])

local function current_rate(t)
  if not lrate then return rate end
  local grown = math.max(0, t - lsince) / 1000
  local toward = (lrefused - lrate) / (share * lrefused)
  if grown <= toward then return lrate + grown * share * lrefused end
  return math.min(rate, lrefused + (grown - toward) * share * rate)
end

-- Back at the configured pace once the hold is over: the full bucket again.
if lrate and now >= held and current_rate(now) >= rate then
  lrate, lrefused, lsince = nil, nil, nil
end
local pace = current_rate(now)
-- One at a time while limited: a burst of the capacity would be refused again.
local cap = capacity
if lrate then cap = 1 end
tokens = math.min(cap, tokens + math.max(0, now - at) / 1000 * pace)
at = now

local wait = 0
local taken = 0
if op == 'limited' then
  local hold = math.max(retry_after or 1000, 100)
  -- 429s to requests already in flight when the first came are the same overrun.
  if now >= held then
    local p = math.max(min_rate, pace / 2)
    lrate, lrefused, lsince = p, math.max(pace, p), now + hold
    pace = p
  end
  tokens = 0
  held = math.max(held, now + hold)
  wait = held - now
elseif now < held then
  wait = held - now
elseif op == 'take' then
  if tokens >= 1 then
    taken = math.min(want, math.floor(tokens))
    tokens = tokens - taken
  end
  -- Fewer than asked for: when the next one may be taken, saving the caller a round trip.
  if taken < want then
    wait = (1 - tokens) / pace * 1000
  end
end

redis.call('HSET', key, 'tokens', tostring(tokens), 'at', tostring(at), 'held', tostring(held))
if lrate then
  redis.call('HSET', key, 'lrate', tostring(lrate), 'lrefused', tostring(lrefused), 'lsince', tostring(lsince))
else
  redis.call('HDEL', key, 'lrate', 'lrefused', 'lsince')
end
redis.call('PEXPIRE', key, ttl)
local limited = 0
if lrate then limited = 1 end
return { math.ceil(wait), tostring(pace), limited, math.ceil(math.max(0, held - now)), taken }
`;

type BucketOp = 'take' | 'peek' | 'limited';

interface BucketCommands {
  schedflowBudget(key: string, ...args: string[]): Promise<[number, string, number, number, number]>;
}

/**
 * The request budgets of every profile, kept in Redis under the daemon's queue prefix
 * (`<prefix>:budget:<profile>`): every process of a deployment (its workers, its web role, on
 * any host) takes its tokens from the same bucket, so together they stay under the proxy's
 * limit. A connection of its own, whose commands give up after {@link BUDGET_ANSWER_MS}.
 */
export class SharedBudgets {
  readonly #redis: Redis & BucketCommands;

  constructor(
    target: RedisTarget,
    private readonly prefix: string,
  ) {
    const redis = new Redis({
      ...redisOptions(target),
      // Unlike BullMQ's connections: a request must not wait for Redis without end.
      maxRetriesPerRequest: 1,
      commandTimeout: BUDGET_ANSWER_MS,
    });
    // Outages are said by the queues' watch (src/redis/redis-watch.ts); each request says its own.
    redis.on('error', () => {});
    redis.defineCommand('schedflowBudget', { numberOfKeys: 1, lua: BUCKET_SCRIPT });
    this.#redis = redis as Redis & BucketCommands;
  }

  /** The key of a profile's bucket. */
  keyOf(profileName: string): string {
    return `${this.prefix}:budget:${profileName}`;
  }

  /**
   * A profile's bucket. `nowMs` replaces Redis's clock, for tests of the arithmetic only.
   */
  bucket(profile: Pick<Profile, 'name' | 'rateLimit'>): SharedBucket & {
    at(op: BucketOp, nowMs: number, retryAfterMs?: number | null, want?: number): Promise<SharedBucketAnswer>;
  } {
    const call = async (
      op: BucketOp,
      nowMs?: number,
      retryAfterMs?: number | null,
      want = 1,
    ): Promise<SharedBucketAnswer> => {
      const [waitMs, rate, limited, heldMs, taken] = await this.#redis.schedflowBudget(
        this.keyOf(profile.name),
        op,
        String(profile.rateLimit.capacity),
        String(profile.rateLimit.refillPerSecond),
        retryAfterMs === null || retryAfterMs === undefined ? '' : String(retryAfterMs),
        String(MIN_RATE_PER_SEC),
        String(RECOVERY_SHARE_PER_SEC),
        nowMs === undefined ? '' : String(nowMs),
        String(BUCKET_TTL_MS),
        String(want),
      );
      return { waitMs, ratePerSec: Number(rate), limited: limited === 1, heldMs, taken };
    };
    return {
      take: (want) => call('take', undefined, undefined, want),
      peek: () => call('peek'),
      rateLimited: (retryAfterMs) => call('limited', undefined, retryAfterMs),
      at: (op, nowMs, retryAfterMs, want) => call(op, nowMs, retryAfterMs, want),
    };
  }

  /** The budget a profile's client takes from. */
  budgetFor(profile: Profile): SharedRequestBudget {
    return new SharedRequestBudget(this.bucket(profile), profile.rateLimit.refillPerSecond);
  }

  close(): void {
    this.#redis.disconnect();
  }
}
