import { tasksOf } from '../db/array-tasks.js';
import { type AuditContext, appendAudit, auditEntryOf } from '../db/audit.js';
import type { History } from '../db/history.js';
import { getRequest, insertTransition, transitionFactsOf, updateRequest } from '../db/requests.js';
import type { JobRequestRow, RequestState } from '../db/schema.js';
import { JobControlRefusedError, toError } from '../errors.js';
import { type Clock, systemClock } from '../lib/clock.js';
import type { Logger } from '../logger.js';
import {
  type ArrayExpression,
  formatIndexes,
  indexesOf,
  namesIndex,
  parseArrayExpression,
  taskCountOf,
} from '../sched/job-array.js';
import { jobSpecSchema, parseTimeLimit } from '../sched/job-spec.js';
import type { JobUpdate } from '../sched/job-update.js';
import { JobUpdateRefusedError } from '../sched/sched-errors.js';
import { isTerminalRequest } from './request-state.js';

/**
 * Hold, release and update of a job request, wherever it is in its life (issue 34):
 *
 * - Not submitted yet (accepted, queued, or waiting on a submit limit with no attempt in
 *   flight): held means kept back. The request stays in its state with `held_at`/`held_by`,
 *   the submit worker looks at it again every few seconds and sends nothing until it is
 *   released (src/requests/submitter.ts; the move to `submitting` refuses a held request in the
 *   transaction that reads it, so a hold and a submission that start together do not both win).
 *   No Slurm job exists meanwhile, so nothing holds a place in Slurm's queue or counts against
 *   its limits. An update changes the spec that will be sent; the submitter refuses to send a
 *   spec older than the history's (`spec_changed_at`).
 * - Submitted (submitted, pending, running, lost): the scheduler is asked (SchedClient.updateJob)
 *   and the history records what it accepted. What Slurm refuses comes back in its own words,
 *   never retried: a running job cannot be held or moved to another partition.
 * - Being submitted right now: ask again shortly (its job may exist upstream any moment).
 * - Ended: nothing to do (409).
 *
 * Every change writes a line in the request's timeline (a transition that does not move: from
 * and to its state, reason `Held`, `Released` or `Updated`, saying by whom) and the audit row
 * in the transaction that records it; a refusal writes its audit row alone.
 */

export interface ControlDeps {
  store: History;
  /** The scheduler of a profile, for submitted jobs: SchedClient is one. */
  clients: { get(profile: string): JobUpdater };
  logger: Logger;
  /** @defaultValue systemClock */
  clock?: Clock;
}

/** What job control needs of a scheduler client (src/sched/client.ts `updateJob`). */
export interface JobUpdater {
  updateJob(jobId: number | string, update: JobUpdate, options?: { signal?: AbortSignal }): Promise<void>;
}

/** Who acts: the transition's source, the actor written as "held by", and the audit context (absent: the daemon). */
export interface ControlBy {
  source: 'api' | 'cli' | 'pipeline';
  actor: string;
  audit?: AuditContext;
}

/** The fields a request's job may have changed, validated at the door (the API's and the CLI's). */
export interface JobChange {
  /** Minutes, or a Slurm time string (`1:30:00`, `2-00:00:00`). */
  time_limit?: number | string;
  partition?: string;
  qos?: string;
  nice?: number;
  name?: string;
  comment?: string;
}

export type ControlAction = { kind: 'hold' } | { kind: 'release' } | { kind: 'update'; change: JobChange };

export type ControlOutcome =
  /** Done: in the history alone (`where: 'history'`, not submitted yet) or accepted by the scheduler. */
  | { kind: 'done'; row: JobRequestRow; where: 'history' | 'scheduler'; message: string }
  /** Nothing to do: already held (a hold), not held (a release). */
  | { kind: 'unchanged'; row: JobRequestRow; message: string }
  | { kind: 'submitting'; row: JobRequestRow; retryAfterSec: number }
  | { kind: 'ended'; row: JobRequestRow }
  | { kind: 'not_found' };

