/**
 * Job names of the notify queue: one delivery of the outbox (its id is the delivery's, so it is
 * never queued twice), or the tick that relays pending deliveries from the history to the queue
 * (the relay is the queue's definition's, workers/notify.ts).
 */
export const DELIVER_JOB = 'deliver';
export const DISPATCH_JOB = 'dispatch';
