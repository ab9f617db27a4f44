import type { Job } from 'bullmq';
import { recordAccountingAnswer } from '../src/db/accounting.js';
import { SchedflowError } from '../src/errors.js';
import { profilePayloadSchema } from '../src/queue/catalog.js';
import { type ReconcileReport, reconcileProfile } from '../src/tracking/reconciler.js';
import type { WorkerServices } from './services.js';

/** The `reconcile` queue: import the profile's accounting records since the last sync. */
export function reconcileProcessor(services: WorkerServices) {
  return async (job: Job): Promise<ReconcileReport | 'waiting'> => {
    const { profile } = profilePayloadSchema.parse(job.data);
    if (!services.clients.connected(profile)) return 'waiting';
    // The import is never urgent: while a rate limit holds submissions back it waits for the next
    // tick (at one request a second, a reconcile every 10 s cost a tenth of a 429 storm's budget).
    if (services.clients.get(profile).submissionsHeldBack()) return 'waiting';
    try {
      return await reconcileProfile(
        {
          db: services.db,
          client: services.clients.get(profile),
          logger: services.logger,
          settings: { initialLookbackSec: 86_400, overlapSec: 600 },
          signal: services.shutdown,
        },
        profile,
      );
    } catch (error) {
      if (!(error instanceof SchedflowError)) throw error;
      if (recordAccountingAnswer(services.db, profile, error.message)) {
        services.logger.warn({ profile, code: error.code, err: error.message }, 'accounting import failed; will retry');
      }
      return 'waiting';
    }
  };
}
