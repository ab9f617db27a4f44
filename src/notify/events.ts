import type { DeadlineMissRow, JobRequestRow, PipelineRunRow, WebhookEvent } from '../db/schema.js';
import { iso, type JobOutcome, jobOutcome, type RunOutcome, runOutcome } from '../views/views.js';

/**
 * What each webhook event carries. Every body is wrapped in the same envelope
 * (`event`, `id`, `occurred_at`) by `addDelivery`; the id is the delivery's,
 * the one receivers dedupe on (also sent as `Schedflow-Delivery`).
 *
 * Bodies hold outcomes only: never a job spec, its script or environment,
 * tokens or anything else a receiver should not see. Times are ISO 8601 (UTC)
 * or null; Slurm's own words are kept for Slurm things (`job_id`, `exit_code`).
 * A request's and a run's members are picked from their views (src/views/),
 * the ones the API answers with, so the two cannot tell different stories.
 */

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

/** `job.finished`: built from the request row as it is after its terminal transition. */
export function jobFinishedBody(row: JobRequestRow): WebhookBodies['job.finished'] {
  return { request: jobOutcome(row) };
}

/** `run.finished`: for the pipelines engine, from the run and its step requests. */
export function runFinishedBody(run: PipelineRunRow, steps: readonly JobRequestRow[]): WebhookBodies['run.finished'] {
  return { run: runOutcome(run, steps) };
}

/** `deadline.missed`: for the deadline checker, from the recorded miss. */
export function deadlineMissedBody(miss: DeadlineMissRow): WebhookBodies['deadline.missed'] {
  return {
    deadline: {
      kind: miss.kind,
      detail: miss.detail,
      missed_at: iso(miss.at),
      request_id: miss.requestId,
      run_id: miss.runId,
    },
  };
}
