import { type Clock, systemClock } from '../lib/clock.js';
import type { Logger } from '../logger.js';
import type { SchedClient } from '../sched/client.js';
import type { Profile } from '../sched/profile.js';
import type { PartitionLimits } from './attempt-policy.js';

/**
 * What a partition allows a retry to grow to: its MaxTime and MaxMemPerNode as the controller
 * says (`GET /sched/{v}/partition/{name}`, which the proxy serves under `sched:read`; plain
 * slurmrestd's `/slurm/{v}/partition/{name}`), and as the profile declares (`partitionLimits`),
 * the lower of the two where both are known. Read at most every ten minutes a partition: limits
 * change with slurm.conf, rarely. A read that fails leaves the declared limits alone in force.
 */
export class PartitionLimitsReader {
  private readonly cache = new Map<string, { at: number; limits: PartitionLimits | null }>();

  constructor(
    private readonly deps: {
      profiles: ReadonlyMap<string, Profile>;
      clients: { get(profile: string): SchedClient };
      /** When cached limits are old. @defaultValue systemClock */
      clock?: Clock;
      logger: Logger;
      /** @defaultValue 600000 */
      ttlMs?: number;
    },
  ) {}

  /** The limits of `partition` (null: the profile's default partition, if it names one). */
  async limitsOf(profile: string, partition: string | null): Promise<PartitionLimits> {
    const settings = this.deps.profiles.get(profile);
    const name = partition ?? settings?.partition ?? null;
    if (name === null) return {};
    const declared = settings?.partitionLimits[name];
    const read = await this.read(profile, name);
    return {
      maxTimeMin: lower(declared?.maxTime, read?.maxTimeMin),
      maxMemoryPerNodeMb: lower(declared?.maxMemoryPerNode, read?.maxMemoryPerNodeMb),
    };
  }

  private async read(profile: string, partition: string): Promise<PartitionLimits | null> {
    const key = `${profile}\u0000${partition}`;
    const cached = this.cache.get(key);
    const now = (this.deps.clock ?? systemClock).now();
    if (cached && now - cached.at < (this.deps.ttlMs ?? 600_000)) return cached.limits;
    let limits: PartitionLimits | null = null;
    try {
      limits = (await this.deps.clients.get(profile).getPartitionLimits(partition)).data;
    } catch (error) {
      this.deps.logger.warn(
        { profile, partition, err: error },
        "could not read the partition's limits; the profile's partitionLimits alone bound retries",
      );
    }
    this.cache.set(key, { at: now, limits });
    return limits;
  }
}

function lower(a: number | null | undefined, b: number | null | undefined): number | null {
  const known = [a, b].filter((n): n is number => typeof n === 'number' && Number.isFinite(n));
  return known.length ? Math.min(...known) : null;
}