/** How soon to ask again while a submission is under way: it takes a second or two. */
const SUBMITTING_RETRY_AFTER_SEC = 2;

/**
 * Slurm's numbers for a refusal because of the job's state (409): ESLURM_TRANSITION_STATE_NO_UPDATE
 * 2020, ESLURM_ALREADY_DONE 2021, ESLURM_DISABLED 2037 (a running job's partition),
 * ESLURM_JOB_NOT_PENDING 2073, ESLURM_JOB_NOT_PENDING_NOR_RUNNING 2085 (slurm_errno.h, 25.11).
 * Any other refusal is of the value asked for (422).
 */
const STATE_REFUSALS: ReadonlySet<number> = new Set([2020, 2021, 2037, 2073, 2085]);

/** States a request is in before any attempt to submit it: what is changed here, in the history. */
const NOT_SUBMITTED: ReadonlySet<RequestState> = new Set(['accepted', 'queued', 'waiting']);

const ACTION_NAMES = { hold: 'request.hold', release: 'request.release', update: 'request.update' } as const;

/**
 * Holds, releases or updates one request (or, with `tasks`, those tasks of its array job).
 * Refusals of the scheduler are thrown as JobControlRefusedError (its words); other scheduler
 * errors (unreachable) as they come, for the caller to answer 502/503.
 */
export async function controlRequest(
  deps: ControlDeps,
  requestId: string,
  action: ControlAction,
  by: ControlBy,
  tasks?: ArrayExpression,
): Promise<ControlOutcome> {
  const clock = deps.clock ?? systemClock;
  const auditAlone = async (owner: string | null, outcome: 'refused' | 'failed', detail: string) => {
    if (!by.audit) return;
    try {
      await auditControl(deps.store, by.audit, {
        at: clock.now(),
        owner,
        kind: action.kind,
        requestId,
        outcome,
        detail,
      });
    } catch (error) {
      deps.logger.error({ requestId, err: toError(error) }, 'audit row of a job control not written');
    }
  };
  try {
    const outcome = await controlOnce(deps, requestId, action, by, tasks);
    switch (outcome.kind) {
      case 'not_found':
        await auditAlone(null, 'refused', 'no such request');
        break;
      case 'ended':
        await auditAlone(outcome.row.owner, 'refused', `already ended: ${outcome.row.state}`);
        break;
      case 'submitting':
        await auditAlone(outcome.row.owner, 'refused', 'being submitted right now: ask again');
        break;
      case 'unchanged':
      case 'done':
        break;
    }
    return outcome;
  } catch (error) {
    const row = await getRequest(deps.store, requestId);
    await auditAlone(
      row?.owner ?? null,
      error instanceof JobControlRefusedError ? 'refused' : 'failed',
      toError(error).message,
    );
    throw error;
  }
}

