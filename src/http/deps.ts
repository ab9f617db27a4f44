import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { History } from '../db/history.js';
import type { AttemptPolicy, Deadlines } from '../db/schema.js';
import type { Logger } from '../logger.js';
import type { WebhookTargets } from '../notify/webhook-target.js';
import type { PipelineService } from '../pipelines/pipeline-service.js';
import type { QueueName } from '../queue/catalog.js';
import type { ArrayRetry } from '../requests/array-retry.js';
import type { ClientRegistry } from '../sched/client-registry.js';
import type { ClusterView } from '../sched/cluster-view.js';
import type { JobSpec } from '../sched/job-spec.js';
import type { Profile } from '../sched/profile.js';
import type { ResubmitInput } from '../summaries/resubmit.js';
import type { LocalCredential } from './api/local-credential.js';
import type { UiSettings } from './ui/ui-settings.js';

/** What the local API needs of the daemon; main.ts hands it the running parts. */
export interface ApiDeps {
  /** The history (SQLite or PostgreSQL). */
  store: History;
  logger: Logger;
  profiles: ReadonlyMap<string, Profile>;
  clients: ClientRegistry;
  /** The cluster's partitions, nodes, reservations and queue, cached for every viewer; absent: 503 on its routes. */
  clusterView?: ClusterView;
  queues: Record<QueueName, Queue>;
  /** Absent until the pipelines are loaded: pipeline routes answer 503 then. */
  pipelines?: PipelineService;
  /** Records a request and queues its submission (the daemon's `submit`); returns the request id. */
  submit(input: {
    profile?: string;
    spec: JobSpec;
    /** `cli`: asked by the CLI with its local credential. */
    origin: 'api' | 'cli';
    /** Whose it is, and who asks (src/access/principal.ts). */
    owner: string;
    actor: string;
    requestId?: string;
    webhookUrl?: string | null;
    deadlines?: Deadlines | null;
    /** A summary when it ends: true or false; absent follows the global setting. */
    summarize?: boolean | null;
    /** Its retry policy, checked against the spec. */
    retryPolicy?: AttemptPolicy | null;
    /** The HTTP request's id, for the audit log. */
    httpRequestId?: string | null;
    /** The profiles the asking token is bound to (null: any): src/access/quota.ts. */
    allowedProfiles?: readonly string[] | null;
  }): Promise<string>;
  /**
   * Applies a request's suggested change (the daemon's `resubmitWithSuggestion`): the new
   * request's id, the same on every call. NoSuggestionError when there is nothing to apply.
   */
  resubmit(input: ResubmitInput): Promise<string>;
  /** Runs tasks of an array request again (src/requests/array-retry.ts). NoTasksToRetryError when there is none. */
  retryTasks(retry: ArrayRetry): Promise<{ id: string; indexes: number[]; array: string }>;
  /** Resolves when Redis answers PING; rejects otherwise (readiness). */
  pingRedis(): Promise<void>;
  /**
   * Where the requests each token has made this minute are counted, for every web process of
   * the deployment: a connection that fails at once when Redis is away, and the queue prefix.
   * Absent (tests of the routes alone): counted in this process.
   */
  rateLimitCounts?: { redis: Redis; prefix: string };
  settings: ApiSettings;
  /** The CLI's credential of this start (src/http/api/local-credential.ts); absent: only the history's tokens. */
  localCredential?: LocalCredential;
  /** Which hosts a webhook URL may name (the daemon's allow-list). @defaultValue none inward */
  webhookTargets?: WebhookTargets;
  /** The admin web UI under /ui; absent: no UI (tests of the API alone). */
  ui?: UiSettings;
}

export interface ApiSettings {
  /** Requests per minute per token. @defaultValue 300 */
  rateLimitPerMin: number;
  /** Largest request body. @defaultValue 1 MiB */
  bodyLimitBytes: number;
  /** How long one answer of the cluster view serves every viewer. @defaultValue 30 s */
  clusterViewTtlMs?: number;
  /** How often the workers sample the partitions (and so refresh the view when nobody looks). @defaultValue 5 min */
  clusterSampleEveryMs?: number;
  /** The poller's longest interval: a profile not polled for twice this is stale. */
  pollCeilingMs: number;
  /** Job output files inside these folders (schedflow's data and configuration) are never read. @defaultValue [] */
  protectedDirs?: readonly string[];
  /** Bytes of a job's output file read from its end at most, whatever the lines asked for. @defaultValue 1 MiB */
  outputTailMaxBytes?: number;
}
