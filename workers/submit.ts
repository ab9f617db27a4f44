import { type Job, type Queue, UnrecoverableError } from 'bullmq';
import type { History } from '../src/db/history.js';
import {
  getRequest,
  patchRequest,
  requestProfileOf,
  submitGiveUpFactsOf,
  unsubmittedRequests,
} from '../src/db/requests.js';
import type { JobRequestRow } from '../src/db/schema.js';
import { type ErrorCode, SubmissionRefusedError } from '../src/errors.js';
import { type Clock, systemClock } from '../src/lib/clock.js';
import type { Logger } from '../src/logger.js';
import { stepDependencies } from '../src/pipelines/run-engine.js';
import type { SubmitFairShare } from '../src/queue/fair-share.js';
import { HistoryRelay } from '../src/queue/history-relay.js';
import type { JobContext, QueueDefinition, QueueProcessor } from '../src/queue/queue-definition.js';
import { queueSubmitJobs, SUBMIT_JOB_OPTIONS, submitPayloadSchema } from '../src/queue/submit-queue.js';
import { isTerminalRequest } from '../src/requests/request-state.js';
import {
  submitRequest,
  WaitingForDependencyError,
  WaitingForReleaseError,
  WaitingForSubmitLimitError,
} from '../src/requests/submitter.js';
import { transition } from '../src/requests/transition.js';
import type { QueueSettings, WorkerServices } from './services.js';

const PROFILE_NOT_CONNECTED: ErrorCode = 'SCHEDFLOW_ERR_PROFILE_NOT_CONNECTED';
const PROFILE_UNUSABLE: ErrorCode = 'SCHEDFLOW_ERR_PROFILE_UNUSABLE';

/** Steps are submitted right behind the steps they need: a wait for a job id is short. */
const DEPENDENCY_RECHECK_MS = 250;
/**
 * A request held before submission is looked at again this often: a hold may last hours, and one
 * read of its row every 2 s costs little; a release is acted on within it.
 */
const HOLD_RECHECK_MS = 2000;

/**
 * The `submit` queue: submits a recorded request once (the marker makes a second attempt find
 * the first's job). Its producer, payload and retry policy are src/queue/submit-queue.ts's (the
 * door, src/requests/accept.ts, queues through it); its relay is {@link requeueUnsubmitted}.
 */
export const submitQueue: QueueDefinition<QueueSettings, WorkerServices, 'submit'> = {
  name: 'submit',
  jobOptions: () => SUBMIT_JOB_OPTIONS,
  workerOptions: ({ config, profileConnections }) => ({
    concurrency: config.submitConcurrency ?? defaultSubmitConcurrency(profileConnections),
    // A submit whose worker died is taken up again once its lock expires (found within about two
    // lock durations). Running it again is safe (the marker), so a few crashes in a row do not
    // fail the request.
    lockDuration: config.lockDurationMs,
    stalledInterval: config.lockDurationMs,
    maxStalledCount: 5,
  }),
  // Nothing went wrong with a submit the shutdown cut short: the next process takes it at once.
  handedBackDelayMs: 0,
  processor: (services) => submitProcessor(services),
  givenUp: (services, job, error) => recordSubmitGivenUp(services.store, services.logger, job, error, services.clock),
};

/**
 * Submissions in flight when SCHEDFLOW_SUBMIT_CONCURRENCY is unset: 4 per connection the
 * profiles have (a submission holds one for its POST, about half of its turn), at least 16 and
 * at most 128: each one taken is one more that another owner's request may wait behind (fair
 * share, docs/fair-share.md), whichever profile it is for.
 */
export function defaultSubmitConcurrency(profileConnections: number): number {
  return Math.min(128, Math.max(16, 4 * profileConnections));
}

