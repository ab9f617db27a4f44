import type { DeadlineMissRow, JobRequestRow, PipelineRunRow } from '../db/schema.js';
import type { WebhookBodies } from '../db/webhook-payloads.js';
import { iso, jobOutcome, runOutcome } from '../views/views.js';

// The payload types live beside the outbox that stores them (src/db/webhook-payloads.ts), so the
// queries import nothing above db/; they are re-exported here for who builds or reads bodies.
export type {
  DeadlineMissed,
  JobOutcome,
  RunOutcome,
  StepOutcome,
  WebhookBodies,
  WebhookEnvelope,
  WebhookPayload,
} from '../db/webhook-payloads.js';

/*
 * A request's and a run's members are picked from their views (src/views/), the ones the API
 * answers with, so the two cannot tell different stories.
 */

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
