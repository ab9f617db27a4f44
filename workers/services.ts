import type { History } from '../src/db/history.js';
import type { HeapCollector } from '../src/lib/heap-collector.js';
import type { Logger } from '../src/logger.js';
import type { ClientRegistry } from '../src/sched/client-registry.js';

/** What every processor may use; built once by the composition root. */
export interface WorkerServices {
  store: History;
  clients: ClientRegistry;
  logger: Logger;
  /** Aborted when shutdown's grace period is over: running work stops and is handed back. */
  shutdown: AbortSignal;
  /**
   * Requests an attempt of this process is submitting right now (the submit worker keeps it):
   * the keeper's re-queue leaves them alone even when their job is gone from Redis.
   */
  submitsInFlight?: Set<string>;
  /** The daemon's heap collector: polls tell it when they wrote a mass start or end. */
  heap?: Pick<HeapCollector, 'afterBurst'>;
  /** Told when a profile's scheduler answers again after failed or stale polls. */
  onUpstreamBack?(profile: string): Promise<void>;
  settings: {
    pollFloorMs: number;
    pollCeilingMs: number;
    lostGraceMs: number;
    /** How often the first request held by a submit limit asks Slurm again. */
    submitLimitRecheckMs: number;
  };
}
