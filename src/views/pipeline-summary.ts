/** What the local API and the UI see of a loaded pipeline file. */
export interface PipelineSummary {
  name: string;
  file: string;
  description: string | null;
  /** Whose it is: its runs belong to this owner (src/access/principal.ts). */
  owner: string;
  /** Other owners who may read, trigger and pause it, and read its runs. */
  allow: string[];
  /** The scheduler profile its steps go to (a token bound to others may not trigger it); null when its file does not load. */
  profile: string | null;
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
  /** The ends of other pipelines' runs that start a run of it (its file's `on:`). */
  on: { end: 'succeeded' | 'failed' | 'finished'; pipeline: string }[];
  /** Parameters a trigger may give, with their defaults (null: required). */
  params: Record<string, string | null>;
  /** The file's current problem when a reload failed: the version loaded before keeps running. */
  error: string | null;
}
