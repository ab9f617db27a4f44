import type { PipelineRunRow } from '../db/schema.js';
import { assertNever } from '../lib/assert-never.js';

/**
 * How a run was started, in words, for the CLI, the UI and the summaries alike: "its schedule",
 * "the API (API token "ci")". A run of a pipeline that has a schedule may still be one somebody
 * asked for; only the run's own trigger says which.
 */
export function runStartedBy(run: Pick<PipelineRunRow, 'trigger' | 'triggeredBy'>): string {
  const who = run.triggeredBy ? ` (${run.triggeredBy})` : '';
  switch (run.trigger) {
    case 'schedule':
      return 'its schedule';
    case 'catchup':
      return 'a catch-up of a missed schedule tick';
    case 'api':
      return `the API${who}`;
    case 'ui':
      return `the web UI${who}`;
    case 'cli':
      return `the CLI${who}`;
    case 'upstream':
      return `the end of an upstream run${who}`;
    default:
      return assertNever(run.trigger);
  }
}
