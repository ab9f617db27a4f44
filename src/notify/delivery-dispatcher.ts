import type { JobsOptions, Queue } from 'bullmq';
import type { History } from '../db/history.js';
import { markDeliveryFailed, pendingDeliveryIds } from '../db/webhooks.js';
import type { Logger } from '../logger.js';
import { WEBHOOK_BACKOFF_TYPE } from './retry-policy.js';

/** Job names of the notify queue: one delivery, or the tick that queues pending ones. */
export const DELIVER_JOB = 'deliver';
export const DISPATCH_JOB = 'dispatch';

export interface DispatcherSettings {
  /** @defaultValue 12 */
  attempts: number;
  /** First retry delay; each next one doubles. @defaultValue 2000 */
  backoffMs: number;
  /** How often a delivery already seen queued is looked up in the queue again. @defaultValue 60000 */
  recheckMs?: number;
}

/** The options of a delivery's queue job: its id is the delivery's, so it is never queued twice. */
export function deliverJobOptions(deliveryId: string, settings: DispatcherSettings): JobsOptions {
  return {
    jobId: deliveryId,
    attempts: settings.attempts,
    backoff: { type: WEBHOOK_BACKOFF_TYPE, delay: settings.backoffMs },
  };
}

/**
 * Moves deliveries from the outbox (the history) to the notify queue. Run by
 * the dispatch tick: one indexed query when nothing is pending; a delivery is
 * looked up in the queue when first seen and then once a `recheckMs`, so one
 * waiting out a long backoff costs no Redis calls in between.
 */
export class DeliveryDispatcher {
  /** Pending deliveries known to have a live queue job, and when that was checked. */
  private readonly checkedAt = new Map<string, number>();

  constructor(private readonly deps: { store: History; queue: Queue; logger: Logger; settings: DispatcherSettings }) {}

  /** Queues every pending delivery without a live job; returns how many were queued. */
  async dispatch(now = Date.now()): Promise<number> {
    const { store, queue, logger, settings } = this.deps;
    const pending = await pendingDeliveryIds(store);
    const pendingSet = new Set(pending);
    for (const id of this.checkedAt.keys()) if (!pendingSet.has(id)) this.checkedAt.delete(id);
    const recheckMs = settings.recheckMs ?? 60_000;
    let queued = 0;
    for (const id of pending) {
      const checked = this.checkedAt.get(id);
      if (checked !== undefined && now - checked < recheckMs) continue;
      const job = await queue.getJob(id);
      const state = job ? await job.getState() : 'missing';
      switch (state) {
        case 'failed':
          // BullMQ gave up outside an attempt's record (stalled too often, or a crash
          // between the last attempt and its record): settle it as the queue did.
          await markDeliveryFailed(store, id, `the queue gave up: ${job?.failedReason ?? 'unknown reason'}`);
          logger.error({ deliveryId: id, err: job?.failedReason }, 'webhook delivery given up by the queue');
          continue;
        case 'completed':
        case 'unknown':
        case 'missing':
          // A finished job with a pending delivery would block the id: make way for a new one.
          await job?.remove();
          await queue.add(DELIVER_JOB, { deliveryId: id }, deliverJobOptions(id, settings));
          queued++;
          break;
        default:
          // waiting, delayed, active, prioritized, waiting-children: on its way.
          break;
      }
      this.checkedAt.set(id, now);
    }
    if (queued > 0) logger.debug({ queued }, 'webhook deliveries queued');
    return queued;
  }
}
