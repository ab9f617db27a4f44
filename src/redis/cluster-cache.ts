import type { Redis } from 'ioredis';
import type { ClusterCache } from '../sched/cluster-view.js';

/** Deletes the lock only while `token` holds it: a read that outlived its lock frees no other's. */
const UNLOCK_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/**
 * The cluster view's last answers and read locks in Redis (src/sched/cluster-view.ts), shared
 * by every process of the deployment that uses the same Redis and queue prefix.
 */
export class RedisClusterCache implements ClusterCache {
  constructor(private readonly redis: Redis) {}

  get(key: string): Promise<string | null> {
    return this.redis.get(key);
  }

  async set(key: string, value: string, keepMs: number): Promise<void> {
    await this.redis.set(key, value, 'PX', keepMs);
  }

  async tryLock(key: string, token: string, ms: number): Promise<boolean> {
    return (await this.redis.set(key, token, 'PX', ms, 'NX')) === 'OK';
  }

  async unlock(key: string, token: string): Promise<void> {
    await this.redis.eval(UNLOCK_SCRIPT, 1, key, token);
  }
}
