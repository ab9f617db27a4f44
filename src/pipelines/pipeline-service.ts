import type { AuditContext } from '../db/audit.js';
import type { PipelineRunRow, RunTrigger } from '../db/schema.js';

// What the API and the UI see of a pipeline is a view (src/views/), below both this service and
// the webhook bodies; re-exported for who implements the service.
export type { PipelineSummary } from '../views/pipeline-summary.js';

import type { PipelineSummary } from '../views/pipeline-summary.js';
import type { RunCancelBy, RunCancelOutcome } from './run-engine.js';
import type { RunResumeBy, RunResumeOutcome } from './run-resume.js';

export interface TriggerInput {
  params?: Record<string, string>;
  trigger: RunTrigger;
  /** Who asked, in words (`API token "ci"`, `web UI (alice)`, `CLI (bob, pid 4242)`), kept with the run. */
  triggeredBy?: string | null;
  /** Who asked (src/access/principal.ts); the run is the pipeline's owner's. */
  actor: string;
  webhookUrl?: string | null;
  /** The HTTP call that asked, for the audit log (src/db/audit.ts). */
  httpRequestId?: string | null;
}

/** The pipelines of a running daemon: listing, triggering runs, and pausing schedules. */
export interface PipelineService {
  list(): Promise<PipelineSummary[]>;
  get(name: string): Promise<PipelineSummary | undefined>;
  /**
   * Starts a run now (or queues it behind the active one, per `overlap`).
   * Throws PipelineNotFoundError for an unknown name and ConfigError for bad
   * parameters (the message names the parameter).
   */
  trigger(name: string, input: TriggerInput): Promise<PipelineRunRow>;
  /**
   * Pauses the pipeline's schedule for every daemon sharing the history, until
   * resumed: its cron ticks make no runs; triggering by hand still works. `by`
   * names who asked; `audit`, who for the audit log (its row is written with the pause). Throws
   * PipelineNotFoundError for an unknown name and PipelineNotScheduledError for a pipeline
   * without a schedule.
   */
  pause(name: string, by: string, audit?: AuditContext): Promise<PipelineSummary>;
  /** Lifts a pause (same errors). A file with `schedule.enabled: false` keeps the schedule off. */
  resume(name: string, by: string, audit?: AuditContext): Promise<PipelineSummary>;
  /**
   * Cancels a run: steps not yet submitted are withdrawn, submitted ones cancelled upstream,
   * and the run ends `cancelled` once they have ended (src/pipelines/run-engine.ts, cancelRun).
   */
  cancelRun(runId: string, by: RunCancelBy): Promise<RunCancelOutcome>;
  /**
   * Resumes a failed or cancelled run: a new attempt in which its steps that did not complete
   * run again (src/pipelines/run-resume.ts). Throws RunNotResumableError (still active, succeeded,
   * skipped, pruned) and ConfigError (a bad parameter override).
   */
  resumeRun(runId: string, by: RunResumeBy): Promise<RunResumeOutcome>;
}
