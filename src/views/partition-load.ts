import type { JobRequestRow } from '../db/schema.js';
import type { Partition, Queue } from '../sched/cluster-model.js';
import type { ClusterAnswer } from '../sched/cluster-view.js';

/**
 * The load of the partition a pending request waits in, as the cluster view's last answer says
 * it (src/sched/cluster-view.ts `lastAnswer`): shown beside why it waits (API job detail,
 * `jobs show`, the UI's job page). Null when the view does not know it: no answer kept (nobody
 * viewed the cluster lately), or no partition of that name in it.
 */
export interface PartitionLoad {
  name: string;
  state: string;
  cpus_allocated: number;
  cpus_idle: number;
  cpus_total: number;
  jobs_running: number;
  jobs_pending: number;
  /** When the answer it is read from was produced upstream. */
  as_of: string;
}

/**
 * The partition the request's job waits in: the controller's listing of the job, which knows
 * the default partition and any update; else the one it was moved to (`on_pending`), else its
 * spec's. Slurm lists a job submitted to several partitions as `a,b`: the first is taken.
 */
export function waitingPartition(
  row: Pick<JobRequestRow, 'jobId' | 'spec' | 'pendingMove'>,
  queue: Queue | null,
): string | null {
  const listed =
    row.jobId === null || !queue
      ? undefined
      : queue.jobs.find((j) => j.job_id === row.jobId || (j.array_job_id === row.jobId && j.state === 'PENDING'));
  const named =
    listed?.partition || row.pendingMove?.partition || (row.spec as { partition?: unknown } | null)?.partition || null;
  if (typeof named !== 'string') return null;
  return named.split(',')[0]?.trim() || null;
}

export function partitionLoad(
  row: Pick<JobRequestRow, 'state' | 'jobId' | 'spec' | 'pendingMove'>,
  partitions: ClusterAnswer<Partition[]> | null,
  queue: ClusterAnswer<Queue> | null,
): PartitionLoad | null {
  if (row.state !== 'pending' || !partitions) return null;
  const name = waitingPartition(row, queue?.data ?? null);
  const p = name === null ? undefined : partitions.data.find((x) => x.name === name);
  if (!p) return null;
  return {
    name: p.name,
    state: p.state,
    cpus_allocated: p.cpus.allocated,
    cpus_idle: p.cpus.idle,
    cpus_total: p.cpus.total,
    jobs_running: p.jobs.running,
    jobs_pending: p.jobs.pending,
    as_of: partitions.fetchedAt.toISOString(),
  };
}

const count = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

/**
 * The load in words, as `jobs show` and the UI's job page say it (each adds its `as of`):
 * `debug: 2/2 CPUs allocated, 1 job running, 3 jobs pending`; a partition not UP says its state.
 */
export function partitionLoadWords(load: PartitionLoad): string {
  return `${load.name}${load.state === 'UP' ? '' : ` (${load.state})`}: ${load.cpus_allocated}/${load.cpus_total} CPUs allocated, ${count(load.jobs_running, 'job')} running, ${count(load.jobs_pending, 'job')} pending`;
}
