/**
 * The names of schedflow's queues: what the layers below the workers (the local API and UI, the
 * queue keeper) need to know of them. Each queue is defined once, in workers/<queue>.ts
 * (src/queue/queue-definition.ts); workers/queues.ts holds one definition per name here, so a
 * name without a definition, or the reverse, does not build.
 */
export const QUEUE_NAMES = [
  'submit',
  'poll',
  'reconcile',
  'pipeline',
  'notify',
  'summarize',
  'cluster',
  'prune',
] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

/** Prefix of every Redis key schedflow's queues use (tests give each run its own). */
export const DEFAULT_QUEUE_PREFIX = 'schedflow';

// The CLI's own queue jobs, until it goes through the local API (deleted with it).
export { type SubmitPayload, submitPayloadSchema } from './submit-queue.js';
