import { randomUUID } from 'node:crypto';
import { DAEMON_ACTOR } from '../access/principal.js';
import type { History } from '../db/history.js';
import { dueAttempts, getRequest, laterAttempts, patchRequest, retryDueAtLocked } from '../db/requests.js';
import type { AttemptPolicy, JobRequestRow } from '../db/schema.js';
import { systemClock } from '../lib/clock.js';
import type { Logger } from '../logger.js';
import type { JobSpec } from '../sched/job-spec.js';
import { type AcceptDeps, accept, type RequestToRecord, recordRequest } from './accept.js';
import { planArrayRetry } from './array-retry.js';
import { nextSpec, type PartitionLimits, retryReason } from './attempt-policy.js';
import { LOST_BEFORE_START_CODE } from './lost-resubmit.js';
import { addFinishedDelivery } from './transition.js';

/**
 * Making the attempts a retry policy asks for. When an attempt ends in a state its policy
 * names, its transition records when the next one is due (`retry_due_at`: the backoff is a
 * time in the history, so a restart neither loses nor shortens it). The pipeline tick calls
 * {@link makeDueAttempts}, which makes each due attempt a new request through `accept`, linked
 * to the first (`first_attempt_id`, `attempt`, `retry_cause`), or, when the next spec would
 * pass a bound, ends the request there: its note says why and its webhook goes out then.
 * Pipeline steps are retried the same way (the new attempt keeps its run, step and needs).
 */

export interface AttemptDeps extends AcceptDeps {
  logger: Logger;
  /** What a profile's partition allows, where known (see docs/http-api.md#retry-policies). */
  partitionLimits?(profile: string, partition: string | null): Promise<PartitionLimits> | PartitionLimits;
}

/** Attempts made a call, at most: the next tick takes the rest. */
const BATCH = 100;

/** Makes (or refuses, with why) every attempt whose backoff is over. Returns what it did. */
export async function makeDueAttempts(
  deps: AttemptDeps,
  now = (deps.clock ?? systemClock).now(),
): Promise<{ made: string[]; ended: string[] }> {
  const { store } = deps;
  const due = await dueAttempts(store, now, BATCH);
  const made: string[] = [];
  const ended: string[] = [];
  for (const row of due) {
    try {
      const next = await makeAttempt(deps, row, now);
      if (next) made.push(next);
      else ended.push(row.id);
    } catch (error) {
      // The row keeps its due time: the next tick tries again.
      deps.logger.warn({ requestId: row.id, err: error }, 'could not make the next attempt');
    }
  }
  return { made, ended };
}

/** The next attempt of an ended one (its id), or null when a bound stops it. */
async function makeAttempt(deps: AttemptDeps, row: JobRequestRow, now: number): Promise<string | null> {
  if (row.errorCode === LOST_BEFORE_START_CODE) return recordAttempt(deps, row, lostAttempt(row, now), now);
  const policy = row.retryPolicy as AttemptPolicy;
  const spec = row.spec as JobSpec;
  const partition = spec.partition ?? null;
  const limits = deps.partitionLimits ? await deps.partitionLimits(row.profile, partition) : {};
  const next = nextSpec(policy, spec, row.state, limits);
  if (next.kind === 'bound') {
    await deps.store.transaction(async (tx) => {
      if (!(await stillDue(tx, row.id))) return;
      await patchRequest(tx, row.id, { retryDueAt: null, retryNote: next.reason, updatedAt: now });
      // The request ends here: its webhook, held back at the end of the attempt, goes out now.
      await addFinishedDelivery(tx, (await getRequest(tx, row.id)) as JobRequestRow, now);
    });
    deps.logger.info({ requestId: row.id, reason: next.reason }, 'retry not made: a bound stops it');
    return null;
  }
  const end = { state: row.state, exitCode: row.exitCode, attempt: row.attempt };
  let input: RequestToRecord = attemptRequest(
    row,
    next.spec,
    {
      previousId: row.id,
      after: row.state,
      exitCode: row.exitCode,
      escalated: next.escalated,
      reason: retryReason(end, next.escalated),
    },
    now,
  );
  if (row.arrayTaskCount !== null) input = await failedTasksOnly(deps.store, row, input);
  return recordAttempt(deps, row, input, now);
}

/**
 * The attempt after one whose job the controller lost before it started (src/requests/lost-resubmit.ts):
 * the same spec, nothing grown, the ended attempt's message (which names the lost job) as its cause.
 */