async function controlOnce(
  deps: ControlDeps,
  requestId: string,
  action: ControlAction,
  by: ControlBy,
  tasks: ArrayExpression | undefined,
): Promise<ControlOutcome> {
  const { store } = deps;
  const clock = deps.clock ?? systemClock;
  const row = await getRequest(store, requestId);
  if (!row) return { kind: 'not_found' };
  if (isTerminalRequest(row.state)) return { kind: 'ended', row };
  if (tasks !== undefined) checkTasks(row, tasks);

  if (row.jobId === null) {
    // Before submission: in the history alone, in one transaction that reads the state, the
    // attempt time and the hold, as the submitter's move to `submitting` does.
    const result = await store.transaction(async (tx) => {
      const facts = await transitionFactsOf(tx, requestId);
      const now = await getRequest(tx, requestId);
      if (!facts || !now) return { kind: 'gone' as const };
      if (isTerminalRequest(now.state)) return { kind: 'ended' as const, row: now };
      if (!NOT_SUBMITTED.has(now.state) || now.submitAttemptAt !== null || now.jobId !== null) {
        return { kind: 'submitting' as const, row: now };
      }
      const at = clock.now();
      const plan = plannedChange(now, action, by, at);
      if (plan === null) return { kind: 'unchanged' as const, row: now };
      await updateRequest(tx, requestId, { ...plan.patch, updatedAt: at });
      await insertTransition(tx, {
        requestId,
        fromState: now.state,
        toState: now.state,
        at,
        source: by.source,
        rawState: now.rawState,
        reason: plan.reason,
        stale: false,
        detail: plan.detail,
      });
      if (by.audit) {
        await auditControl(tx, by.audit, {
          at,
          owner: now.owner,
          kind: action.kind,
          requestId,
          outcome: 'ok',
          detail: plan.detail,
        });
      }
      return { kind: 'done' as const, detail: plan.detail };
    });
    const after = (await getRequest(store, requestId)) ?? row;
    switch (result.kind) {
      case 'gone':
        return { kind: 'not_found' };
      case 'ended':
        return { kind: 'ended', row: result.row };
      case 'submitting':
        // Being submitted (or its earlier attempt may have made a job): its job id decides, soon.
        return { kind: 'submitting', row: result.row, retryAfterSec: SUBMITTING_RETRY_AFTER_SEC };
      case 'unchanged':
        return { kind: 'unchanged', row: after, message: unchangedMessage(action) };
      case 'done':
        deps.logger.info({ requestId, by: by.actor, action: action.kind }, 'job request changed before submission');
        return { kind: 'done', row: after, where: 'history', message: `${result.detail} (not submitted yet)` };
    }
  }

  // Submitted: the scheduler decides. The whole array by its id; tasks one by one, by their own
  // job ids: slurmrestd 25.11 refuses a task's `123_4` in the path (422, "Submit job update
  // against Array Job's JobID instead of array task id"), so a task still in the array's pending
  // record (no id of its own yet) cannot be changed alone through it.
  const jobId = row.jobId;
  const update = jobUpdateOf(action);
  const targets: (number | string)[] = tasks === undefined ? [jobId] : await taskJobIds(store, row, tasks);
  const client = deps.clients.get(row.profile);
  for (const target of targets) {
    try {
      await client.updateJob(target, update);
    } catch (error) {
      if (error instanceof JobUpdateRefusedError) throw refusalOf(error, target, action);
      throw error;
    }
  }
  const at = clock.now();
  const taskWords = tasks === undefined ? '' : ` tasks ${formatIndexes(indexesOf(tasks))} of`;
  const detail = `${describe(action)}${taskWords} job ${jobId} by ${by.actor}`;
  await store.transaction(async (tx) => {
    const now = (await getRequest(tx, requestId, { lock: true })) ?? row;
    // The whole job's hold is the request's; tasks held one by one are said in the timeline only.
    const patch: Parameters<typeof updateRequest>[2] = { updatedAt: at };
    if (tasks === undefined) {
      if (action.kind === 'hold') Object.assign(patch, { heldAt: at, heldBy: by.actor });
      if (action.kind === 'release') Object.assign(patch, { heldAt: null, heldBy: null });
      if (action.kind === 'update') Object.assign(patch, specPatch(now, action.change));
    }
    await updateRequest(tx, requestId, patch);
    await insertTransition(tx, {
      requestId,
      fromState: now.state,
      toState: now.state,
      at,
      source: by.source,
      rawState: now.rawState,
      reason: REASONS[action.kind],
      stale: false,
      detail,
    });
    if (by.audit) {
      await auditControl(tx, by.audit, { at, owner: now.owner, kind: action.kind, requestId, outcome: 'ok', detail });
    }
  });
  deps.logger.info({ requestId, job_id: jobId, by: by.actor, action: action.kind }, 'job changed in the scheduler');
  return {
    kind: 'done',
    row: (await getRequest(store, requestId)) ?? row,
    where: 'scheduler',
    message: `${detail}: accepted by the scheduler`,
  };
}

const REASONS = { hold: 'Held', release: 'Released', update: 'Updated' } as const;

