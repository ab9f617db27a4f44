import type { History } from '../db/history.js';
import {
  getRequest,
  hasActiveJob,
  patchRequest,
  requestByJobId,
  submitLimitQueueAhead,
  transitionFactsOf,
} from '../db/requests.js';
import type { JobRequestRow } from '../db/schema.js';
import { inSharedCommit } from '../db/shared-commit.js';
import { InvalidJobSpecError, SchedflowError, SubmissionRefusedError } from '../errors.js';
import { type Clock, systemClock } from '../lib/clock.js';
import { issuesText } from '../lib/issues-text.js';
import type { Logger } from '../logger.js';
import type { SchedClient } from '../sched/client.js';
import type { SchedJob } from '../sched/job-model.js';
import { type JobSpec, jobSpecSchema } from '../sched/job-spec.js';
import { outputPathsOf } from '../sched/output-paths.js';
import { SubmitLimitError } from '../sched/sched-errors.js';
import { jobIdentity } from './job-identity.js';
import { askLostJobRecords, UNKNOWN_ACCOUNTING } from './lost-evidence.js';
import { DEFAULT_LOST_RESUBMITS } from './lost-resubmit.js';
import { withOutputsFile } from './outputs-file.js';
import { isTerminalRequest } from './request-state.js';
import { claimJobId, transition } from './transition.js';

export interface SubmitDeps {
  store: History;
  client: SchedClient;
  logger: Logger;
  signal?: AbortSignal;
  /**
   * The Slurm dependency a pipeline step is submitted with, from its run's other steps
   * (src/pipelines/run-engine.ts's stepDependencies): pipelines sit above requests, so it is given.
   */
  stepDependency(h: History, row: JobRequestRow): Promise<DependencyResolution>;
  /** When transitions and submissions happen. @defaultValue systemClock */
  clock?: Clock;
  /**
   * How many times a request whose job the controller lost before it started is submitted again
   * (src/requests/lost-resubmit.ts): a submission whose answer is a lost job's id ends that job's
   * request. @defaultValue 1
   */
  lostResubmits?: number;
}

/** How a step's needs stand: submit (with this Slurm dependency), wait for a job id, or never. */
export type DependencyResolution =
  | { kind: 'ready'; dependency: string | null }
  | { kind: 'wait'; on: string }
  | { kind: 'never'; detail: string };

/** A pipeline step whose needed steps have no job id yet: try again shortly, it is not a failure. */
export class WaitingForDependencyError extends Error {
  override name = 'WaitingForDependencyError';
}

/**
 * A request held before submission (src/requests/job-control.ts), or whose spec changed while
 * this attempt read it: kept back, looked at again shortly; not a failure, no attempt spent.
 */
export class WaitingForReleaseError extends Error {
  override name = 'WaitingForReleaseError';
}

/**
 * A request held back by a submit limit (Slurm error 2050), or queued behind requests that
 * are: not a failure. `head` is the first in line, which alone asks Slurm again.
 */
export class WaitingForSubmitLimitError extends Error {
  override name = 'WaitingForSubmitLimitError';
  constructor(
    message: string,
    readonly head: boolean,
  ) {
    super(message);
  }
}

/** The request ended (cancelled, say) before its first POST: nothing was sent. */
class NotSubmittedError extends Error {
  override name = 'NotSubmittedError';
}

/**
 * Submits one request, at most once upstream. BullMQ may run this again after a
 * crash; a request whose earlier attempt may have reached the scheduler (state
 * `submitting`) is first looked up by its marker and adopted if found.
 */
