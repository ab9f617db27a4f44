import { returnFreePages } from '../src/db/history-space.js';
import { PRUNED_TABLES, type PruneCounts, pruneHistory, recordPrune } from '../src/db/retention.js';
import type { QueueDefinition, QueueProcessor } from '../src/queue/queue-definition.js';
import { TICK_ONCE } from '../src/queue/ticks.js';
import type { QueueSettings, WorkerServices } from './services.js';

/** What one prune did: rows removed per table, and SQLite pages given back. */
export type PruneReport = { removed: PruneCounts; pagesReturned: number; tookMs: number } | 'off';

/**
 * The `prune` queue: one job scheduler (not per profile: the history is one) ticks the pruning
 * of the history every `pruneEveryMs` (src/db/retention.ts), then SQLite's free pages are given
 * back. One tick is one job, taken by one worker of whichever process: processes sharing the
 * history never prune it together (a prune longer than the interval is overlapped at worst by
 * the next tick's, which finds nothing the first removed). Not retried: the next tick prunes.
 */
export const pruneQueue: QueueDefinition<QueueSettings, WorkerServices, 'prune'> = {
  name: 'prune',
  jobOptions: () => TICK_ONCE,
  workerOptions: () => ({ concurrency: 1 }),
  // A prune cut short is not handed back: the next tick carries on.
  handedBackDelayMs: 0,
  ticks: ({ config }) => [
    { id: 'prune', repeat: { every: config.pruneEveryMs }, template: { name: 'prune', data: {} } },
  ],
  processor: (services) => pruneProcessor(services),
};

function pruneProcessor(services: WorkerServices): QueueProcessor {
  return async (): Promise<PruneReport> => {
    const retention = services.settings.retention;
    if (!retention) return 'off';
    const started = performance.now();
    const now = services.clock.now();
    const removed = await pruneHistory(services.store, retention, now, services.shutdown);
    const pagesReturned = await returnFreePages(services.store, services.shutdown);
    await recordPrune(services.store, now, removed, pagesReturned);
    const tookMs = Math.round(performance.now() - started);
    const total = PRUNED_TABLES.reduce((sum, table) => sum + removed[table], 0);
    const counts = Object.fromEntries(PRUNED_TABLES.filter((table) => removed[table] > 0).map((t) => [t, removed[t]]));
    const log = services.logger.child({ component: 'retention' });
    if (total > 0 || pagesReturned > 0) log.info({ removed: counts, pagesReturned, tookMs }, 'history pruned');
    else log.debug({ tookMs }, 'history pruned: nothing past its retention');
    return { removed, pagesReturned, tookMs };
  };
}
