import type { JobRequestRow } from '../db/schema.js';
import type { ClusterView } from '../sched/cluster-view.js';
import { type PartitionLoad, partitionLoad } from '../views/partition-load.js';

/**
 * A pending request's partition load for its job page (API detail, UI): from the cluster view's
 * last kept answers only, never a read of the scheduler (a page per job per viewer must cost the
 * upstream nothing). Null when the request is not pending, the process serves no cluster view,
 * or the view has no recent answer for the request's profile.
 */
export async function pendingPartitionLoad(
  clusterView: ClusterView | undefined,
  row: Pick<JobRequestRow, 'state' | 'profile' | 'jobId' | 'spec' | 'pendingMove'>,
): Promise<PartitionLoad | null> {
  if (row.state !== 'pending' || !clusterView) return null;
  const [partitions, queue] = await Promise.all([
    clusterView.lastAnswer(row.profile, 'partitions'),
    clusterView.lastAnswer(row.profile, 'queue'),
  ]);
  return partitionLoad(row, partitions, queue);
}
