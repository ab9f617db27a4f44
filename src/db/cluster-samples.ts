import { and, asc, eq, gte, lt } from 'drizzle-orm';
import type { History } from './history.js';
import type { ClusterSampleRow } from './schema.js';

/**
 * The history of each partition's CPUs (cluster_samples): written by the sampling tick
 * (workers/cluster-samples.ts) from the cluster view's shared answer, read by the Cluster page's
 * allocation chart, pruned past its window.
 */

export type ClusterSample = Omit<ClusterSampleRow, 'profile' | 'at'>;

/**
 * Records one answer's partitions at `at` (when the scheduler was read). A sample of the same
 * answer already written (another process's tick, or a tick that read a cached answer twice)
 * is left as it is.
 */
export async function recordClusterSamples(
  h: History,
  profile: string,
  at: number,
  samples: readonly ClusterSample[],
): Promise<number> {
  if (samples.length === 0) return 0;
  const t = h.t.clusterSamples;
  return h.run(
    h.db
      .insert(t)
      .values(samples.map((s) => ({ ...s, profile, at })))
      .onConflictDoNothing(),
  );
}

/** A profile's samples since `sinceMs`, oldest first. */
export async function clusterSamplesSince(h: History, profile: string, sinceMs: number): Promise<ClusterSampleRow[]> {
  const t = h.t.clusterSamples;
  return h.all(
    h.db
      .select()
      .from(t)
      .where(and(eq(t.profile, profile), gte(t.at, sinceMs)))
      .orderBy(asc(t.at), asc(t.partition)),
  );
}

/** Deletes every profile's samples older than `beforeMs`; returns how many. */
export async function pruneClusterSamples(h: History, beforeMs: number): Promise<number> {
  const t = h.t.clusterSamples;
  return h.run(h.db.delete(t).where(lt(t.at, beforeMs)));
}