function lostAttempt(row: JobRequestRow, now: number): RequestToRecord {
  return attemptRequest(
    row,
    row.spec as JobSpec,
    {
      previousId: row.id,
      after: row.state,
      exitCode: row.exitCode,
      escalated: [],
      reason: row.errorMessage ?? 'the controller lost the job before it started: submitted again',
    },
    now,
  );
}

/** Records `input` as the attempt after `row`, while it is still due, and submits it. */
async function recordAttempt(
  deps: AttemptDeps,
  row: JobRequestRow,
  input: RequestToRecord,
  now: number,
): Promise<string | null> {
  // Still due, read and cleared in one transaction: another host's tick, or a cancel withdrawing
  // the attempt, decides on the same row, and only one of them makes (or withdraws) it.
  const recorded = await deps.store.transaction(async (tx) => {
    if (!(await stillDue(tx, row.id))) return false;
    await recordRequest(tx, input);
    await patchRequest(tx, row.id, { retryDueAt: null, nextAttemptId: input.id, updatedAt: now });
    return true;
  });
  if (!recorded) return null;
  // Recorded `queued` in the commit above; accept adds the submit job (a Redis outage leaves
  // it queued for the keeper, as any request).
  await accept(deps, input);
  deps.logger.info(
    {
      requestId: input.id,
      firstAttemptId: input.firstAttemptId,
      attempt: input.attempt,
      reason: input.retryCause?.reason,
    },
    'retry attempt made',
  );
  return input.id;
}

/**
 * A cancel of an attempt that ended and waits out its backoff: the next attempt is withdrawn,
 * and the request ends here (its webhook, held back at the end of the attempt, goes out now).
 * False when no attempt was due.
 */
export function withdrawDueAttempt(h: History, id: string, who: string, now = Date.now()): Promise<boolean> {
  return h.transaction(async (tx) => {
    if (!(await stillDue(tx, id))) return false;
    await patchRequest(tx, id, {
      retryDueAt: null,
      retryNote: `next attempt withdrawn: cancelled by ${who}`,
      updatedAt: now,
    });
    await addFinishedDelivery(tx, (await getRequest(tx, id)) as JobRequestRow, now);
    return true;
  });
}

/**
 * Whether the request's next attempt is still due, its row locked until the caller's transaction
 * ends (on PostgreSQL: a second host's tick or a cancel waits, then finds it no longer due).
 * Its due time alone: not the spec, which may be large.
 */
async function stillDue(tx: History, id: string): Promise<boolean> {
  return (await retryDueAtLocked(tx, id)) != null;
}

/**
 * The next attempt of `row` as a request: the same profile, name, webhook, deadlines, summary
 * setting and policy (and, for a step, its run, step and needs), with the spec given, one
 * attempt more, linked to the first.
 */
export function attemptRequest(
  row: JobRequestRow,
  spec: JobSpec,
  cause: NonNullable<RequestToRecord['retryCause']>,
  at: number,
): RequestToRecord & { attempt: number; firstAttemptId: string } {
  return {
    id: randomUUID(),
    profile: row.profile,
    name: row.name,
    spec,
    origin: row.origin,
    owner: row.owner,
    actor: DAEMON_ACTOR,
    at,
    source: 'retry',
    ...(row.runId !== null && { runId: row.runId }),
    ...(row.step !== null && { step: row.step }),
    ...(row.needs !== null && { needs: row.needs }),
    attempt: row.attempt + 1,
    // A step's retry belongs to the same attempt of its run as the attempt it follows.
    runAttempt: row.runAttempt,
    webhookUrl: row.webhookUrl,
    deadlines: row.deadlines,
    summarize: row.summarize,
    retryPolicy: row.retryPolicy,
    firstAttemptId: row.firstAttemptId ?? row.id,
    retryCause: cause,
  };
}

/** Every attempt of the request `id` belongs to, first to last. */
export async function attemptsOf(h: History, id: string): Promise<JobRequestRow[]> {
  const row = await getRequest(h, id);
  if (!row) return [];
  const first = row.firstAttemptId ?? row.id;
  const later = await laterAttempts(h, first);
  if (later.length === 0) return [row];
  const firstRow = first === row.id ? row : await getRequest(h, first);
  return firstRow ? [firstRow, ...later] : later;
}

/**
 * An array's next attempt runs only the tasks that did not complete (as `jobs retry-tasks`
 * does by hand), with whatever the policy escalated, linked to the array it retries.
 */
async function failedTasksOnly(h: History, ended: JobRequestRow, next: RequestToRecord): Promise<RequestToRecord> {
  const { array } = await planArrayRetry(h, ended.id);
  return { ...next, spec: { ...(next.spec as Record<string, unknown>), array }, arrayRetryOf: ended.id };
}
