import { randomUUID } from 'node:crypto';
import { DEFAULT_OWNER } from '../access/principal.js';
import { checkTokenAdmission, profileRefusal, tokenNameOfActor } from '../access/quota.js';
import { type AuditEntry, appendAudit } from '../db/audit.js';
import type { History } from '../db/history.js';
import { lockTokenQuotas } from '../db/quotas.js';
import { requestStateAndOwnerOf } from '../db/request-owner.js';
import { insertRequest, type NewRequest, requestStateOf } from '../db/requests.js';
import type { AttemptPolicy, Deadlines, RetryCause, TransitionSource } from '../db/schema.js';
import { commitEach, type Outcome } from '../db/shared-commit.js';
import { AdmissionRefusedError } from '../errors.js';
import { type Clock, systemClock } from '../lib/clock.js';
import { addSubmitJob, addSubmitJobs, type EnqueueOutcome, type SubmitQueueDeps } from '../queue/submit-queue.js';
import { parseArrayExpression, taskCountOf } from '../sched/job-array.js';
import type { JobSpec } from '../sched/job-spec.js';
import { pendingMoveOf } from './pending-move.js';
import { transition } from './transition.js';

/**
 * Accepting a job request, the one way in for the local API, the CLI (through its submit job),
 * pipeline steps and re-submissions: the request is recorded (`accepted`, then `queued`), then
 * its submit job is added. A new way to submit calls these; a change to acceptance is made here.
 */

export interface RequestToRecord extends NewRequest {
  /** A summary when it ends: true or false; null or absent follows the global setting. */
  summarize?: boolean | null;
  /** The request whose summary's suggestion this one applies. */
  resubmitOf?: string | null;
  /** The array request whose tasks this one runs again (src/requests/array-retry.ts). */
  arrayRetryOf?: string | null;
  /** Its retry policy (src/requests/attempt-policy.ts): ends it names make new attempts. */
  retryPolicy?: AttemptPolicy | null;
  /** A retry: the request's first attempt, and why this one was made (src/requests/attempts.ts). */
  firstAttemptId?: string | null;
  retryCause?: RetryCause | null;
  /**
   * Who moves it to `queued`, and when, in the same commit as the row; null leaves it
   * `accepted` (steps recorded with their run, a re-submission with its summary's mark) for
   * {@link enqueueAccepted} to queue. @defaultValue the acceptance's source and time
   */
  queued?: { source: TransitionSource; at: number } | null;
  /**
   * The audit row of the action that makes it (a submission's `request.accept`, a retry of
   * tasks): written in the commit that makes the row, only then.
   */
  audit?: AuditEntry | null;
}

/**
 * Records a request in one transaction (a savepoint when `h` is a transaction's): its row and
 * `accepted`, its summary setting and link, and `queued` (see `queued`). A second call with
 * the same id changes nothing but an `accepted` left by a crash. True when it made the row.
 * Reads the state alone, never the row: a spec is read and parsed whole, and two such reads
 * cost a submission a third more of the daemon's CPU.
 */
export function recordRequest(h: History, input: RequestToRecord): Promise<boolean> {
  return h.transaction(async (tx) => {
    const existing = await requestStateOf(tx, input.id);
    const queued = input.queued === undefined ? { source: input.source, at: input.at } : input.queued;
    if (existing === undefined) {
      // An array's task count, not its tasks: a task's row is made when the scheduler reports the
      // task (src/requests/array-poll.ts), so nothing here grows with the array. Writing a row per
      // index up front wrote 4 million rows (1.46 GB) for an array slurmctld then refused
      // (issue 30). The expression was checked where the spec came in (jobSpecSchema) and its
      // size at the door (src/requests/door.ts), so counting it is bounded.
      const expression = (input.spec as { array?: unknown } | null)?.array;
      const taskCount = typeof expression === 'string' ? taskCountOf(parseArrayExpression(expression)) : null;
      // A token's binding and quotas (src/access/quota.ts), counted in this transaction under the
      // token's lock, so requests recorded at the same time never pass a quota together; a
      // refusal throws, and nothing of the request is written. A run's steps are the run's.
      const tokenName = quotaTokenOf(input);
      if (tokenName !== null) {
        await lockTokenQuotas(tx, [tokenName]);
        await checkTokenAdmission(tx, { tokenName, profile: input.profile, at: input.at });
      }
      // Written `queued` at once (with both transitions): the move has nothing to check on a new row.
      // Another host may record the same id meanwhile (the web role and the worker that takes
      // its job): the first insert makes the request, the other changes nothing.
      // A move's new attempt carries the move on (src/requests/pending-mover.ts); any other request
      // starts from its spec's on_pending, with its first move ahead of it.
      const pendingMove = input.pendingMove ?? pendingMoveOf(input.spec as JobSpec);
      if (!(await insertRequest(tx, { ...input, arrayTaskCount: taskCount, pendingMove }, queued ?? undefined))) {
        return false;
      }
      if (input.audit) await appendAudit(tx, input.audit);
    } else if (queued && existing === 'accepted') {
      await transition(tx, input.id, { to: 'queued', source: queued.source, at: queued.at });
    }
    return existing === undefined;
  });
}

