import { getProfileSync, updateProfileSync } from '../src/db/accounting.js';
import { SchedflowError } from '../src/errors.js';
import type { QueueDefinition, QueueProcessor } from '../src/queue/queue-definition.js';
import { TICK_ONCE } from '../src/queue/ticks.js';
import { type PollReport, pollProfile } from '../src/requests/poller.js';
import { BudgetUnavailableError } from '../src/sched/sched-errors.js';
import { profilePayloadSchema } from './profile-payload.js';
import type { QueueSettings, WorkerServices } from './services.js';

/**
 * The `poll` queue: a job scheduler per profile ticks at the floor interval; a tick polls only
 * when the profile's interval has passed since its last poll. A failed poll is not retried: the
 * next tick polls again. One poll at a time per profile.
 */
export const pollQueue: QueueDefinition<QueueSettings, WorkerServices, 'poll'> = {
  name: 'poll',
  jobOptions: () => TICK_ONCE,
  workerOptions: ({ profileCount }) => ({ concurrency: Math.max(1, profileCount) }),
  // A poll cut short is not handed back: the next tick polls again.
  handedBackDelayMs: 0,
  ticks: ({ config }, profiles) =>
    profiles.map((profile) => ({
      id: `poll:${profile}`,
      repeat: { every: config.pollFloorMs },
      template: { name: 'poll', data: { profile } },
    })),
  processor: (services) => pollProcessor(services),
};

/** The interval follows the proxy's cache lifetime: polling faster only re-reads the same cached answer. */
export function pollIntervalMs(lastMaxAgeSec: number | null, floorMs: number, ceilingMs: number): number {
  const byCache = lastMaxAgeSec === null ? floorMs : lastMaxAgeSec * 1000;
  return Math.min(ceilingMs, Math.max(floorMs, byCache));
}

/** Share of a rate-limited profile's pace that polling may take; the rest is the submissions'. */
const RATE_LIMITED_POLL_SHARE = 0.05;
/**
 * Share of the pace polling may take while submissions wait for the budget, without 429s: a cycle
 * over thousands of jobs costs a request per chunk of ids (21 at 10,000 jobs), which at the cache
 * lifetime's pace would take all of a default budget (5 a second).
 */
const CONTENDED_POLL_SHARE = 0.5;
/** Requests a poll cycle with changes costs up to 500 jobs (the state listing and one accounting query). */
const REQUESTS_PER_POLL = 2;

/**
 * While submissions wait for the profile's budget, polls are spaced to take at most `share` of
 * its pace. Under the proxy's rate limit (429s lately) a twentieth: at one request a second, a
 * poll every 40 s instead of every cache lifetime, which alone would take the whole budget and
 * starve the submissions (issue 13, weak spot 3); otherwise half. Never beyond the ceiling. A
 * cycle over thousands of jobs costs a request per chunk of ids (`requestsPerPoll`, the last
 * cycle's), and is spaced accordingly.
 */
export function rateLimitedPollIntervalMs(
  intervalMs: number,
  ratePerSec: number,
  ceilingMs: number,
  requestsPerPoll = REQUESTS_PER_POLL,
  share = RATE_LIMITED_POLL_SHARE,
): number {
  const spacedMs = (Math.max(REQUESTS_PER_POLL, requestsPerPoll) / (share * ratePerSec)) * 1000;
  return Math.max(intervalMs, Math.min(ceilingMs, spacedMs));
}

function pollProcessor(services: WorkerServices): QueueProcessor {
  /** Upstream requests each profile's last poll made. */
  const lastRequests = new Map<string, number>();
  return async (job): Promise<PollReport | 'waiting'> => {
    const { profile } = profilePayloadSchema.parse(job.data);
    const { store, settings } = services;
    if (!services.clients.connected(profile)) return 'waiting';
    const sync = await getProfileSync(store, profile);
    const client = services.clients.get(profile);
    let interval = pollIntervalMs(sync?.lastMaxAgeSec ?? null, settings.pollFloorMs, settings.pollCeilingMs);
    // Only while submissions compete for the budget: once they are through, the reduced pace is
    // all polling's, and ends are seen at once rather than a spacing later. Without 429s this
    // changes nothing up to 500 tracked jobs (2 requests a cycle); beyond, half the pace.
    if (client.submissionsWaiting()) {
      interval = rateLimitedPollIntervalMs(
        interval,
        client.currentRate(),
        settings.pollCeilingMs,
        lastRequests.get(profile),
        client.isRateLimited() ? RATE_LIMITED_POLL_SHARE : CONTENDED_POLL_SHARE,
      );
    }
    if (sync?.lastPollAt && services.clock.now() - sync.lastPollAt < interval - 250) return 'waiting';
    try {
      const report = await pollProfile(
        {
          store,
          client,
          logger: services.logger,
          settings,
          signal: services.shutdown,
          heap: services.heap,
          clock: services.clock,
        },
        profile,
      );
      lastRequests.set(profile, report.requests);
      // Back after an outage: submissions waiting out a long backoff need not wait any more.
      if (sync?.lastPollOk === false && !report.stale) await services.onUpstreamBack?.(profile);
      return report;
    } catch (error) {
      // An outage is not the jobs' fault: record it for the profile and try at the next tick.
      if (!(error instanceof SchedflowError)) throw error;
      await updateProfileSync(store, profile, {
        lastPollAt: services.clock.now(),
        lastPollOk: false,
        lastPollError: error.message,
      });
      // Redis away (the budget is kept there): the Redis watch says so once, not every poll.
      const level = error instanceof BudgetUnavailableError ? 'debug' : 'warn';
      services.logger[level](
        { profile, code: error.code, err: error },
        'poll failed; jobs keep their last known state',
      );
      return { tracked: 0, requests: 1, changed: 0, stale: false, accounting: 'not-needed' };
    }
  };
}
