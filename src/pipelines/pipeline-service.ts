import type { PipelineRunRow, RunTrigger } from '../db/schema.js';

/** What the local API and the UI see of a loaded pipeline file. */
export interface PipelineSummary {
  name: string;
  file: string;
  description: string | null;
  steps: { name: string; needs: string[] }[];
  schedule: {
    cron: string;
    timezone: string;
    enabled: boolean;
    overlap: 'skip' | 'queue' | 'allow';
    catchup: 'none' | 'latest' | 'all';
    /** The next five fire times (ISO 8601, UTC); none while the file switches it off or it is paused. */
    next: string[];
    /** Set while an admin has paused the schedule: who, and since when (ISO 8601, UTC). */
    paused: { by: string; at: string } | null;
  } | null;
  /** Parameters a trigger may give, with their defaults (null: required). */
  params: Record<string, string | null>;
  /** The file's current problem when a reload failed: the version loaded before keeps running. */
  error: string | null;
}

export interface TriggerInput {
  params?: Record<string, string>;
  trigger: RunTrigger;
  webhookUrl?: string | null;
}

/** The pipelines of a running daemon: listing, triggering runs, and pausing schedules. */
export interface PipelineService {
  list(): PipelineSummary[];
  get(name: string): PipelineSummary | undefined;
  /**
   * Starts a run now (or queues it behind the active one, per `overlap`).
   * Throws PipelineNotFoundError for an unknown name and ConfigError for bad
   * parameters (the message names the parameter).
   */
  trigger(name: string, input: TriggerInput): Promise<PipelineRunRow>;
  /**
   * Pauses the pipeline's schedule for every daemon sharing the history, until
   * resumed: its cron ticks make no runs; triggering by hand still works. `by`
   * names who asked. Throws PipelineNotFoundError for an unknown name and
   * PipelineNotScheduledError for a pipeline without a schedule.
   */
  pause(name: string, by: string): Promise<PipelineSummary>;
  /** Lifts a pause (same errors). A file with `schedule.enabled: false` keeps the schedule off. */
  resume(name: string, by: string): Promise<PipelineSummary>;
}
