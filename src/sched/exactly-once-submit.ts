import { type Clock, systemClock } from '../lib/clock.js';
import { backoffDelayMs } from '../lib/retry-policy.js';
import type { Logger } from '../logger.js';
import type { JobCodec } from './codecs/codec.js';
import type { SchedJob } from './job-model.js';
import type { JobSpec } from './job-spec.js';
import { type MarkerHint, markerFor } from './marker-lookup.js';
import type { Profile } from './profile.js';
import { type SchedApiError, UnexpectedResponseError } from './sched-errors.js';
import type { SchedTransport, TransportRequest } from './transport.js';

/**
 * One scheduler job per request: the POST carries the request's marker, and an attempt whose
 * outcome is unknown (no answer, a 5xx) is followed by a marker lookup before another POST
 * (docs/architecture.md, "Exactly one scheduler job per request").
 */

export interface SubmitResult {
  job_id: number;
  /** True when an earlier attempt had created the job and this call found it by its marker. */
  adopted: boolean;
}

/** How a submission is watched over by its caller. */
export interface SubmitOptions {
  signal?: AbortSignal;
  /** Whether another request already has the job a lookup found by name and time (not by marker). */
  isKnownJob?: (jobId: number, job: SchedJob) => boolean | Promise<boolean>;
  /**
   * Told when an attempt whose outcome may stay unknown starts (its time), and when nothing
   * can have been made after all (null: a definite refusal such as 429, or a lookup that found
   * nothing). The submitter records it, so a retry after a crash looks the marker up only
   * when a job may really exist. The POST waits for it: the time is on disk before it goes.
   */
  onOutcome?: (attemptStartedMs: number | null) => void | Promise<void>;
}

/** What a submission goes through: the profile's client's codec, transport and marker lookup. */
export interface SubmitChannel {
  readonly profile: Profile;
  readonly codec: JobCodec;
  readonly transport: SchedTransport;
  readonly logger: Logger;
  /** `/slurm/v0.0.44/job/submit` (or the proxy's `/sched/…`). */
  readonly submitPath: string;
  findByMarker(requestId: string, hint: MarkerHint): Promise<SchedJob | null>;
  /** The client's clock: attempt times and the backoff between attempts. @defaultValue systemClock */
  readonly clock?: Clock;
}

/**
 * Submits a job carrying the request's marker. When an attempt fails in a way
 * that leaves it unknown whether Slurm took the job (no answer, 5xx), the
 * marker is looked up before trying again, so one request makes one job.
 */
export async function submitExactlyOnce(
  channel: SubmitChannel,
  spec: JobSpec,
  requestId: string,
  options: SubmitOptions = {},
): Promise<SubmitResult> {
  const marker = markerFor(requestId);
  const body = channel.codec.encodeSubmit({
    ...spec,
    account: spec.account ?? channel.profile.account,
    partition: spec.partition ?? channel.profile.partition,
    comment: spec.comment ? `${marker} ${spec.comment}` : marker,
  });
  const req: TransportRequest = {
    method: 'POST',
    path: channel.submitPath,
    body,
    retry: false,
    signal: options.signal,
  };
  const clock = channel.clock ?? systemClock;
  const submittedAfter = Math.floor(clock.now() / 1000) - 60;
  const { attempts, baseDelayMs, maxDelayMs } = channel.profile.retries;
  for (let attempt = 0; ; attempt++) {
    // No marker lookup can be cheaper than not sending into a Retry-After: wait it out first.
    await channel.transport.whenOpen();
    const attemptStartedMs = clock.now();
    await options.onOutcome?.(attemptStartedMs);
    try {
      const res = await channel.transport.once(req);
      const jobId = (res.body as { job_id?: unknown } | undefined)?.job_id;
      if (typeof jobId !== 'number') {
        throw new UnexpectedResponseError(`${channel.transport.describe(req)} answered without a job_id`, {
          status: res.status,
          message: res.text.slice(0, 200),
          slurmErrors: [],
          request: channel.transport.describe(req),
        });
      }
      return { job_id: jobId, adopted: false };
    } catch (error) {
      const e = error as SchedApiError;
      if (!e.retryable) throw e;
      // 429 means the request was turned away before Slurm saw it, and so does slurmrestd's
      // failure to connect to slurmctld (1800), and a budget that did not answer (never sent);
      // anything else may have landed.
      if (
        e.code === 'SCHEDFLOW_ERR_SCHED_RATE_LIMITED' ||
        e.code === 'SCHEDFLOW_ERR_SCHED_BUDGET_UNAVAILABLE' ||
        neverReachedSlurmctld(e)
      ) {
        await options.onOutcome?.(null);
      } else {
        // A lookup that fails says nothing about whether the job exists: posting again could
        // make a second job, so the submission fails (retryably) and its caller's retry adopts.
        const found = await channel
          .findByMarker(requestId, {
            submittedAfter,
            jobName: spec.name,
            notBeforeMs: attemptStartedMs,
            signal: options.signal,
            isKnownJob: options.isKnownJob,
          })
          .catch((lookupError: unknown) => {
            channel.logger.warn(
              { requestId, code: (lookupError as SchedApiError).code },
              'could not look the job up by its marker after a failed submit; not submitting again',
            );
            throw e;
          });
        if (found) {
          channel.logger.info({ job_id: found.job_id, requestId }, 'adopted the job an earlier submit attempt created');
          return { job_id: found.job_id, adopted: true };
        }
        await options.onOutcome?.(null);
      }
      if (attempt + 1 >= attempts) throw e;
      await clock.sleep(backoffDelayMs(attempt, { baseDelayMs, maxDelayMs }, e.retryAfterMs ?? null), options.signal);
    }
  }
}

/** SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR: slurmrestd could not connect, so slurmctld saw nothing. */
function neverReachedSlurmctld(error: SchedApiError): boolean {
  return error.detail.slurmErrors.some((entry) => entry.error_number === 1800);
}
