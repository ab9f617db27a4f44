import { type ClusterSample, pruneClusterSamples, recordClusterSamples } from '../src/db/cluster-samples.js';
import { SchedflowError } from '../src/errors.js';
import type { QueueDefinition, QueueProcessor } from '../src/queue/queue-definition.js';
import { TICK_ONCE } from '../src/queue/ticks.js';
import type { Partition } from '../src/sched/cluster-model.js';
import { ClusterViewUnavailableError } from '../src/sched/cluster-view.js';
import { profilePayloadSchema } from './profile-payload.js';
import type { QueueSettings, WorkerServices } from './services.js';

/** What one tick did: how many partitions it recorded (0 when the answer was sampled before) and pruned. */
export type ClusterSampleReport =
  | { recorded: number; pruned: number; at: number }
  | 'waiting'
  | { unavailable: string };

/**
 * The `cluster` queue: a job scheduler per profile samples its partitions' CPUs (allocated, idle,
 * other) every `clusterSampleEveryMs` into the history, for the Cluster page's allocation over
 * the last hours, and prunes samples past `clusterSampleKeepMs`. The sample is taken from the
 * cluster view (src/sched/cluster-view.ts), the answer every viewer shares: a tick reads the
 * scheduler only when that answer has expired, once for the deployment. Not retried: the next
 * tick samples again.
 */
export const clusterQueue: QueueDefinition<QueueSettings, WorkerServices, 'cluster'> = {
  name: 'cluster',
  jobOptions: () => TICK_ONCE,
  workerOptions: () => ({ concurrency: 1 }),
  // A sample cut short is not handed back: the next tick samples again.
  handedBackDelayMs: 0,
  ticks: ({ config }, profiles) =>
    profiles.map((profile) => ({
      id: `cluster-sample:${profile}`,
      repeat: { every: config.clusterSampleEveryMs },
      template: { name: 'sample', data: { profile } },
    })),
  processor: (services) => sampleProcessor(services),
};

/** A partition's figures as the history keeps them. */
export function sampleOf(p: Partition): ClusterSample {
  return {
    partition: p.name,
    cpusTotal: p.cpus.total,
    cpusAllocated: p.cpus.allocated,
    cpusIdle: p.cpus.idle,
    cpusOther: p.cpus.other,
    jobsRunning: p.jobs.running,
    jobsPending: p.jobs.pending,
  };
}

function sampleProcessor(services: WorkerServices): QueueProcessor {
  return async (job): Promise<ClusterSampleReport> => {
    const { profile } = profilePayloadSchema.parse(job.data);
    const view = services.clusterView;
    if (!view || !services.clients.connected(profile)) return 'waiting';
    const now = services.clock.now();
    const pruned = await pruneClusterSamples(services.store, now - services.settings.clusterSampleKeepMs);
    let answer: Awaited<ReturnType<typeof view.view<'partitions'>>>;
    try {
      answer = await view.view(profile, 'partitions');
    } catch (error) {
      // The view could not be read and has no earlier answer: a gap in the chart, said once per tick.
      if (!(error instanceof SchedflowError)) throw error;
      // Its read held back by the request budget in Redis: part of the Redis outage, said once.
      const outage =
        error instanceof ClusterViewUnavailableError && error.upstreamCode === 'SCHEDFLOW_ERR_SCHED_BUDGET_UNAVAILABLE';
      services.logger[outage ? 'debug' : 'warn'](
        { profile, code: error.code, err: error.message },
        'cluster sample skipped',
      );
      return { unavailable: error.message };
    }
    // A stale answer (the scheduler unreachable) is an old sample: its time is already recorded.
    const at = answer.fetchedAt.getTime();
    const recorded = await recordClusterSamples(services.store, profile, at, answer.data.map(sampleOf));
    return { recorded, pruned, at };
  };
}
