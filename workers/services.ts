import type { Queue } from 'bullmq';
import type { DaemonConfig } from '../src/config/daemon-config.js';
import type { History } from '../src/db/history.js';
import type { RetentionSettings } from '../src/db/retention.js';
import type { Clock } from '../src/lib/clock.js';
import type { HeapCollector } from '../src/lib/heap-collector.js';
import type { Logger } from '../src/logger.js';
import type { WebhookSender } from '../src/notify/sender.js';
import type { PipelineRegistry } from '../src/pipelines/pipeline-registry.js';
import type { RunEngineDeps } from '../src/pipelines/run-engine.js';
import type { QueueName } from '../src/queue/catalog.js';
import type { AcceptDeps } from '../src/requests/accept.js';
import type { ClientRegistry } from '../src/sched/client-registry.js';
import type { ClusterView } from '../src/sched/cluster-view.js';
import type { Summarizer } from '../src/summaries/summarizer.js';
import type { SummarySettings } from '../src/summaries/summary-settings.js';
import type { SummaryTakeUp } from '../src/summaries/summary-take-up.js';

/** What the queues' definitions read to make their job and worker options. */
export interface QueueSettings {
  config: Pick<
    DaemonConfig,
    | 'submitConcurrency'
    | 'lockDurationMs'
    | 'notifyAttempts'
    | 'notifyBackoffMs'
    | 'notifyEveryMs'
    | 'pollFloorMs'
    | 'reconcileEveryMs'
    | 'pipelineTickMs'
    | 'clusterSampleEveryMs'
    | 'pruneEveryMs'
  >;
  summaries: Pick<SummarySettings, 'attempts' | 'backoffMs' | 'concurrency' | 'dispatchEveryMs'>;
  /** One poll at a time per profile. */
  profileCount: number;
  /** The profiles' `concurrency` added up: the submit worker's default concurrency follows it. */
  profileConnections: number;
}

/** What every processor may use; built once by the worker start-up (workers/start-workers.ts). */
export interface WorkerServices {
  store: History;
  clients: ClientRegistry;
  /** The daemon's clock (src/lib/clock.ts): what the processors read the time from. */
  clock: Clock;
  /** The worker's log (`component: worker`). */
  logger: Logger;
  /** The daemon's root log, for the queues whose component is their own (notify, pipelines). */
  rootLogger: Logger;
  /** The daemon's producers: the relays add to them. */
  queues: Record<QueueName, Queue>;
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
  /** The cluster's shared view (Redis-cached answers): the sampling tick reads its partitions. */
  clusterView?: Pick<ClusterView, 'view'>;
  settings: {
    pollFloorMs: number;
    pollCeilingMs: number;
    lostGraceMs: number;
    /** SCHEDFLOW_LOST_RESUBMITS (src/requests/lost-resubmit.ts). */
    lostResubmits: number;
    /** How often a pending job's reason and expected start are read (src/requests/pending-details.ts); 0: never. */
    pendingDetailsEveryMs?: number;
    /** How often the first request held by a submit limit asks Slurm again. */
    submitLimitRecheckMs: number;
    /** How long partition samples are kept in the history. */
    clusterSampleKeepMs: number;
    /** How long the history keeps its detail (src/db/retention.ts); absent: nothing is pruned. */
    retention?: RetentionSettings;
  };
  webhooks: WebhookSender;
  summaries: { summarizer: Summarizer; takeUp: SummaryTakeUp; logger: Logger };
  pipelines: PipelineRegistry;
  engine: RunEngineDeps;
  /** Where re-submissions are accepted (src/requests/accept.ts). */
  requests: AcceptDeps;
  /** The scheduler's reason for a pending job, for deadline reports. */
  jobReason?(profile: string, jobId: number): Promise<string | null>;
}
