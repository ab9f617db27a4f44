import type { JobsOptions } from 'bullmq';
import { z } from 'zod';
import { WEBHOOK_BACKOFF_TYPE } from '../notify/retry-policy.js';
import { jobSpecSchema } from '../sched/job-spec.js';

/**
 * The queues and what their jobs carry, as data: name → payload schema and
 * retry policy. Producers and workers both parse payloads with these schemas.
 */
export const QUEUE_NAMES = ['submit', 'poll', 'reconcile', 'pipeline', 'notify', 'summarize'] as const;
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
      /** A summary when it ends (`--summarize`, `--no-summarize`); absent: the global setting. */
      summarize: z.boolean().optional(),
      /** The array request whose tasks this one runs again (`schedflow jobs retry-tasks`). */
      arrayRetryOf: z.string().min(1).optional(),
      /**
       * The job file's `retry:` as written, checked by the CLI: the submit worker parses it with
       * src/requests/attempt-policy.ts (a layer above the queues).
       */
      retry: z.record(z.string(), z.unknown()).optional(),
    })
    .optional(),
});
export type SubmitPayload = z.input<typeof submitPayloadSchema>;

/** Job names of the summarize queue. */
export const SUMMARIZE_JOB = 'summarize';
export const SUMMARY_DISPATCH_JOB = 'dispatch';
export const APPLY_SUGGESTION_JOB = 'apply-suggestion';
/** The backoff type of summarize jobs (registered by the summarize worker). */
export const SUMMARY_BACKOFF_TYPE = 'summary';

export const profilePayloadSchema = z.object({ profile: z.string().min(1) });

/** A `deliver` job of the notify queue: one webhook delivery of the outbox (its id is also the job id). */
export const notifyPayloadSchema = z.object({ deliveryId: z.string().min(1) });

/** A `summarize` job: write one summary (its id is also the job id). */
export const summarizePayloadSchema = z.object({ summaryId: z.string().min(1) });
/** An `apply-suggestion` job: re-submit a request with its summary's suggested change, as `newRequestId`. */
export const applySuggestionPayloadSchema = z.object({
  requestId: z.string().min(1),
  newRequestId: z.string().min(1),
});
export type ApplySuggestionPayload = z.input<typeof applySuggestionPayloadSchema>;

/** A `cancel` job of the pipeline queue: a cancel asked for by the CLI, done by the daemon (it holds the scheduler clients). */
export const CANCEL_JOB = 'cancel';
export const cancelPayloadSchema = z.object({
  /** `job`: a job request (`schedflow jobs cancel`); `run`: a pipeline run (`schedflow runs cancel`). */
  of: z.enum(['job', 'run']),
  id: z.string().min(1),
  /** Who asked, for the history and the log. */
  who: z.string().min(1),
});
export type CancelPayload = z.input<typeof cancelPayloadSchema>;
/**
 * A `trigger` job of the pipeline queue: a run asked for by the CLI (`schedflow runs trigger`),
 * made by the daemon through the same service as the API's and the UI's (it holds the loaded
 * pipelines and the profiles' doors).
 */
export const TRIGGER_JOB = 'trigger';
export const triggerPayloadSchema = z.object({
  pipeline: z.string().min(1),
  params: z.record(z.string(), z.string()).default({}),
  /** Who asked, for the log. */
  who: z.string().min(1),
});
export type TriggerPayload = z.input<typeof triggerPayloadSchema>;

/** One try for the jobs the CLI asks of the daemon (`cancel`, `trigger`): it waits for the answer and says what to do if there is none. */
export const CLI_ASK_JOB_OPTIONS: JobsOptions = {
  attempts: 1,
  removeOnComplete: { age: 3600 },
  removeOnFail: { age: 3600 },
};

/**
 * The answer of a `cancel` job, as the CLI prints it: the outcome, or the error with its code
 * (a scheduler that refused or could not be reached), never a thrown error the CLI would have to
 * dig out of BullMQ's failure text.
 */
type CancelError = { kind: 'error'; code: string | null; retryable: boolean; message: string };
export type JobCancelAnswer = { of: 'job' } & (
  | {
      kind: 'cancelled' | 'requested' | 'ended' | 'not_found';
      state?: string;
      jobId?: number | null;
      upstream?: string | null;
    }
  | { kind: 'submitting'; state: string; retryAfterSec: number }
  | CancelError
);
export type RunCancelAnswer = { of: 'run' } & (
  | {
      kind: 'cancelled' | 'cancelling' | 'ended' | 'not_found';
      state?: string;
      detail?: string | null;
      already?: boolean;
      steps?: { step: string; requestId: string; outcome: string; detail: string | null }[];
    }
  | CancelError
);
export type CancelJobAnswer = JobCancelAnswer | RunCancelAnswer;
/** The answer of a `trigger` job: the run made (or recorded skipped), or why none was. */
export type RunTriggerAnswer =
  | { kind: 'made'; run: { id: string; pipeline: string; state: string; detail: string | null } }
  | CancelError;

export const PAYLOADS = {
  submit: submitPayloadSchema,
  poll: profilePayloadSchema,
  reconcile: profilePayloadSchema,
  // `fire`, `tick`, `cancel` and `trigger` jobs: parsed by the pipeline worker (workers/pipeline.ts).
  pipeline: z.object({}).loose(),
  // `deliver` jobs; the `dispatch` tick carries nothing.
  notify: notifyPayloadSchema,
  // `summarize` and `apply-suggestion` jobs (parsed by workers/summarize.ts); the `dispatch` tick carries nothing.
  summarize: z.union([summarizePayloadSchema, applySuggestionPayloadSchema, z.object({})]),
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
  // Webhook deliveries: exponential from 2 s with jitter, never sooner than the receiver's
  // Retry-After (the `webhook` backoff type, registered by the notify worker). The attempts
  // here are a fallback: the dispatcher gives each delivery SCHEDFLOW_NOTIFY_ATTEMPTS (12 by
  // default, about an hour of receiver trouble). Failed jobs are kept a week.
  notify: {
    attempts: 8,
    backoff: { type: WEBHOOK_BACKOFF_TYPE, delay: 2000 },
    removeOnComplete: { age: 24 * 3600, count: 1000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  },
  // A summarize job carries its own attempts and backoff, from the summary settings (the
  // `summary` backoff type honours the LLM's Retry-After; src/summaries/summary-dispatcher.ts). These
  // apply to apply-suggestion jobs: a few quick tries, the request id makes them idempotent.
  summarize: {
    attempts: 3,
    backoff: { type: 'exponential', delay: 1000 },
    removeOnComplete: { age: 24 * 3600, count: 1000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  },
};

/** Prefix of every Redis key schedflow's queues use (tests give each run its own). */
export const DEFAULT_QUEUE_PREFIX = 'schedflow';