/** The token whose quotas a new request counts against: its actor's, unless it is a run's step. */
function quotaTokenOf(input: RequestToRecord): string | null {
  return input.actor === null || input.runId !== undefined ? null : tokenNameOfActor(input.actor);
}

export interface AcceptDeps {
  store: History;
  /** The `submit` queue, with its Redis-outage behaviour (src/queue/submit-queue.ts). */
  submitQueue: SubmitQueueDeps;
  /** The daemon's clock: when transitions happen. @defaultValue systemClock */
  clock?: Clock;
}

/**
 * Queues the submission of a recorded request: `accepted` moves to `queued` first (so the
 * worker that takes the job always finds it), then the submit job is added. A Redis outage
 * answers within ENQUEUE_WAIT_MS: the request stays `queued` and the keeper adds its job.
 */
export async function enqueueAccepted(
  deps: AcceptDeps,
  requestId: string,
  source: TransitionSource,
): Promise<EnqueueOutcome> {
  const request = await requestStateAndOwnerOf(deps.store, requestId);
  if (request?.state === 'accepted') {
    // Only from `accepted`: a request moved on meanwhile (by another process) is left as it is.
    await transition(deps.store, requestId, {
      to: 'queued',
      source,
      at: (deps.clock ?? systemClock).now(),
      from: 'accepted',
    });
  }
  return addSubmitJob(deps.submitQueue, { requestId, owner: request?.owner ?? DEFAULT_OWNER });
}

/**
 * Records a request (`accepted` and `queued` in one commit), then adds its submit job; resolves
 * once both are done, so a caller that answers after it answers for a request that is on disk.
 *
 * Requests accepted in the same turn of the event loop (the local API's clients, a pipeline's
 * steps) share one commit and one round trip to Redis (addBulk): a commit and an add each were
 * a fifth of what a submission cost the daemon (issue 14). Each request is recorded in a
 * savepoint of its own, so one that fails fails alone.
 */
export function accept(deps: AcceptDeps, input: RequestToRecord): Promise<EnqueueOutcome> {
  let batch = batches.get(deps.submitQueue);
  if (!batch || batch.store !== deps.store) {
    batch = { store: deps.store, waiting: [] };
    batches.set(deps.submitQueue, batch);
  }
  const { waiting } = batch;
  if (waiting.length === 0) setImmediate(() => void acceptBatch(deps, waiting.splice(0)));
  return new Promise((resolve, reject) => waiting.push({ input, resolve, reject }));
}

interface Waiting {
  input: RequestToRecord;
  resolve(outcome: EnqueueOutcome): void;
  reject(error: unknown): void;
}

/** Acceptances waiting for the next turn, per submit queue (one per daemon, more in tests). */
const batches = new WeakMap<SubmitQueueDeps, { store: History; waiting: Waiting[] }>();

async function acceptBatch(deps: AcceptDeps, waiting: Waiting[]): Promise<void> {
  let outcomes: Outcome<boolean>[];
  try {
    outcomes = await deps.store.transaction(async (tx) => {
      // Every token's quota lock first, in name order (src/db/quotas.ts): taken one by one as
      // the requests come, two commits holding one token each could wait for each other.
      await lockTokenQuotas(
        tx,
        waiting.flatMap((one) => quotaTokenOf(one.input) ?? []),
      );
      return commitEach(
        tx,
        waiting.map((one) => (tx: History) => recordRequest(tx, one.input)),
      );
    });
  } catch (error) {
    // The commit itself failed: none of them is recorded.
    for (const one of waiting) one.reject(error);
    return;
  }
  const recorded = waiting.filter((one, i) => {
    const outcome = outcomes[i] as Outcome<boolean>;
    if (!outcome.ok) one.reject(outcome.error);
    return outcome.ok;
  });
  // Also for the same id again: the job id is the request id, so a job already there is kept,
  // and one that ran finds its request submitted and stops.
  const jobs = recorded.map(({ input }) => ({ requestId: input.id, owner: input.owner }));
  try {
    const outcome = await addSubmitJobs(deps.submitQueue, jobs);
    for (const one of recorded) one.resolve(outcome);
  } catch (error) {
    for (const one of recorded) one.reject(error);
  }
}

