import { UnrecoverableError } from 'bullmq';
import { z } from 'zod';
import { markDeliveryFailed, pendingDeliveryIds } from '../src/db/webhooks.js';
import { assertNever } from '../src/lib/assert-never.js';
import { attemptDelivery } from '../src/notify/deliver.js';
import { DELIVER_JOB, DISPATCH_JOB } from '../src/notify/delivery-dispatcher.js';
import { BACKOFFS } from '../src/queue/backoffs.js';
import { HistoryRelay } from '../src/queue/history-relay.js';
import { HANDED_BACK_DELAY_MS, type QueueDefinition } from '../src/queue/queue-definition.js';
import { TICK_ONCE } from '../src/queue/ticks.js';
import type { QueueSettings, WorkerServices } from './services.js';

/** A `deliver` job: one webhook delivery of the outbox (its id is also the job id). */
const notifyPayloadSchema = z.object({ deliveryId: z.string().min(1) });

/** How often a delivery already seen queued is looked up in the queue again. */
const RECHECK_MS = 60_000;

/**
 * The `notify` queue: `dispatch` (the tick) relays pending deliveries of the outbox to the
 * queue; `deliver` makes one attempt at one delivery and records it. Deliveries retry with the
 * `webhook` backoff: exponential from SCHEDFLOW_NOTIFY_BACKOFF_MS with jitter, never sooner than
 * the receiver's Retry-After, SCHEDFLOW_NOTIFY_ATTEMPTS times (about an hour of receiver trouble
 * by default). Failed jobs are kept a week.
 */
export const notifyQueue: QueueDefinition<QueueSettings, WorkerServices, 'notify'> = {
  name: 'notify',
  jobOptions: ({ config }) => ({
    attempts: config.notifyAttempts,
    backoff: { type: BACKOFFS.webhook, delay: config.notifyBackoffMs },
    removeOnComplete: { age: 24 * 3600, count: 1000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  }),
  workerOptions: () => ({ concurrency: 4 }),
  handedBackDelayMs: HANDED_BACK_DELAY_MS,
  ticks: ({ config }) => [
    {
      id: 'tick:notify',
      repeat: { every: config.notifyEveryMs },
      template: { name: DISPATCH_JOB, data: {}, opts: TICK_ONCE },
    },
  ],
  processor(services) {
    const logger = services.rootLogger.child({ component: 'notify' });
    const relay = deliveryRelay(services);
    return async (job, ctx) => {
      if (job.name === DISPATCH_JOB) {
        const { queued } = await relay.run(services.clock.now());
        if (queued > 0) logger.debug({ queued }, 'webhook deliveries queued');
        return { queued };
      }
      const { deliveryId } = notifyPayloadSchema.parse(job.data);
      // attemptsMade counts the attempts that failed before this one.
      const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      const result = await attemptDelivery(
        { store: services.store, sender: services.webhooks, logger, clock: services.clock },
        deliveryId,
        {
          finalAttempt,
          signal: services.shutdown,
        },
      );
      switch (result.outcome) {
        case 'delivered':
          return { status: result.status };
        case 'skipped':
          return { skipped: result.state };
        case 'retry':
          // Thrown as it is: the backoff strategy reads the receiver's Retry-After from it.
          throw result.error;
        case 'failed':
          throw new UnrecoverableError(result.error.message);
        case 'interrupted':
          return ctx.handBack();
        default:
          return assertNever(result);
      }
    };
  },
  /**
   * A `deliver` job the queue gave up on outside an attempt's record (it stalled too often, or
   * threw before recording) fails its delivery, so none stays pending for ever; a delivery
   * already settled is left as it is.
   */
  async givenUp(services, job, error) {
    if (job.name === DISPATCH_JOB) return;
    const parsed = notifyPayloadSchema.safeParse(job.data);
    if (!parsed.success) return;
    if (await markDeliveryFailed(services.store, parsed.data.deliveryId, `the queue gave up: ${error.message}`)) {
      services.rootLogger
        .child({ component: 'notify' })
        .error({ deliveryId: parsed.data.deliveryId, err: error }, 'webhook delivery given up by the queue');
    }
  },
};

/** The outbox (the history's pending deliveries) relayed to the notify queue. */
function deliveryRelay(services: WorkerServices): HistoryRelay<string> {
  const queue = services.queues.notify;
  const logger = services.rootLogger.child({ component: 'notify' });
  return new HistoryRelay<string>({
    queue,
    pending: () => pendingDeliveryIds(services.store),
    idOf: (id) => id,
    async failed(id, job) {
      // The queue gave up outside an attempt's record (stalled too often, or a crash between
      // the last attempt and its record): settle it as the queue did.
      await markDeliveryFailed(services.store, id, `the queue gave up: ${job.failedReason ?? 'unknown reason'}`);
      logger.error({ deliveryId: id, err: job.failedReason }, 'webhook delivery given up by the queue');
      return false;
    },
    // Attempts and backoff are the queue's default job options.
    add: (id) => queue.add(DELIVER_JOB, { deliveryId: id }, { jobId: id }),
    recheckMs: RECHECK_MS,
  });
}
