import type { History } from '../db/history.js';
import type { WebhookDeliveryRow } from '../db/schema.js';
import { getDelivery, recordAttempt } from '../db/webhooks.js';
import { toError } from '../errors.js';
import { type Clock, systemClock } from '../lib/clock.js';
import type { Logger } from '../logger.js';
import {
  receiverOrigin,
  WebhookDeliveryError,
  WebhookRetryableError,
  type WebhookSender,
  webhookDetail,
} from './sender.js';

export interface DeliverDeps {
  store: History;
  sender: WebhookSender;
  logger: Logger;
  /** When attempts are recorded. @defaultValue systemClock */
  clock?: Clock;
}

export type AttemptResult =
  | { outcome: 'delivered'; status: number }
  /** Nothing sent: the delivery is already settled, or gone from the history. */
  | { outcome: 'skipped'; state: WebhookDeliveryRow['state'] | 'missing' }
  /** Still pending; the queue tries again after its backoff. */
  | { outcome: 'retry'; error: WebhookDeliveryError }
  /** Settled as failed: refused, or this was the last attempt. */
  | { outcome: 'failed'; error: WebhookDeliveryError }
  /** Cut short by shutdown; still pending, to be handed back without spending an attempt. */
  | { outcome: 'interrupted'; error: WebhookDeliveryError };

/**
 * One attempt at a delivery: send it, then record the attempt and where the
 * delivery stands. Logs name the receiver by its origin only.
 */
export async function attemptDelivery(
  deps: DeliverDeps,
  deliveryId: string,
  options: { finalAttempt: boolean; signal?: AbortSignal },
): Promise<AttemptResult> {
  const { store, sender, logger } = deps;
  const delivery = await getDelivery(store, deliveryId);
  if (!delivery) {
    logger.warn({ deliveryId }, 'webhook delivery not in the history; nothing sent');
    return { outcome: 'skipped', state: 'missing' };
  }
  if (delivery.state !== 'pending') return { outcome: 'skipped', state: delivery.state };
  const log = {
    deliveryId,
    event: delivery.event,
    receiver: receiverOrigin(delivery.url),
    attempt: delivery.attempts + 1,
  };

  let status: number;
  try {
    status = await sender.send(delivery, options.signal);
  } catch (thrown) {
    // Anything else (a bug, not the receiver) is retried too, so it cannot lose a delivery.
    const error =
      thrown instanceof WebhookDeliveryError
        ? thrown
        : new WebhookRetryableError(toError(thrown).message, webhookDetail(delivery.url, null), { cause: thrown });
    const at = (deps.clock ?? systemClock).now();
    const outcome = { status: error.status, error: error.message, at };
    if (options.signal?.aborted) {
      await recordAttempt(store, deliveryId, 'pending', outcome);
      logger.info({ ...log, err: error }, 'webhook attempt interrupted by shutdown; handed back');
      return { outcome: 'interrupted', error };
    }
    if (!error.retryable || options.finalAttempt) {
      await recordAttempt(store, deliveryId, 'failed', outcome);
      logger.error(
        { ...log, status: error.status, err: error },
        error.retryable ? 'webhook delivery failed: attempts spent' : 'webhook delivery refused; not retried',
      );
      return { outcome: 'failed', error };
    }
    await recordAttempt(store, deliveryId, 'pending', outcome);
    logger.warn(
      { ...log, status: error.status, retryAfterMs: error.retryAfterMs ?? undefined, err: error },
      'webhook attempt failed; will retry',
    );
    return { outcome: 'retry', error };
  }
  await recordAttempt(store, deliveryId, 'delivered', { status, error: null, at: (deps.clock ?? systemClock).now() });
  logger.info({ ...log, status }, 'webhook delivered');
  return { outcome: 'delivered', status };
}
