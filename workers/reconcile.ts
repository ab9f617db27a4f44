import { recordAccountingAnswer } from '../src/db/accounting.js';
import { SchedflowError } from '../src/errors.js';
import type { QueueDefinition, QueueProcessor } from '../src/queue/queue-definition.js';
import { TICK_ONCE } from '../src/queue/ticks.js';
import { KnownRecords, type ReconcileReport, reconcileProfile } from '../src/requests/reconciler.js';
import { BudgetUnavailableError } from '../src/sched/sched-errors.js';
import { profilePayloadSchema } from './profile-payload.js';
import type { QueueSettings, WorkerServices } from './services.js';

/**
 * The `reconcile` queue: a job scheduler per profile ticks the import of its accounting records
 * since the last sync. Not retried: the next tick imports again. One import at a time.
 */
export const reconcileQueue: QueueDefinition<QueueSettings, WorkerServices, 'reconcile'> = {
  name: 'reconcile',
  jobOptions: () => TICK_ONCE,
  workerOptions: () => ({ concurrency: 1 }),
  // An import cut short is not handed back: the next tick imports again.
  handedBackDelayMs: 0,
  ticks: ({ config }, profiles) =>
    profiles.map((profile) => ({
      id: `reconcile:${profile}`,
      repeat: { every: config.reconcileEveryMs },
      template: { name: 'reconcile', data: { profile } },
    })),
  processor: (services) => reconcileProcessor(services),
};

/** How far back each run looks again, while accounting answers: slurmdbd has a job's record seconds after its end. */
export const STEADY_OVERLAP_SEC = 60;
/** How far back, after an accounting failure or a start: a backlog of records can take minutes to reach slurmdbd. */
export const RECOVERY_OVERLAP_SEC = 600;

/**
 * How far back each reconcile run of a profile looks again. Every run gets every record of its
 * window, so the overlap is paid for on every run: 10 minutes of it made the records of a burst
 * of 10,000 jobs come back 11 times, about 40 MB and a 300 ms parse each (issue 14). Ten minutes
 * only where records may come late: the first run of the process, and runs within ten minutes
 * of a failed one (slurmdbd back from an outage, slurmctld flushing what it kept meanwhile).
 */
export class ReconcileOverlap {
  readonly #longUntil = new Map<string, number>();

  forRun(profile: string, nowMs = Date.now()): number {
    const until = this.#longUntil.get(profile);
    if (until === undefined) {
      this.#longUntil.set(profile, nowMs);
      return RECOVERY_OVERLAP_SEC;
    }
    return nowMs < until ? RECOVERY_OVERLAP_SEC : STEADY_OVERLAP_SEC;
  }

  failed(profile: string, nowMs = Date.now()): void {
    this.#longUntil.set(profile, nowMs + RECOVERY_OVERLAP_SEC * 1000);
  }
}

/** Imports the profile's accounting records since the last sync. */
function reconcileProcessor(services: WorkerServices): QueueProcessor {
  const overlap = new ReconcileOverlap();
  const known = new KnownRecords();
  return async (job): Promise<ReconcileReport | 'waiting'> => {
    const { profile } = profilePayloadSchema.parse(job.data);
    if (!services.clients.connected(profile)) return 'waiting';
    // The import is never urgent: while a rate limit holds submissions back it waits for the next
    // tick (at one request a second, a reconcile every 10 s cost a tenth of a 429 storm's budget).
    if (services.clients.get(profile).submissionsHeldBack()) return 'waiting';
    try {
      return await reconcileProfile(
        {
          store: services.store,
          client: services.clients.get(profile),
          logger: services.logger,
          settings: { initialLookbackSec: 86_400, overlapSec: overlap.forRun(profile, services.clock.now()) },
          signal: services.shutdown,
          known,
          clock: services.clock,
        },
        profile,
      );
    } catch (error) {
      if (!(error instanceof SchedflowError)) throw error;
      overlap.failed(profile, services.clock.now());
      // Redis away (the budget is kept there): the Redis watch says so once.
      if (error instanceof BudgetUnavailableError) return 'waiting';
      if (await recordAccountingAnswer(services.store, profile, error.message)) {
        services.logger.warn({ profile, code: error.code, err: error }, 'accounting import failed; will retry');
      }
      return 'waiting';
    }
  };
}