export async function submitRequest(
  deps: SubmitDeps,
  requestId: string,
  /** The request's row, when the caller has just read it (one read less per submission). */
  current?: JobRequestRow,
): Promise<'submitted' | 'skipped'> {
  const { store, client, logger } = deps;
  const clock = deps.clock ?? systemClock;
  const row = current ?? (await getRequest(store, requestId));
  if (!row) throw new SubmissionRefusedError('SCHEDFLOW_ERR_NOT_FOUND', `no job request ${requestId} in the history`);
  if (row.jobId !== null || isTerminalRequest(row.state)) return 'skipped';
  // Held before submission: kept back until released (not one whose attempt may have made a job).
  if (row.heldAt !== null && row.state !== 'submitting') {
    throw new WaitingForReleaseError(`held by ${row.heldBy ?? 'someone'}: submitted once released`);
  }

  let dependency: string | null = null;
  if (row.runId !== null && row.needs?.length) {
    const resolution = await deps.stepDependency(store, row);
    if (resolution.kind === 'wait') throw new WaitingForDependencyError(`waiting for step "${resolution.on}"`);
    if (resolution.kind === 'never') {
      // What Slurm would do with the job (kill_invalid_depend), without submitting it. Only from
      // the state read: a submission that has moved it since may have made its job.
      await transition(store, requestId, {
        to: 'cancelled',
        source: 'pipeline',
        at: clock.now(),
        reason: 'DependencyNeverSatisfied',
        detail: `not submitted: ${resolution.detail}`,
        from: row.state,
      });
      return 'skipped';
    }
    dependency = resolution.dependency;
  }

  // An attempt whose outcome is unknown (a crash while it was in flight, or a lost answer no
  // lookup could settle): the job may exist. submitAttemptAt is set only while that is so: just
  // before each POST, and cleared when nothing can have been made (a 429, a refusal before
  // slurmctld, a lookup that found nothing), so a retry after a definite refusal does not pay
  // for a lookup (issue 13, weak spot 3). A request held by a submit limit is tried again
  // without leaving `waiting`, so its timeline does not grow with every try.
  const earlierAttempt = row.state === 'submitting' || row.state === 'waiting' ? row.submitAttemptAt : null;

  // Requests accepted earlier are held by a submit limit: a slot that frees up is theirs first,
  // and asking Slurm now would only be refused again. (Not one whose attempt may have made a job.)
  const ahead = earlierAttempt === null ? await submitLimitQueueAhead(store, row) : 0;
  if (ahead > 0) {
    const detail = `behind ${ahead} earlier request(s) held by the account's submit limit`;
    if (row.state !== 'waiting') {
      // Only from the state read: another attempt may have moved it to `submitting` since, and its
      // POST may be under way. The next recheck sees what it is now.
      await transition(store, requestId, {
        to: 'waiting',
        source: 'submit',
        at: clock.now(),
        reason: 'SubmitLimitQueue',
        detail,
        patch: { errorCode: SubmitLimitError.CODE, errorMessage: detail },
        from: row.state,
      });
    }
    throw new WaitingForSubmitLimitError(detail, false);
  }

  // Another request's job, unless the record itself says it is not (another name, another
  // marker): a crashed slurmctld gives lost jobs' ids again, and the request still holding one
  // must not make the job that has it now look taken (a second submission would follow).
  const isKnownJob = async (jobId: number, job: SchedJob) => {
    const holder = await requestByJobId(store, row.profile, jobId);
    return holder !== undefined && holder.id !== requestId && jobIdentity(job, holder) !== 'other';
  };
  // Accounting's records under an id another request still holds (its job lost by the
  // controller, which gave the id again), asked before the commit, not inside it: whether that
  // request may be submitted again rests on them (lost-evidence.ts). Rare: one read otherwise.
  const lostEvidence = async (jobId: number) => {
    const holder = await requestByJobId(store, row.profile, jobId);
    if (!holder || holder.id === requestId || isTerminalRequest(holder.state)) return UNKNOWN_ACCOUNTING;
    // Never at the cost of the submission's answer, which must be committed next.
    return askLostJobRecords(client, clock, { jobId, createdAt: holder.createdAt }, deps.signal).catch((err) => {
      logger.warn(
        { requestId, job_id: jobId, err },
        'accounting not asked about a lost job: it is not submitted again',
      );
      return UNKNOWN_ACCOUNTING;
    });
  };
  // The earlier attempt's time stays until its lookup has settled it: a crash during the lookup
  // must leave the next try the same question.
  // Moved to `submitting` with its first POST (onOutcome), or on a refusal before one.
  let moving = row.state !== 'waiting' && row.state !== 'submitting';
  const onOutcome = async (attemptStartedMs: number | null) => {
    if (moving && attemptStartedMs !== null) {
      // The move to `submitting` and the first attempt's time in one commit, right before the
      // POST, shared with other submissions starting in the same turn: one write less per
      // submission, and fewer commits. Refused when the request has just ended (cancelled by
      // another process, say): nothing is sent. The move reads the state and writes it in one
      // transaction, as the canceller's does: of a cancel and this move, one wins and the other
      // is refused.
      moving = false;
      const moved = await inSharedCommit(store, (tx) =>
        transition(tx, requestId, {
          to: 'submitting',
          source: 'submit',
          at: attemptStartedMs,
          patch: { submitAttemptAt: attemptStartedMs },
          specAsRead: row.specChangedAt,
        }),
      );
      if (!moved) throw await notMovedError(store, requestId, row);
      return;
    }
    if (attemptStartedMs !== null && row.state === 'waiting') {
      // Tried again from `waiting`, without a move: held or changed since it was read, nothing is
      // sent. Read and written in one transaction, as a hold's check of submitAttemptAt is.
      const sending = await store.transaction(async (tx) => {
        const facts = await transitionFactsOf(tx, requestId);
        if (!facts || facts.heldAt !== null || facts.specChangedAt !== row.specChangedAt) return false;
        await patchRequest(tx, requestId, { submitAttemptAt: attemptStartedMs });
        return true;
      });
      if (!sending) throw await notMovedError(store, requestId, row);
      return;
    }
    await patchRequest(store, requestId, { submitAttemptAt: attemptStartedMs });
  };
  try {
    const stored = storedSpec(row.spec, dependency);
    // A pipeline step's job is told where to write its outputs (src/requests/outputs-file.ts).
    const spec = row.runId === null ? stored : withOutputsFile(requestId, stored);
    if (earlierAttempt !== null) {
      const found = await client.findByMarker(requestId, {
        submittedAfter: Math.floor(earlierAttempt / 1000) - 60,
        jobName: spec.name,
        notBeforeMs: earlierAttempt,
        signal: deps.signal,
        isKnownJob,
      });
      if (found) {
        logger.info({ requestId, job_id: found.job_id }, 'adopted the job an interrupted submit created');
        const accounting = await lostEvidence(found.job_id);
        // The claim on the id and the job id recorded in one commit, as for a POST's answer.
        await inSharedCommit(store, async (tx) => {
          await claimJobId(tx, {
            profile: row.profile,
            jobId: found.job_id,
            requestId,
            at: clock.now(),
            source: 'submit',
            lostResubmits: deps.lostResubmits ?? DEFAULT_LOST_RESUBMITS,
            accounting,
          });
          await transition(tx, requestId, {
            to: 'submitted',
            source: 'submit',
            at: clock.now(),
            detail: 'found by its marker after an interrupted submit',
            patch: {
              jobId: found.job_id,
              jobConfirmedAt: found.source === 'controller' ? clock.now() : null,
              adopted: true,
              submittedAt: found.submit_time !== null ? found.submit_time * 1000 : clock.now(),
              errorCode: null,
              errorMessage: null,
              ...outputPathsAtSubmit(client, spec, found.job_id, found),
            },
          });
        });
        return 'submitted';
      }
    }

    const result = await client.submit(spec, requestId, { signal: deps.signal, isKnownJob, onOutcome });
    const accounting = await lostEvidence(result.job_id);
    // In a commit shared with the answers of other submissions in flight (a crash before it
    // commits leaves the request `submitting` with its attempt's time: the retry adopts by marker).
    await inSharedCommit(store, async (tx) => {
      // The id is this request's job now, whoever held it before (a job the controller lost).
      await claimJobId(tx, {
        profile: row.profile,
        jobId: result.job_id,
        requestId,
        at: clock.now(),
        source: 'submit',
        lostResubmits: deps.lostResubmits ?? DEFAULT_LOST_RESUBMITS,
        accounting,
      });
      await transition(tx, requestId, {
        to: 'submitted',
        source: 'submit',
        at: clock.now(),
        detail: result.adopted ? 'found by its marker after a lost answer' : null,
        patch: {
          jobId: result.job_id,
          adopted: result.adopted,
          submittedAt: clock.now(),
          errorCode: null,
          errorMessage: null,
          ...outputPathsAtSubmit(client, spec, result.job_id, null),
        },
      });
    });
    logger.info({ requestId, job_id: result.job_id, adopted: result.adopted }, 'job submitted');
    return 'submitted';
  } catch (error) {
    if (error instanceof NotSubmittedError) return 'skipped';
    if (error instanceof WaitingForReleaseError) throw error;
    if (error instanceof SubmitLimitError && !(await neverFreesUp(store, row.profile, client, deps.signal))) {
      // Nothing was made: Slurm turned the job away before creating it. One already `waiting`
      // (tried again from there) only takes the patch: a transition that does not move writes
      // its patch alone, and reads and writes in one transaction, so no move can come between.
      await transition(store, requestId, {
        to: 'waiting',
        source: 'submit',
        at: clock.now(),
        reason: error.detail.slurmErrors[0]?.error ?? 'AccountingPolicy',
        detail: error.message,
        patch: { errorCode: error.code, errorMessage: error.message, submitAttemptAt: null },
      });
      logger.info({ requestId, code: error.code }, 'submission held by a submit limit; waiting');
      throw new WaitingForSubmitLimitError(error.message, true);
    }
    if (error instanceof SchedflowError && !error.retryable) {
      const message =
        error instanceof SubmitLimitError
          ? `${error.message.replace(/; it is submitted once.*$/, '')}; the account has no active job whose end would make room, so it is a limit on the job itself (MaxWall, MaxTRESPerJob, …): change the job`
          : error.message;
      // Refused before any POST (a spec that cannot be sent): its timeline reads as it always has,
      // both moves in one commit (nothing sees it `submitting` in between). Not when it has just
      // ended (a cancel): nothing was sent.
      const failed = await store.transaction(async (tx) => {
        if (moving && !(await transition(tx, requestId, { to: 'submitting', source: 'submit', at: clock.now() }))) {
          return false;
        }
        await transition(tx, requestId, {
          to: 'submit_failed',
          source: 'submit',
          at: clock.now(),
          detail: message,
          patch: { errorCode: error.code, errorMessage: message },
        });
        return true;
      });
      if (!failed) return 'skipped';
      // The request is failed; its queue job must not be retried.
      throw new SubmissionRefusedError(error.code, message, { cause: error });
    }
    // Retryable: keep the reason visible while BullMQ backs off.
    if (error instanceof SchedflowError) {
      await patchRequest(store, requestId, { errorCode: error.code, errorMessage: error.message });
    }
    throw error;
  }
}

