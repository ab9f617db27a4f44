/**
 * What a summary stores besides its text, as data (JSON columns of the
 * `summaries` table): the efficiency figures, the failure triage and the
 * proposed change to the job spec. A leaf module: the schema imports these
 * types, so it imports nothing of schedflow's.
 */

/** One efficiency figure: measured against what was asked for, or why it cannot be. */
export type Measure =
  | {
      known: true;
      /** What was used (seconds or MB). */
      used: number;
      /** What was allocated or requested (same unit). */
      of: number;
      /** used / of × 100, rounded to one decimal. */
      percent: number;
    }
  | { known: false; why: string };

export interface Efficiency {
  /** CPU time against allocated CPU time (elapsed × CPUs), in seconds. */
  cpu: Measure;
  /** Peak memory against requested memory, in MB. */
  memory: Measure;
  /** Elapsed time against the time limit, in seconds. */
  time: Measure;
}

export const TRIAGE_CLASSES = [
  'time_limit',
  'out_of_memory',
  'node_failure',
  'command_not_found',
  'permission_denied',
  'crashed',
  'script_error',
  'cancelled',
  'preempted',
  'boot_failure',
  'deadline',
  'refused',
  'dependency',
] as const;
export type TriageClass = (typeof TRIAGE_CLASSES)[number];

/** Why a job did not complete, in plain words, with the scheduler's reason code explained. */
export interface Triage {
  classification: TriageClass;
  /** One line: what most likely happened. */
  cause: string;
  /** Slurm's reason code (`TimeLimit`, `NonZeroExitCode`, ...) and what it means. */
  reason: { code: string; meaning: string } | null;
  /** What in the facts points there (exit code, a line of the output). */
  evidence: string[];
}

/**
 * A proposed change to a job spec: `changes` are job spec members with their
 * new values (`memory_per_node` in MB, `time_limit` in minutes,
 * `partition`, `excluded_nodes`); `{}` means "the same spec again".
 * Applied only by an explicit action (`schedflow jobs resubmit <id> --apply-suggestion`).
 */
export interface SpecSuggestion {
  changes: Record<string, string | number | string[]>;
  /** Old values of the changed members, for display (null where the spec named none). */
  previous: Record<string, string | number | string[] | null>;
  why: string;
  /** For a pipeline step: the step; the change belongs in the pipeline file. */
  step?: string;
  /** Set for a step: the request the suggestion is about. */
  requestId?: string;
}

/** A recurring pipeline's last runs and what they suggest about its requests. */
export interface RunTrend {
  runs: { runId: string; state: string; durationSec: number | null; createdAt: number }[];
  /** Median duration of the earlier runs (seconds), null without any. */
  medianDurationSec: number | null;
  /** This run against that median, in words ("about as long", "2.1× longer"). */
  comparison: string | null;
  /** Per step: the largest share of its time limit any of the runs used, and a resize proposal. */
  steps: { step: string; maxTimePercent: number | null; resize: SpecSuggestion | null }[];
}

/** The computed part of a summary, stored beside the text. */
export interface SummaryFindings {
  efficiency: Efficiency | null;
  /** Per step for a run summary; one element for a job. */
  steps?: { step: string; requestId: string; state: string; efficiency: Efficiency; triage: Triage | null }[];
  triage: Triage | null;
  trend: RunTrend | null;
}
