import { type ConnectionOptions, Queue } from 'bullmq';
import { JOB_OPTIONS, QUEUE_NAMES, type QueueName } from './catalog.js';

/** One producer per queue of the catalog, each with its retry policy as default job options. */
export function createQueues(connection: ConnectionOptions, prefix: string): Record<QueueName, Queue> {
  return Object.fromEntries(
    QUEUE_NAMES.map((name) => [name, new Queue(name, { connection, prefix, defaultJobOptions: JOB_OPTIONS[name] })]),
  ) as Record<QueueName, Queue>;
}