function describe(action: ControlAction): string {
  switch (action.kind) {
    case 'hold':
      return 'held';
    case 'release':
      return 'released';
    case 'update':
      return `updated (${changeWords(action.change)})`;
  }
}

function unchangedMessage(action: ControlAction): string {
  switch (action.kind) {
    case 'hold':
      return 'already held: nothing changed';
    case 'release':
      return 'not held: nothing to release';
    case 'update':
      return 'nothing to change';
  }
}

/** The change in words, as the timeline and the audit log say it: `time_limit=90, name=x`. */
export function changeWords(change: JobChange): string {
  return Object.entries(change)
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) => `${key}=${value}`)
    .join(', ');
}

/** A change before submission: the columns to set, the timeline's reason and detail; null when nothing changes. */
function plannedChange(
  row: JobRequestRow,
  action: ControlAction,
  by: ControlBy,
  at: number,
): { patch: Parameters<typeof updateRequest>[2]; reason: string; detail: string } | null {
  switch (action.kind) {
    case 'hold':
      if (row.heldAt !== null) return null;
      return {
        patch: { heldAt: at, heldBy: by.actor },
        reason: REASONS.hold,
        detail: `held by ${by.actor}: kept back, submitted once released`,
      };
    case 'release':
      if (row.heldAt === null) return null;
      return { patch: { heldAt: null, heldBy: null }, reason: REASONS.release, detail: `released by ${by.actor}` };
    case 'update': {
      const patch = specPatch(row, action.change);
      return {
        patch: { ...patch, specChangedAt: at },
        reason: REASONS.update,
        detail: `updated (${changeWords(action.change)}) by ${by.actor}`,
      };
    }
  }
}

/**
 * The spec with the change made, checked as a submitted spec is: a change that makes a spec the
 * door would have refused is refused (422). The request's name follows the spec's.
 */
function specPatch(row: JobRequestRow, change: JobChange): { spec: unknown; name: string } {
  const spec = { ...(row.spec as Record<string, unknown>) };
  for (const [key, value] of Object.entries(change)) if (value !== undefined) spec[key] = value;
  const parsed = jobSpecSchema.safeParse(spec);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => `${issue.path.join('.') || 'spec'}: ${issue.message}`);
    throw new JobControlRefusedError(
      'SCHEDFLOW_ERR_JOB_UPDATE_INVALID',
      `the change makes a spec that cannot be submitted: ${issues.join('; ')}`,
    );
  }
  return { spec, name: typeof spec.name === 'string' ? spec.name : row.name };
}

/** The scheduler's update for an action; a time limit in minutes (UNLIMITED is not one an update sets). */
function jobUpdateOf(action: ControlAction): JobUpdate {
  switch (action.kind) {
    case 'hold':
      return { hold: true };
    case 'release':
      return { hold: false };
    case 'update': {
      const { time_limit, ...rest } = action.change;
      const update: JobUpdate = {};
      if (time_limit !== undefined) {
        const minutes = parseTimeLimit(time_limit);
        if (minutes === 'infinite') {
          throw new JobControlRefusedError(
            'SCHEDFLOW_ERR_JOB_UPDATE_INVALID',
            'time_limit: UNLIMITED cannot be set on a submitted job through schedflow; give a number of minutes or a Slurm time',
          );
        }
        update.timeLimitMin = minutes;
      }
      if (rest.partition !== undefined) update.partition = rest.partition;
      if (rest.qos !== undefined) update.qos = rest.qos;
      if (rest.nice !== undefined) update.nice = rest.nice;
      if (rest.name !== undefined) update.name = rest.name;
      if (rest.comment !== undefined) update.comment = rest.comment;
      return update;
    }
  }
}

