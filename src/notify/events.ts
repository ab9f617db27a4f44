import type { DeadlineMissRow, JobRequestRow, PipelineRunRow } from '../db/schema.js';
import type { WebhookBodies } from '../db/webhook-payloads.js';

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

export function isoOrNull(ms: number | null | undefined): string | null {
  return ms === null || ms === undefined ? null : new Date(ms).toISOString();
}

/** `job.finished`: built from the request row as it is after its terminal transition. */
export function jobFinishedBody(row: JobRequestRow): WebhookBodies['job.finished'] {
  return {
    request: {
      id: row.id,
      name: row.name,
      profile: row.profile,
      state: row.state,
      job_id: row.jobId,
      exit_code: row.exitCode,
      signal: row.signal,
      reason: row.reason,
      raw_state: row.rawState,
      submitted_at: isoOrNull(row.submittedAt),
      started_at: isoOrNull(row.startedAt),
      ended_at: isoOrNull(row.endedAt),
      run_id: row.runId,
      step: row.step,
      attempt: row.attempt,
    },
  };
}

/** `run.finished`: for the pipelines engine, from the run and its step requests. */
export function runFinishedBody(run: PipelineRunRow, steps: readonly JobRequestRow[]): WebhookBodies['run.finished'] {
  return {
    run: {
      id: run.id,
      pipeline: run.pipeline,
      trigger: run.trigger,
      state: run.state,
      detail: run.detail,
      scheduled_for: isoOrNull(run.scheduledFor),
      created_at: new Date(run.createdAt).toISOString(),
      started_at: isoOrNull(run.startedAt),
      ended_at: isoOrNull(run.endedAt),
      steps: steps.map((s) => ({
        step: s.step,
        attempt: s.attempt,
        request_id: s.id,
        state: s.state,
        job_id: s.jobId,
        exit_code: s.exitCode,
      })),
    },
  };
}

/** `deadline.missed`: for the deadline checker, from the recorded miss. */
export function deadlineMissedBody(miss: DeadlineMissRow): WebhookBodies['deadline.missed'] {
  return {
    deadline: {
      kind: miss.kind,
      detail: miss.detail,
      missed_at: new Date(miss.at).toISOString(),
      request_id: miss.requestId,
      run_id: miss.runId,
    },
  };
}
