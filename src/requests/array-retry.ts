import { randomUUID } from 'node:crypto';
import { tasksOf } from '../db/array-tasks.js';
import type { History } from '../db/history.js';
import { getRequest } from '../db/requests.js';
import type { TransitionSource } from '../db/schema.js';
import { NoTasksToRetryError, RequestNotFoundError } from '../errors.js';
import { formatIndexes, formatJobArray, parseJobArray } from '../sched/job-array.js';
import type { JobSpec } from '../sched/job-spec.js';
import { type AcceptDeps, accept } from './accept.js';
import { isTerminalRequest } from './request-state.js';

export interface ArrayRetry {
  /** The array request whose tasks run again. */
  requestId: string;
  /** Which tasks; @defaultValue the tasks that ended other than completed */
  indexes?: readonly number[];
  origin: 'api' | 'cli' | 'pipeline';
  source: TransitionSource;
  /** @defaultValue a new UUID */
  newRequestId?: string;
}

/**
 * Runs some tasks of an array request again: a new request, the same spec with `array:` naming
 * only those indexes (and the same `%` throttle), linked to the original (`array_retry_of`).
 * By hand (API, CLI, UI) and by retry policy alike; the original is left as it is. What the
 * door refuses now (the account, a scope the token lost) is refused before anything is recorded,
 * as a new submission would be.
 */
export async function retryArrayTasks(
  deps: AcceptDeps & { refusal?(profile: string, spec: Pick<JobSpec, 'account'>): Error | null },
  retry: ArrayRetry,
): Promise<{ id: string; indexes: number[]; array: string }> {
  const { original, spec, indexes, array } = await planArrayRetry(deps.store, retry.requestId, retry.indexes);
  const refused = deps.refusal?.(original.profile, spec);
  if (refused) throw refused;
  const id = retry.newRequestId ?? randomUUID();
  await accept(deps, {
    id,
    profile: original.profile,
    name: original.name,
    spec,
    origin: retry.origin,
    at: Date.now(),
    source: retry.source,
    webhookUrl: original.webhookUrl,
    deadlines: null,
    summarize: original.summarize,
    arrayRetryOf: original.id,
  });
  return { id, indexes, array };
}

/**
 * What a retry of an array's tasks submits: the original's spec with `array:` naming the given
 * indexes (default: the tasks that ended other than completed). NoTasksToRetryError when there
 * is nothing to retry. The CLI queues it itself (through the submit queue).
 */
export async function planArrayRetry(h: History, requestId: string, given?: readonly number[]) {
  const original = await getRequest(h, requestId);
  if (!original) throw new RequestNotFoundError(`no job request ${requestId}`);
  const spec = original.spec as Record<string, unknown> & { name: string; array?: string; account?: string };
  if (original.arrayTaskCount === null || typeof spec.array !== 'string') {
    throw new NoTasksToRetryError(`request ${original.id} is not an array job: submit it again instead`);
  }
  const tasks = await tasksOf(h, original.id);
  const known = new Set(tasks.map((task) => task.taskId));
  let indexes: number[];
  if (given !== undefined) {
    const unknown = given.filter((index) => !known.has(index));
    if (unknown.length > 0) {
      throw new NoTasksToRetryError(
        `task ${formatIndexes(unknown)} is not a task of request ${original.id} (its tasks: ${formatIndexes(known)})`,
      );
    }
    indexes = [...new Set(given)].sort((a, b) => a - b);
  } else {
    indexes = tasks
      .filter((task) => isTerminalRequest(task.state) && task.state !== 'completed')
      .map((task) => task.taskId);
  }
  if (indexes.length === 0) {
    throw new NoTasksToRetryError(`no task of request ${original.id} failed: nothing to retry`);
  }
  const array = formatJobArray({ indexes, throttle: parseJobArray(spec.array).throttle });
  return { original, spec: { ...spec, array }, indexes, array };
}