/** Submits a recorded request once (src/requests/accept.ts recorded it and queued it). */
function submitProcessor(services: WorkerServices): QueueProcessor {
  return async (job: Job, ctx: JobContext): Promise<string> => {
    const payload = submitPayloadSchema.parse(job.data);
    const { store, logger } = services;
    // Read once, here: submitRequest is given the row.
    const row = await getRequest(store, payload.requestId);
    if (row === undefined) throw new UnrecoverableError(`no job request ${payload.requestId}`);
    // A profile whose check failed (its url, token, flavor or version; src/sched/profile-check.ts):
    // the door refuses new requests for it, and one queued before waits, saying why on the request
    // (its error, shown by `jobs submit --wait`, the API and the UI), without spending an attempt.
    // It goes as soon as the profile connects: the daemon takes the delayed jobs of a profile that
    // connects at once (promoteDelayedSubmits), so no backoff outlasts the fix, or a restart.
    const problem = services.clients.problem(row.profile);
    if (problem && !isTerminalRequest(row.state) && row.jobId === null) {
      const errorCode = problem.kind === 'unreachable' ? PROFILE_NOT_CONNECTED : PROFILE_UNUSABLE;
      if (row.errorMessage !== problem.sentence) {
        await patchRequest(store, row.id, { errorCode, errorMessage: problem.sentence });
      }
      return ctx.putOff(services.settings.pollCeilingMs);
    }
    services.submitsInFlight?.add(payload.requestId);
    try {
      return await submitRequest(
        {
          store,
          client: services.clients.get(row.profile),
          logger,
          signal: services.shutdown,
          stepDependency: stepDependencies,
          clock: services.clock,
          lostResubmits: services.settings.lostResubmits,
        },
        payload.requestId,
        row,
      );
    } catch (error) {
      // Refused for good (403, Slurm refusal, bad spec): failed in the history, no more attempts.
      if (error instanceof SubmissionRefusedError) throw new UnrecoverableError(error.message);
      // Aborted by the daemon's shutdown (after the grace period): handed back to the queue
      // without spending one of its attempts, since nothing went wrong with it. The request stays
      // `submitting`, so the next attempt looks its marker up before submitting again.
      if (services.shutdown.aborted) {
        services.logger.info({ requestId: payload.requestId }, 'submit interrupted by the shutdown; handed back');
        return await ctx.handBack();
      }
      // A step whose needed steps are not submitted yet: look again shortly, without spending an attempt.
      if (error instanceof WaitingForDependencyError) {
        return await ctx.putOff(DEPENDENCY_RECHECK_MS);
      }
      // Held before submission (kept back until released), or its spec changed while read: as a
      // step waiting for another, looked at again shortly, without spending an attempt.
      if (error instanceof WaitingForReleaseError) {
        return await ctx.putOff(HOLD_RECHECK_MS);
      }
      // Held by a submit limit: only the first in line asks Slurm again, once per recheck period;
      // the others only look whether they are first yet.
      if (error instanceof WaitingForSubmitLimitError) {
        return await ctx.putOff(services.settings.submitLimitRecheckMs);
      }
      throw error;
    } finally {
      services.submitsInFlight?.delete(payload.requestId);
    }
  };
}

/**
 * A submit the queue has given up on (attempts spent, or unrecoverable) fails its request, so no
 * request waits forever in `submitting`; a refusal the submitter recorded is left as it is.
 */
async function recordSubmitGivenUp(
  h: History,
  logger: Logger,
  job: Job,
  error: Error,
  clock: Clock = systemClock,
): Promise<void> {
  const parsed = submitPayloadSchema.safeParse(job.data);
  if (!parsed.success) return;
  const { requestId } = parsed.data;
  const message = `gave up after ${job.attemptsMade} submit attempt(s): ${error.message}`;
  // Read and failed in one transaction, the row locked: another attempt (a requeue, another
  // host's worker) may have submitted it since, and a request with a job must not be failed.
  const failed = await h.transaction(async (tx) => {
    const row = await submitGiveUpFactsOf(tx, requestId);
    if (!row || row.jobId !== null || isTerminalRequest(row.state)) return false;
    return transition(tx, requestId, {
      to: 'submit_failed',
      source: 'submit',
      at: clock.now(),
      detail: message,
      patch: { errorMessage: row.errorMessage ?? error.message },
    });
  });
  if (failed) logger.error({ requestId, attempts: job.attemptsMade, err: error }, 'submit given up');
}

