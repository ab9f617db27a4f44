import type { JobsOptions } from 'bullmq';
import { z } from 'zod';
import { jobSpecSchema } from '../sched/job-spec.js';

/**
 * The queues and what their jobs carry, as data: name → payload schema and
 * retry policy. Producers and workers both parse payloads with these schemas.
 */
export const QUEUE_NAMES = ['submit', 'poll', 'reconcile', 'pipeline'] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

export const submitPayloadSchema = z.object({
  requestId: z.string().min(1),
  /** Present when the producer could not write the history itself (the CLI): the worker records it. */
  request: z
    .object({
      profile: z.string().min(1),
      spec: jobSpecSchema,
      origin: z.enum(['api', 'cli', 'pipeline']),
      acceptedAt: z.number(),
    })
    .optional(),
});
export type SubmitPayload = z.input<typeof submitPayloadSchema>;

export const profilePayloadSchema = z.object({ profile: z.string().min(1) });

export const PAYLOADS = {
  submit: submitPayloadSchema,
  poll: profilePayloadSchema,
  reconcile: profilePayloadSchema,
  // `fire` and `tick` jobs: parsed by the pipeline worker (workers/pipeline.ts).
  pipeline: z.object({}).loose(),
} as const satisfies Record<QueueName, z.ZodType>;

/** Retry policy per queue. Submits retry for about an hour of upstream trouble; periodic work does not retry (the next tick does). */
export const JOB_OPTIONS: Record<QueueName, JobsOptions> = {
  submit: {
    attempts: 12,
    backoff: { type: 'exponential', delay: 2000, jitter: 0.5 },
    removeOnComplete: { age: 24 * 3600, count: 1000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  },
  poll: { attempts: 1, removeOnComplete: true, removeOnFail: { count: 100 } },
  reconcile: { attempts: 1, removeOnComplete: true, removeOnFail: { count: 100 } },
  // A tick that fails is retried briefly; the next tick redoes periodic work anyway.
  pipeline: {
    attempts: 3,
    backoff: { type: 'exponential', delay: 1000 },
    removeOnComplete: true,
    removeOnFail: { count: 100 },
  },
};

/** Prefix of every Redis key schedflow's queues use (tests give each run its own). */
export const DEFAULT_QUEUE_PREFIX = 'schedflow';
