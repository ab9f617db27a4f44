import type { Job } from 'bullmq';
import { getProfileSync, updateProfileSync } from '../src/db/accounting.js';
import { SchedflowError } from '../src/errors.js';
import { profilePayloadSchema } from '../src/queue/catalog.js';
import { type PollReport, pollProfile } from '../src/tracking/poller.js';
import type { WorkerServices } from './services.js';

/** The interval follows the proxy's cache lifetime: polling faster only re-reads the same cached answer. */
export function pollIntervalMs(lastMaxAgeSec: number | null, floorMs: number, ceilingMs: number): number {
  const byCache = lastMaxAgeSec === null ? floorMs : lastMaxAgeSec * 1000;
  return Math.min(ceilingMs, Math.max(floorMs, byCache));
}

/**
 * The `poll` queue: a job scheduler ticks at the floor interval; a tick polls
 * only when the profile's interval has passed since its last poll.
 */
export function pollProcessor(services: WorkerServices) {
  return async (job: Job): Promise<PollReport | 'waiting'> => {
    const { profile } = profilePayloadSchema.parse(job.data);
    const { db, settings } = services;
    if (!services.clients.connected(profile)) return 'waiting';
    const sync = getProfileSync(db, profile);
    const interval = pollIntervalMs(sync?.lastMaxAgeSec ?? null, settings.pollFloorMs, settings.pollCeilingMs);
    if (sync?.lastPollAt && Date.now() - sync.lastPollAt < interval - 250) return 'waiting';
    try {
      return await pollProfile(
        { db, client: services.clients.get(profile), logger: services.logger, settings, signal: services.shutdown },
        profile,
      );
    } catch (error) {
      // An outage is not the jobs' fault: record it for the profile and try at the next tick.
      if (!(error instanceof SchedflowError)) throw error;
      updateProfileSync(db, profile, { lastPollAt: Date.now(), lastPollOk: false, lastPollError: error.message });
      services.logger.warn(
        { profile, code: error.code, err: error.message },
        'poll failed; jobs keep their last known state',
      );
      return { tracked: 0, requests: 1, changed: 0, stale: false, accounting: 'not-needed' };
    }
  };
}
