import type { JobsOptions } from 'bullmq';
import { z } from 'zod';
import { SUBMIT_JOB_OPTIONS } from './submit-queue.js';

/**
 * The jobs the CLI puts on the daemon's queues itself, until it asks the daemon through its
 * local API instead: a `cancel` or `trigger` job of the pipeline queue, an `apply-suggestion`
 * job of the summarize queue, and the options of its own producers. The daemon's producers never
 * add these: delete this file with the CLI's queue adds (and the processors' small functions
 * that answer them, in workers/pipeline.ts and workers/summarize.ts).
 */

/** Job name of the summarize queue the CLI's `jobs resubmit --apply-suggestion` adds. */
export const APPLY_SUGGESTION_JOB = 'apply-suggestion';
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

/**
 * The CLI's producers' default job options (its own Queue objects): a submit as the daemon's
 * producer makes it; an apply-suggestion gets a few quick tries (the request id makes them
 * idempotent).
 */
export const JOB_OPTIONS: Record<'submit' | 'summarize', JobsOptions> = {
  submit: SUBMIT_JOB_OPTIONS,
  summarize: {
    attempts: 3,
    backoff: { type: 'exponential', delay: 1000 },
    removeOnComplete: { age: 24 * 3600, count: 1000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  },
};
