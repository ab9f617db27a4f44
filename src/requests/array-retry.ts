import { randomUUID } from 'node:crypto';
import { tasksOf } from '../db/array-tasks.js';
import { getRequest } from '../db/requests.js';
import type { TransitionSource } from '../db/schema.js';
import { NoTasksToRetryError, RequestNotFoundError } from '../errors.js';
import { formatIndexes, formatJobArray, parseJobArray } from '../sched/job-array.js';
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
 * By hand (API, CLI, UI) and by retry policy alike; the original is left as it is.
 */
export async function retryArrayTasks(
  deps: AcceptDeps,
  retry: ArrayRetry,
): Promise<{ id: string; indexes: number[]; array: string }> {
  const original = getRequest(deps.db, retry.requestId);
  if (!original) throw new RequestNotFoundError(`no job request ${retry.requestId}`);
  const spec = original.spec as Record<string, unknown> & { name: string; array?: string };
  if (original.arrayTaskCount === null || typeof spec.array !== 'string') {
    throw new NoTasksToRetryError(`request ${original.id} is not an array job: submit it again instead`);
  }
  const tasks = tasksOf(deps.db, original.id);
  const known = new Set(tasks.map((task) => task.taskId));
  let indexes: number[];
  if (retry.indexes !== undefined) {
    const unknown = retry.indexes.filter((index) => !known.has(index));
    if (unknown.length > 0) {
      throw new NoTasksToRetryError(
        `task ${formatIndexes(unknown)} is not a task of request ${original.id} (its tasks: ${formatIndexes(known)})`,
      );
    }
    indexes = [...new Set(retry.indexes)].sort((a, b) => a - b);
  } else {
    indexes = tasks
      .filter((task) => isTerminalRequest(task.state) && task.state !== 'completed')
      .map((task) => task.taskId);
  }
  if (indexes.length === 0) {
    throw new NoTasksToRetryError(`no task of request ${original.id} failed: nothing to retry`);
  }
  const array = formatJobArray({ indexes, throttle: parseJobArray(spec.array).throttle });
  const id = retry.newRequestId ?? randomUUID();
  await accept(deps, {
    id,
    profile: original.profile,
    name: original.name,
    spec: { ...spec, array },
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
