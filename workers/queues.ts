import type { DaemonConfig } from '../src/config/daemon-config.js';
import type { QueueName } from '../src/queue/catalog.js';
import type { QueueDefinition } from '../src/queue/queue-definition.js';
import type { SummarySettings } from '../src/summaries/summary-settings.js';
import { clusterQueue } from './cluster-samples.js';
import { notifyQueue } from './notify.js';
import { pipelineQueue } from './pipeline.js';
import { pollQueue } from './poll.js';
import { pruneQueue } from './prune.js';
import { reconcileQueue } from './reconcile.js';
import type { QueueSettings, WorkerServices } from './services.js';
import { submitQueue } from './submit.js';
import { summarizeQueue } from './summarize.js';

/**
 * Every queue of schedflow, one definition each (workers/<queue>.ts): the Queue producers, the
 * Workers and the ticks are made from these. A new queue is a file beside these, its name in
 * src/queue/catalog.ts (which the layers below the workers read), and its line here.
 */
export const QUEUES: { [N in QueueName]: QueueDefinition<QueueSettings, WorkerServices, N> } = {
  submit: submitQueue,
  poll: pollQueue,
  reconcile: reconcileQueue,
  pipeline: pipelineQueue,
  notify: notifyQueue,
  summarize: summarizeQueue,
  cluster: clusterQueue,
  prune: pruneQueue,
};

/** The settings the definitions read, from the daemon's and its profiles' `concurrency`. */
export function queueSettingsOf(
  config: DaemonConfig,
  summaries: SummarySettings,
  profileConcurrency: readonly number[],
): QueueSettings {
  const profileConnections = profileConcurrency.reduce((sum, n) => sum + n, 0);
  return { config, summaries, profileCount: profileConcurrency.length, profileConnections };
}
