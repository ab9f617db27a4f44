import type { DeadlineMissRow, JobRequestRow, PipelineRunRow, WebhookEvent } from './schema.js';

/**
 * What each webhook event carries. Every body is wrapped in the same envelope
 * (`event`, `id`, `occurred_at`) by `addDelivery`; the id is the delivery's,
 * the one receivers dedupe on (also sent as `Schedflow-Delivery`).
 *
 * Bodies hold outcomes only: never a job spec, its script or environment,
 * tokens or anything else a receiver should not see. Times are ISO 8601 (UTC)
 * or null; Slurm's own words are kept for Slurm things (`job_id`, `exit_code`).
 */

/** A request's outcome, as sent with `job.finished`. */
export interface JobOutcome {
  id: string;
  name: string;
  profile: string;
  state: JobRequestRow['state'];
  job_id: number | null;
  exit_code: number | null;
  signal: number | null;
  reason: string | null;
  raw_state: string | null;
  submitted_at: string | null;
  started_at: string | null;
  ended_at: string | null;
  /** Set for a pipeline step: its run, step name and attempt. */
  run_id: string | null;
  step: string | null;
  attempt: number;
  /** A retried request's first attempt (its id as first submitted); null on the first. */
  first_attempt_id: string | null;
  /** Its retry policy's last word: why this attempt was made, and why none follows. */
  retry: {
    cause: {
      previous_attempt_id: string;
      after: JobRequestRow['state'];
      exit_code: number | null;
      reason: string;
      escalated: { field: string; from: number; to: number; capped_by: string | null }[];
    } | null;
    due_at: string | null;
    next_attempt_id: string | null;
    note: string | null;
    limit: number | null;
  } | null;
}

/** A pipeline run's outcome, as sent with `run.finished`. */
export interface RunOutcome {
  id: string;
  pipeline: string;
  trigger: PipelineRunRow['trigger'];
  state: PipelineRunRow['state'];
  /** 1, and one more for each resume: a resumed run's webhook is sent again at each end. */
  attempt: number;
  /** Why a run failed or was skipped, in words. */
  detail: string | null;
  scheduled_for: string | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  /** The steps' outputs (`name=value` lines they wrote to $SCHEDFLOW_OUTPUTS): step → name → value. */
  outputs: Record<string, Record<string, string>>;
  /** The step requests, every attempt, in step then attempt order. */
  steps: StepOutcome[];
}

export interface StepOutcome {
  step: string | null;
  attempt: number;
  /** Which attempt of the run made it (a resume's steps: the resume's). */
  run_attempt: number | null;
  request_id: string;
  state: JobRequestRow['state'];
  job_id: number | null;
  exit_code: number | null;
}

/** A missed deadline, as sent with `deadline.missed`. */
export interface DeadlineMissed {
  kind: DeadlineMissRow['kind'];
  /** What was late and why (with the scheduler's reason for a pending job). */
  detail: string;
  missed_at: string;
  request_id: string | null;
  run_id: string | null;
}

/** Event name → the members its payload has besides the envelope. Extending the record makes a new event in the schema's list without a body a type error. */
export interface WebhookBodies extends Record<WebhookEvent, object> {
  'job.finished': { request: JobOutcome };
  'run.finished': { run: RunOutcome };
  'deadline.missed': { deadline: DeadlineMissed };
}

export interface WebhookEnvelope<E extends WebhookEvent = WebhookEvent> {
  event: E;
  /** The delivery id: the same on every retry of one delivery. */
  id: string;
  /** When what is reported happened (not when it was sent). */
  occurred_at: string;
}

/** The JSON body POSTed for an event. */
export type WebhookPayload<E extends WebhookEvent = WebhookEvent> = E extends WebhookEvent
  ? WebhookEnvelope<E> & WebhookBodies[E]
  : never;