/** Slurm's refusal, in its words, with the status its cause gives: the job's state 409, the value 422. */
function refusalOf(
  error: JobUpdateRefusedError,
  target: string | number,
  action: ControlAction,
): JobControlRefusedError {
  const number = error.slurmCode;
  const words = error.slurmWords ?? error.detail.message ?? error.message;
  const stateRefusal =
    (number !== null && STATE_REFUSALS.has(number)) ||
    /no longer pending|not pending|already completing|completed/i.test(words);
  return new JobControlRefusedError(
    stateRefusal ? 'SCHEDFLOW_ERR_JOB_CONTROL_REFUSED' : 'SCHEDFLOW_ERR_JOB_UPDATE_INVALID',
    `Slurm refused to ${action.kind} job ${target}: ${words}${number !== null ? ` (error ${number})` : ''}`,
  );
}

/** Tasks named of a request: an array job's, submitted (a task of an array not submitted is not yet a job). */
function checkTasks(row: JobRequestRow, tasks: ArrayExpression): void {
  if (row.arrayTaskCount === null) {
    throw new JobControlRefusedError(
      'SCHEDFLOW_ERR_TASKS_NOT_IN_ARRAY',
      `job request ${row.id} is not an array job: it has no tasks to name; act on it whole`,
    );
  }
  if (row.jobId === null) {
    throw new JobControlRefusedError(
      'SCHEDFLOW_ERR_TASKS_NOT_IN_ARRAY',
      `job request ${row.id} is not submitted yet: its tasks are not jobs yet; hold or update the array whole`,
    );
  }
  const expression = String((row.spec as { array?: unknown }).array ?? '');
  // Counted before listed: an expression naming millions of indexes is refused unlisted.
  if (taskCountOf(tasks) > row.arrayTaskCount) {
    throw new JobControlRefusedError(
      'SCHEDFLOW_ERR_TASKS_NOT_IN_ARRAY',
      `more tasks named than job request ${row.id} has (${row.arrayTaskCount}: ${expression})`,
    );
  }
  // The array's own expression, read again: its indexes may be sparse (`1,5,9`).
  const own = parseOwn(expression);
  const outside = own === null ? [] : indexesOf(tasks).filter((index) => !namesIndex(own, index));
  if (outside.length > 0) {
    throw new JobControlRefusedError(
      'SCHEDFLOW_ERR_TASKS_NOT_IN_ARRAY',
      `task ${formatIndexes(outside)} is not one of job request ${row.id}'s tasks (${expression})`,
    );
  }
}

function parseOwn(expression: string): ArrayExpression | null {
  try {
    return parseArrayExpression(expression);
  } catch {
    return null;
  }
}

/** The own job ids of the tasks named, or the refusal naming those that have none yet. */
async function taskJobIds(store: History, row: JobRequestRow, tasks: ArrayExpression): Promise<number[]> {
  const known = new Map((await tasksOf(store, row.id)).map((task) => [task.taskId, task.jobId]));
  const ids: number[] = [];
  const without: number[] = [];
  for (const index of indexesOf(tasks)) {
    const own = known.get(index);
    // The array's own id is one task's only once the others have left its record (the last to start).
    if (own == null || own === row.jobId) without.push(index);
    else ids.push(own);
  }
  if (without.length > 0) {
    throw new JobControlRefusedError(
      'SCHEDFLOW_ERR_TASKS_NOT_IN_ARRAY',
      `task ${formatIndexes(without)} of job ${row.jobId} has no job id of its own yet (it waits in the array's pending record), and slurmrestd takes an update of the array's job id only ("Submit job update against Array Job's JobID instead of array task id"): act on the array whole`,
    );
  }
  return ids;
}

/** The audit row of one request's hold, release or update (written in the change's own transaction when it is `ok`). */
function auditControl(
  h: History,
  audit: AuditContext,
  row: {
    at: number;
    owner: string | null;
    kind: ControlAction['kind'];
    requestId: string;
    outcome: 'ok' | 'refused' | 'failed';
    detail: string;
  },
): Promise<void> {
  return appendAudit(
    h,
    auditEntryOf(audit, {
      at: row.at,
      owner: row.owner,
      action: ACTION_NAMES[row.kind],
      target: `request:${row.requestId}`,
      outcome: row.outcome,
      detail: row.detail,
    }),
  );
}
