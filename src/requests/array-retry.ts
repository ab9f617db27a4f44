import { randomUUID } from 'node:crypto';
import { tasksOf } from '../db/array-tasks.js';
import { appendAudit } from '../db/audit.js';
import type { History } from '../db/history.js';
import { getRequest } from '../db/requests.js';
import type { TransitionSource } from '../db/schema.js';
import { NoTasksToRetryError, RequestNotFoundError, SchedflowError } from '../errors.js';
import { systemClock } from '../lib/clock.js';
import {
  type ArrayExpression,
  formatIndexes,
  formatJobArray,
  indexesOf,
  parseArrayExpression,
} from '../sched/job-array.js';
import type { JobSpec } from '../sched/job-spec.js';
import { type AcceptDeps, accept } from './accept.js';
import { isTerminalRequest } from './request-state.js';

export interface ArrayRetry {
  /** The array request whose tasks run again. */
  requestId: string;
  /**
   * Which tasks, as read from Slurm's syntax (`3,7-9`) without listing them: they are listed
   * only once known to be within the array. @defaultValue the tasks that ended other than completed
   */
  indexes?: ArrayExpression;
  origin: 'api' | 'cli' | 'pipeline';
  source: TransitionSource;
  /** Who asks (src/access/principal.ts); the retry is the original's owner's. */
  actor: string;
  /** @defaultValue a new UUID */
  newRequestId?: string;
  /** The HTTP call that asked, for the audit log (src/db/audit.ts). */
  httpRequestId?: string | null;
}

/**
 * Runs some tasks of an array request again: a new request, the same spec with `array:` naming
 * only those indexes (and the same `%` throttle), linked to the original (`array_retry_of`).
 * By hand (API, CLI, UI) and by retry policy alike; the original is left as it is. What the
 * door refuses now (the account, a scope the token lost) is refused before anything is recorded,
 * as a new submission would be.
 */
export async function retryArrayTasks(
  deps: AcceptDeps & { refusal?(profile: string, spec: Pick<JobSpec, 'account' | 'array'>): Error | null },
  retry: ArrayRetry,
): Promise<{ id: string; indexes: number[]; array: string }> {
  const at = (deps.clock ?? systemClock).now();
  const audit = {
    at,
    actor: retry.actor,
    action: 'request.retry-tasks',
    target: `request:${retry.requestId}`,
    httpRequestId: retry.httpRequestId ?? null,
  };
  let planned: Awaited<ReturnType<typeof planArrayRetry>>;
  try {
    planned = await planArrayRetry(deps.store, retry.requestId, retry.indexes);
    const refused = deps.refusal?.(planned.original.profile, planned.spec);
    if (refused) throw refused;
  } catch (error) {
    // Refused (no such request, nothing to retry, the door): nothing was made, the row is alone.
    if (error instanceof SchedflowError) {
      const owner = (await getRequest(deps.store, retry.requestId))?.owner ?? null;
      await appendAudit(deps.store, { ...audit, owner, outcome: 'refused', detail: error.message });
    }
    throw error;
  }
  const { original, spec, indexes, array } = planned;
  const id = retry.newRequestId ?? randomUUID();
  await accept(deps, {
    id,
    profile: original.profile,
    name: original.name,
    spec,
    origin: retry.origin,
    owner: original.owner,
    actor: retry.actor,
    at,
    source: retry.source,
    webhookUrl: original.webhookUrl,
    deadlines: null,
    summarize: original.summarize,
    arrayRetryOf: original.id,
    // In the commit that records the new request: a retry that rolls back leaves no row.
    audit: { ...audit, owner: original.owner, outcome: 'ok', detail: `tasks ${array} as request ${id}` },
  });
  return { id, indexes, array };
}

/** Indexes named in a message: a few, then how many more. */
const INDEXES_NAMED = 20;

/**
 * What a retry of an array's tasks submits: the original's spec with `array:` naming the given
 * indexes (default: the tasks that ended other than completed). NoTasksToRetryError when there
 * is nothing to retry, or an index is not one of the array's (the message says which are). The
 * given indexes are listed only once their largest is known to be within the array, so what
 * that costs is bounded by the array's own size, whatever was asked (issue 30: "0-4000000"
 * twenty times held the event loop 5.6 s). The CLI queues it itself (through the submit queue).
 */
export async function planArrayRetry(h: History, requestId: string, given?: ArrayExpression) {
  const original = await getRequest(h, requestId);
  if (!original) throw new RequestNotFoundError(`no job request ${requestId}`);
  const spec = original.spec as Record<string, unknown> & { name: string; array?: string; account?: string };
  if (original.arrayTaskCount === null || typeof spec.array !== 'string') {
    throw new NoTasksToRetryError(`request ${original.id} is not an array job: submit it again instead`);
  }
  // The original's expression, checked when it was accepted: its tasks, whether reported or not.
  const own = parseArrayExpression(spec.array);
  const ownTasks = spec.array.split('%')[0] ?? '';
  const theirs = `its tasks: ${ownTasks.length > 100 ? `${ownTasks.slice(0, 100)}…` : ownTasks}`;
  let indexes: number[];
  if (given !== undefined) {
    if (given.maxIndex > own.maxIndex) {
      throw new NoTasksToRetryError(
        `task ${given.maxIndex} is not a task of request ${original.id}: its indexes go from 0 to ${own.maxIndex} at most (${theirs})`,
      );
    }
    const known = new Set(indexesOf(own));
    indexes = indexesOf(given);
    const unknown = indexes.filter((index) => !known.has(index));
    if (unknown.length > 0) {
      const more = unknown.length > INDEXES_NAMED ? ` and ${unknown.length - INDEXES_NAMED} more` : '';
      throw new NoTasksToRetryError(
        `task ${formatIndexes(unknown.slice(0, INDEXES_NAMED))}${more} is not a task of request ${original.id} (${theirs})`,
      );
    }
  } else {
    indexes = (await tasksOf(h, original.id))
      .filter((task) => isTerminalRequest(task.state) && task.state !== 'completed')
      .map((task) => task.taskId);
  }
  if (indexes.length === 0) {
    throw new NoTasksToRetryError(`no task of request ${original.id} failed: nothing to retry`);
  }
  const array = formatJobArray({ indexes, throttle: own.throttle });
  return { original, spec: { ...spec, array }, indexes, array };
}
