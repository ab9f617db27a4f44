import type { JobRequestRow, StepNeed } from '../db/schema.js';
import { retryMatch } from '../requests/attempt-policy.js';
import { isTerminalRequest } from '../requests/request-state.js';
import type { DependencyResolution } from '../requests/submitter.js';
import type { StepPlan } from './run-plan.js';

/** Whether a step can be submitted now, and with which Slurm dependency (a DependencyResolution). */

/**
 * A step attempt that ended in a state its retry policy names, with attempts left: another
 * attempt follows. A step request carries its policy, and its end recorded when the next attempt
 * is due (src/requests/attempts.ts makes it); one made before requests carried policies is
 * read against its run's plan, and retried by the run engine.
 */
export function retryPending(row: JobRequestRow, plan: StepPlan | undefined): boolean {
  if (row.retryDueAt != null) return true;
  return legacyRetryPending(row, plan);
}

/** A step request without a policy of its own (made before requests carried one) that its plan retries. */
export function legacyRetryPending(row: JobRequestRow, plan: StepPlan | undefined): boolean {
  const retry = plan?.retry;
  if (!retry || row.retryPolicy != null || !isTerminalRequest(row.state)) return false;
  return retryMatch(retry, { state: row.state, exitCode: row.exitCode, attempt: row.attempt }) === 'yes';
}

/**
 * Turns a step's needs into a Slurm dependency on the latest attempts of the
 * steps it needs. A needed step that already ended is decided here rather
 * than sent to Slurm, which may have forgotten the job (MinJobAge): success
 * satisfies `afterok`, anything else makes it impossible (and `afternotok` the
 * reverse; `afterany` takes either).
 */
export function resolveDependencies(
  needs: readonly StepNeed[],
  latest: ReadonlyMap<string, JobRequestRow>,
  plans: ReadonlyMap<string, StepPlan>,
): DependencyResolution {
  const terms: string[] = [];
  let waitingOn: string | null = null;
  for (const need of needs) {
    const row = latest.get(need.step);
    if (!row || retryPending(row, plans.get(need.step))) {
      waitingOn ??= need.step;
      continue;
    }
    if (isTerminalRequest(row.state)) {
      const ok = row.state === 'completed';
      const impossible = (need.type === 'afterok' && !ok) || (need.type === 'afternotok' && ok);
      if (impossible) {
        const wanted = need.type === 'afterok' ? 'to succeed' : 'to fail';
        return {
          kind: 'never',
          detail: `step "${need.step}" ended ${row.state.toUpperCase()}, and this step needs it ${wanted} (${need.type})`,
        };
      }
      continue;
    }
    if (row.jobId === null) {
      waitingOn ??= need.step;
      continue;
    }
    terms.push(`${need.type}:${row.jobId}`);
  }
  if (waitingOn !== null) return { kind: 'wait', on: waitingOn };
  return { kind: 'ready', dependency: terms.length ? terms.join(',') : null };
}

/** The newest attempt of each step of a run. */
export function latestAttempts(rows: readonly JobRequestRow[]): Map<string, JobRequestRow> {
  const latest = new Map<string, JobRequestRow>();
  for (const row of rows) {
    if (!row.step) continue;
    const seen = latest.get(row.step);
    if (!seen || row.attempt > seen.attempt) latest.set(row.step, row);
  }
  return latest;
}