/**
 * Where the job's output goes: as the record found reports it, else computed from the spec
 * (the poller replaces it with the scheduler's own expansion once a full record has it). Only
 * absolute paths are kept: without a working directory in the spec, where the job runs is the
 * scheduler's to say.
 */
function outputPathsAtSubmit(
  client: SchedClient,
  spec: JobSpec,
  jobId: number,
  found: Pick<SchedJob, 'stdout_path' | 'stderr_path'> | null,
): { stdoutPath: string | null; stderrPath: string | null } {
  // An array job has no one file: each task writes its own (`slurm-%A_%a.out` by default), kept
  // with the task (array_tasks) as its records report it. A record found here is one task's.
  if (spec.array !== undefined) return { stdoutPath: null, stderrPath: null };
  if (found?.stdout_path) return { stdoutPath: found.stdout_path, stderrPath: found.stderr_path ?? found.stdout_path };
  const { auth } = client.profile;
  const user = auth.type === 'header-pair' ? auth.user : null;
  const paths = outputPathsOf(spec, { jobId, name: spec.name ?? '', user }, null);
  const absolute = (path: string | null) => (path?.startsWith('/') ? path : null);
  return { stdoutPath: absolute(paths.stdout), stderrPath: absolute(paths.stderr) };
}

/**
 * Slurm answers 2050 for a submit limit (MaxSubmitJobs, GrpSubmitJobs), which frees up as jobs
 * end, and for limits on the job itself (MaxWall, MaxTRESPerJob under DenyOnLimit), which never
 * do; its message is the same. With no active job of the profile's user or account in the
 * controller, nothing can end to make room: waiting would be forever. The history is asked
 * first: the controller's listing may be one the proxy kept from before the jobs just submitted
 * (the profile check at start reads it), which said "none" of a job the history knew running.
 */