/** A job request as the local API (and tests) hand it to the daemon. */
export interface JobSubmission {
  /** @defaultValue the daemon's first profile */
  profile?: string;
  spec: JobSpec;
  origin: 'api' | 'cli' | 'pipeline';
  /** Whose it is, and who asks (src/access/principal.ts). */
  owner: string;
  actor: string;
  /** @defaultValue a new UUID */
  requestId?: string;
  /** POSTed, signed, when the request ends. */
  webhookUrl?: string | null;
  deadlines?: Deadlines | null;
  /** A summary when it ends: true or false; null or absent follows the global setting. */
  summarize?: boolean | null;
  /** Its retry policy, already checked against the spec (policyIssues). */
  retryPolicy?: AttemptPolicy | null;
  /** The id of the HTTP request that asked, for the audit log. */
  httpRequestId?: string | null;
  /**
   * The profiles the asking token is bound to (null: any), refused before anything else is
   * checked; its quotas are counted when the request is recorded (src/access/quota.ts).
   */
  allowedProfiles?: readonly string[] | null;
}

/** Accepts a submission for one of `profiles`; returns the request id. */
export async function acceptSubmission(
  deps: AcceptDeps & {
    profiles: ReadonlyMap<string, unknown>;
    defaultProfile: string;
    /** Why the profile cannot take the job (another account, a missing scope): refused before anything is recorded. */
    refusal?(profile: string, spec: JobSpec): Error | null;
  },
  input: JobSubmission,
): Promise<string> {
  const profile = input.profile ?? deps.defaultProfile;
  if (!deps.profiles.has(profile)) throw new Error(`no scheduler profile "${profile}"`);
  const at = (deps.clock ?? systemClock).now();
  const tokenName = tokenNameOfActor(input.actor);
  // The token's binding first (the default profile counts when none is named): the door's other
  // refusals are about a profile it may not use anyway.
  const binding = tokenName === null ? null : profileRefusal(tokenName, input.allowedProfiles ?? null, profile);
  if (binding) {
    await auditRefusal(deps.store, input, at, binding);
    throw binding;
  }
  const refused = deps.refusal?.(profile, input.spec);
  if (refused) throw refused;
  const id = input.requestId ?? randomUUID();
  const source = input.origin === 'cli' ? 'cli' : 'api';
  await accept(deps, {
    id,
    profile,
    name: input.spec.name,
    spec: input.spec,
    origin: input.origin,
    owner: input.owner,
    actor: input.actor,
    at,
    source,
    webhookUrl: input.webhookUrl ?? null,
    deadlines: input.deadlines ?? null,
    summarize: input.summarize,
    retryPolicy: input.retryPolicy ?? null,
    audit: {
      at,
      actor: input.actor,
      owner: input.owner,
      action: 'request.accept',
      target: `request:${id}`,
      outcome: 'ok',
      httpRequestId: input.httpRequestId ?? null,
      detail: `profile ${profile}`,
    },
  }).catch(async (error: unknown) => {
    // A binding or quota refused in the recording transaction: nothing of the request was
    // written; the refusal is, alone.
    if (error instanceof AdmissionRefusedError) await auditRefusal(deps.store, input, at, error);
    throw error;
  });
  return id;
}

/** The `refused` audit row of a submission a token's binding or quota turned away, in a transaction of its own. */
function auditRefusal(h: History, input: JobSubmission, at: number, error: AdmissionRefusedError): Promise<void> {
  return appendAudit(h, {
    at,
    actor: input.actor,
    owner: input.owner,
    action: 'request.accept',
    target: null,
    outcome: 'refused',
    httpRequestId: input.httpRequestId ?? null,
    detail: `${error.code}: ${error.message}`,
  });
}
