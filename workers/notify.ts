import { type BackoffStrategy, DelayedError, type Job, UnrecoverableError } from 'bullmq';
import type { History } from '../src/db/history.js';
import { markDeliveryFailed } from '../src/db/webhooks.js';
import { assertNever } from '../src/lib/assert-never.js';
import type { Logger } from '../src/logger.js';
import { attemptDelivery } from '../src/notify/deliver.js';
import { type DeliveryDispatcher, DISPATCH_JOB } from '../src/notify/delivery-dispatcher.js';
import { WEBHOOK_BACKOFF_TYPE, webhookRetryDelayMs } from '../src/notify/retry-policy.js';
import { WebhookDeliveryError, type WebhookSender } from '../src/notify/sender.js';
import { notifyPayloadSchema } from '../src/queue/catalog.js';

export interface NotifyWorkerDeps {
  store: History;
  sender: WebhookSender;
  dispatcher: DeliveryDispatcher;
  logger: Logger;
  /** Aborted when shutdown's grace period is over: a running attempt stops and is handed back. */
  shutdown: AbortSignal;
}

/** An attempt cut short by shutdown is picked up again this soon (by whichever process runs then). */
const HANDED_BACK_DELAY_MS = 1000;

/**
 * The `notify` queue: `dispatch` (the tick) queues pending deliveries of the
 * outbox; `deliver` makes one attempt at one delivery and records it.
 */
export function notifyProcessor(deps: NotifyWorkerDeps) {
  return async (job: Job, token?: string): Promise<unknown> => {
    if (job.name === DISPATCH_JOB) return { queued: await deps.dispatcher.dispatch() };
    const { deliveryId } = notifyPayloadSchema.parse(job.data);
    // attemptsMade counts the attempts that failed before this one.
    const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    const result = await attemptDelivery(deps, deliveryId, { finalAttempt, signal: deps.shutdown });
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
        // Handed back without spending one of the delivery's attempts.
        await job.moveToDelayed(Date.now() + HANDED_BACK_DELAY_MS, token);
        throw new DelayedError();
      default:
        return assertNever(result);
    }
  };
}

/**
 * The `webhook` backoff type: exponential from the job's `backoff.delay`, with
 * jitter, never sooner than the receiver's Retry-After (bounded).
 */
export const webhookBackoffStrategy: BackoffStrategy = (attemptsMade, type, error, job) => {
  if (type !== WEBHOOK_BACKOFF_TYPE) throw new Error(`unknown backoff type "${type}"`);
  const backoff = job?.opts.backoff;
  const baseDelayMs = typeof backoff === 'object' && backoff.delay !== undefined ? backoff.delay : 2000;
  const retryAfterMs = error instanceof WebhookDeliveryError ? error.retryAfterMs : null;
  return webhookRetryDelayMs(attemptsMade, baseDelayMs, retryAfterMs);
};

/**
 * A `deliver` job BullMQ has given up on outside an attempt's record (it
 * stalled too often, or threw before recording) fails its delivery, so none
 * stays pending for ever. Called from the worker's `failed` event; a delivery
 * already settled is left as it is.
 */
export async function recordDeliveryGivenUp(store: History, logger: Logger, job: Job, error: Error): Promise<void> {
  if (job.name === DISPATCH_JOB) return;
  const finalAttempt = error instanceof UnrecoverableError || job.attemptsMade >= (job.opts.attempts ?? 1);
  if (!finalAttempt) return;
  const parsed = notifyPayloadSchema.safeParse(job.data);
  if (!parsed.success) return;
  if (await markDeliveryFailed(store, parsed.data.deliveryId, `the queue gave up: ${error.message}`)) {
    logger.error({ deliveryId: parsed.data.deliveryId, err: error }, 'webhook delivery given up by the queue');
  }
}