/**
 * The submit queue's relay: queues again every request accepted but not submitted, at start
 * (after a stop or a crash between recording a request and queueing it) and whenever Redis may
 * have lost jobs (restarted empty, or an add that did not get through). The job id is the
 * request id, so a request already waiting is not queued twice; one whose BullMQ job failed
 * without reaching the history (a crash, or stalls beyond the limit) is retried rather than left
 * behind. `busy` names requests an attempt of this process is submitting right now: their job
 * may be gone from Redis, but queueing them again would start a second attempt beside the
 * first. For the same reason a request whose POST started less than `recentMs` ago is left for
 * a later sweep (counted in `deferred`): the attempt may be another process's, still waiting
 * for its answer, and an attempt that lasts longer than its lock is taken for stalled by BullMQ
 * anyway.
 */
export async function requeueUnsubmitted(
  h: History,
  queue: Queue,
  logger: Logger,
  busy: ReadonlySet<string> = new Set(),
  recentMs = 0,
  /** The daemon's clock: what "recent" is measured against. @defaultValue systemClock */
  clock: Clock = systemClock,
  /** Owners served in turn (src/queue/fair-share.ts); unset: first come, first served. */
  fairShare?: SubmitFairShare,
): Promise<{ requeued: number; deferred: number }> {
  const now = clock.now();
  const relay = new HistoryRelay<JobRequestRow>({
    queue,
    // Oldest first: after Redis lost its jobs, each owner's requests get their rounds again in
    // the order they were accepted, and owners are interleaved as they were.
    pending: async () => (await unsubmittedRequests(h)).sort((a, b) => a.createdAt - b.createdAt),
    idOf: (row) => row.id,
    hold(row) {
      if (busy.has(row.id)) return 'skip';
      if (row.submitAttemptAt !== null && now - row.submitAttemptAt < recentMs) return 'defer';
      return null;
    },
    async failed(_row, job) {
      await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
      return true;
    },
    async beforeAdd(row) {
      // Recorded but never queued (a crash between the two): it gets its `queued` first, as
      // every request does before its job exists. Only from `accepted`, read before the awaits
      // on Redis: whatever moved it since knows better.
      if (row.state === 'accepted') {
        await transition(h, row.id, { to: 'queued', source: 'submit', at: clock.now(), from: 'accepted' });
      }
    },
    add: (requestId, row) => queueSubmitJobs(queue, fairShare, [{ requestId, owner: row.owner }]),
  });
  const { queued: requeued, deferred } = await relay.run(now);
  if (requeued > 0) logger.info({ requeued }, 'queued unsubmitted requests again');
  return { requeued, deferred };
}

/**
 * Takes up now the delayed submit jobs of `profile`'s requests (of every profile: null): at
 * start, and when a profile connects once fixed or back. A submit put off while its profile
 * could not work, or by BullMQ's backoff after failed attempts (up to an hour apart), is kept in
 * Redis with its delay across a restart: a request queued under a mistyped url waited minutes
 * more after the url was fixed and the daemon restarted (issue 31). One whose profile still
 * cannot work says why on the request and waits again. Jobs waiting for a submit limit or a
 * step's dependency are taken up too; they look and put themselves off again, at a read's cost.
 */
export async function promoteDelayedSubmits(
  h: History,
  queue: Queue,
  profile: string | null,
  logger: Logger,
): Promise<number> {
  let promoted = 0;
  for (const job of await queue.getDelayed()) {
    const parsed = submitPayloadSchema.safeParse(job.data);
    if (!parsed.success) continue;
    if (profile !== null) {
      const of = await requestProfileOf(h, parsed.data.requestId);
      if (of !== profile) continue;
    }
    try {
      await job.promote();
      promoted++;
    } catch {
      // Moved meanwhile (a worker took it, or it was promoted by another process): nothing to do.
    }
  }
  if (promoted > 0) logger.info({ profile, promoted }, 'took up delayed submissions');
  return promoted;
}
