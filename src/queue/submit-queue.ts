import type { JobsOptions, Queue } from 'bullmq';
import { z } from 'zod';
import { type Clock, systemClock } from '../lib/clock.js';
import type { Logger } from '../logger.js';
import type { SubmitFairShare } from './fair-share.js';

/**
 * The submit queue's producer: the one place a submit job is made. Its payload and retry policy
 * are here rather than in the queue's definition (workers/submit.ts, which uses them) because
 * the layers below the workers queue submissions: src/requests/accept.ts through this file.
 */

export const submitPayloadSchema = z.object({
  requestId: z.string().min(1),
});
export type SubmitPayload = z.input<typeof submitPayloadSchema>;

/** Submits retry for about an hour of upstream trouble (12 attempts, exponential from 2 s). */
export const SUBMIT_JOB_OPTIONS: JobsOptions = {
  attempts: 12,
  backoff: { type: 'exponential', delay: 2000, jitter: 0.5 },
  removeOnComplete: { age: 24 * 3600, count: 1000 },
  removeOnFail: { age: 7 * 24 * 3600 },
};

/** A request to queue, and whose it is (the fair share between owners orders by it). */
export interface SubmitJobOf {
  requestId: string;
  owner: string;
}

/**
 * Adds the submit jobs of requests now, in this order, waiting for Redis as long as it takes
 * (the relay's re-add, src/queue/history-relay.ts). The job id is the request id: adding twice
 * is a no-op. With `fairShare`, each job's priority is its owner's next round
 * (src/queue/fair-share.ts), so owners are served in turn; without, first come, first served.
 */
export async function queueSubmitJobs(
  queue: Queue,
  fairShare: SubmitFairShare | undefined,
  jobs: readonly SubmitJobOf[],
): Promise<unknown> {
  const priorities = fairShare ? await fairShare.priorities(jobs.map((job) => job.owner)) : [];
  const bulk = jobs.map(({ requestId }, i) => ({
    name: 'submit',
    data: { requestId },
    opts: { jobId: requestId, ...(priorities[i] !== undefined && { priority: priorities[i] }) },
  }));
  const [only] = bulk;
  return bulk.length === 1 && only ? queue.add(only.name, only.data, only.opts) : queue.addBulk(bulk);
}

/**
 * How long a producer (the local API, a pipeline run, a re-submit) waits for Redis to take a
 * submit job. Past it the request stays recorded as `queued` and is queued by the
 * {@link QueueKeeper} once Redis answers: an API call never hangs on a Redis outage.
 */
export const ENQUEUE_WAIT_MS = 500;
/** After an add that did not get through in time, later ones do not wait either, for this long. */
const HOLD_AFTER_LATE_MS = 5000;

export interface SubmitQueueDeps {
  queue: Queue;
  /** Serves owners in turn (src/queue/fair-share.ts); unset: first come, first served. */
  fairShare?: SubmitFairShare;
  logger: Logger;
  /** False while Redis is known to be unreachable: nothing is sent, the keeper queues it later. */
  redisReachable(): boolean;
  /**
   * Asks the keeper to queue at its next check the jobs left to it (in acceptance order), or,
   * without any, to look for every recorded request without a job.
   */
  sweepLater(left?: readonly SubmitJobOf[]): void;
  /**
   * True while the keeper has jobs to put back or jobs left to it: a job added now would take
   * its owner's next round ahead of theirs, so it is left to the keeper too, which adds it after
   * them (each owner's requests keep their order). @defaultValue never
   */
  keeperBehind?(): boolean;
  /**
   * Set when an add did not get through in time (a frozen Redis says nothing): until then the
   * next ones are left to the keeper, so a pipeline of many steps does not wait for each.
   */
  holdUntil?: number;
  /** When a hold ends. @defaultValue systemClock */
  clock?: Clock;
  /** How long an add may take before it is left to the keeper. @defaultValue ENQUEUE_WAIT_MS */
  enqueueWaitMs?: number;
}

export type EnqueueOutcome = 'queued' | 'deferred';

/**
 * Adds the submit job of a request recorded as `queued` (src/requests/accept.ts writes that
 * first, so the worker that takes the job always finds it). The job id is the request id:
 * adding twice is a no-op, so the keeper's sweep can redo this after a crash between the two
 * steps, or after Redis lost its data. Never waits on Redis longer than its enqueueWaitMs.
 */
export function addSubmitJob(deps: SubmitQueueDeps, job: SubmitJobOf): Promise<EnqueueOutcome> {
  return addSubmitJobs(deps, [job]);
}

/** {@link addSubmitJob} for several requests, in one round trip to Redis for their jobs (addBulk). */
export async function addSubmitJobs(deps: SubmitQueueDeps, jobs: readonly SubmitJobOf[]): Promise<EnqueueOutcome> {
  const { logger } = deps;
  if (
    !deps.redisReachable() ||
    (deps.clock ?? systemClock).now() < (deps.holdUntil ?? 0) ||
    deps.keeperBehind?.() === true
  ) {
    deps.sweepLater(jobs);
    return 'deferred';
  }
  const requestIds = jobs.map((job) => job.requestId);
  const added = queueSubmitJobs(deps.queue, deps.fairShare, jobs);
  // Commands wait in ioredis's offline queue while it reconnects: one that outlives the wait
  // below may still land later (harmlessly, by its job id), or fail with the connection.
  const settled = added.then(
    () => 'queued' as const,
    (error: Error) => error,
  );
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), deps.enqueueWaitMs ?? ENQUEUE_WAIT_MS);
  });
  const outcome = await Promise.race([settled, waited]).finally(() => clearTimeout(timer));
  if (outcome === 'queued') return 'queued';
  // Not handed to the keeper as left: this add may still land, and only a look at the queue
  // tells whether it did (adding its job again would spend its owner's turn a second time).
  deps.sweepLater();
  const which = requestIds.length === 1 ? { requestId: requestIds[0] } : { requestIds };
  if (outcome === 'late') {
    deps.holdUntil = (deps.clock ?? systemClock).now() + HOLD_AFTER_LATE_MS;
    logger.warn(which, 'Redis did not take the submit job in time: the request is queued once Redis answers');
  } else {
    logger.warn({ ...which, err: outcome }, 'Redis refused the submit job: the request is queued at the next check');
  }
  return 'deferred';
}