async function neverFreesUp(
  store: History,
  profile: string,
  client: SchedClient,
  signal?: AbortSignal,
): Promise<boolean> {
  if (await hasActiveJob(store, profile)) return false;
  const { auth, account } = client.profile;
  const user = auth.type === 'header-pair' ? auth.user : undefined;
  if (!user && !account) return false;
  const { data } = await client.listJobs({ signal });
  const active = data.jobs.filter(
    (job) =>
      (job.state === 'PENDING' || job.state === 'RUNNING' || job.state === 'SUSPENDED') &&
      ((user !== undefined && job.user === user) || (account !== undefined && job.account === account)),
  );
  return active.length === 0;
}

/**
 * The request's spec as stored. One accepted before the door checked as much (or written by an
 * older schedflow) is refused here: a fatal error, recorded as submit_failed like any other.
 */
function storedSpec(stored: unknown, dependency: string | null): JobSpec {
  const parsed = jobSpecSchema.safeParse(stored);
  if (!parsed.success) throw new InvalidJobSpecError(`invalid job spec: ${issuesText(parsed.error)}`);
  return { ...parsed.data, ...(dependency !== null && { dependency }) };
}

/**
 * Why a submission read as `row` may not go out: held or its spec changed since (kept back, to
 * be looked at again with what the history holds now), or ended (nothing to send).
 */
async function notMovedError(store: History, requestId: string, row: JobRequestRow): Promise<Error> {
  const now = await getRequest(store, requestId);
  if (now && !isTerminalRequest(now.state) && now.jobId === null) {
    if (now.heldAt !== null) return new WaitingForReleaseError(`held by ${now.heldBy ?? 'someone'} before submission`);
    if (now.specChangedAt !== row.specChangedAt)
      return new WaitingForReleaseError('its spec changed before submission');
  }
  return new NotSubmittedError();
}
