import { randomUUID } from 'node:crypto';
import { and, asc, eq, sql } from 'drizzle-orm';
import type { Db } from './database.js';
import { type WebhookDeliveryRow, type WebhookEvent, webhookDeliveries } from './schema.js';
import type { WebhookBodies, WebhookPayload } from './webhook-payloads.js';

/**
 * Queries of the webhook outbox. A delivery is written in the same transaction
 * as the change it reports, so a change is never recorded without its
 * webhook; the notify queue sends it later and records every attempt here.
 */

export interface NewDelivery<E extends WebhookEvent> {
  event: E;
  url: string;
  requestId?: string | null;
  runId?: string | null;
  /** The event's members; the envelope (event, id, occurred_at) is added here. */
  payload: WebhookBodies[E];
  /** When what is reported happened (ms). @defaultValue now */
  at?: number;
}

/**
 * Adds a `pending` delivery; call it with the transaction that records what it
 * reports. Returns the delivery id (a uuid, also the payload's `id`).
 */
export function addDelivery<E extends WebhookEvent>(tx: Db, delivery: NewDelivery<E>): string {
  const id = randomUUID();
  const at = delivery.at ?? Date.now();
  const payload = {
    event: delivery.event,
    id,
    occurred_at: new Date(at).toISOString(),
    ...delivery.payload,
  } as WebhookPayload<E>;
  const now = Date.now();
  tx.insert(webhookDeliveries)
    .values({
      id,
      event: delivery.event,
      url: delivery.url,
      requestId: delivery.requestId ?? null,
      runId: delivery.runId ?? null,
      payload,
      state: 'pending',
      createdAt: now,
      updatedAt: now,
    })
    .run();
  return id;
}

export function getDelivery(db: Db, id: string): WebhookDeliveryRow | undefined {
  return db.select().from(webhookDeliveries).where(eq(webhookDeliveries.id, id)).get();
}

/** Ids of deliveries still to send, oldest first (the state index answers it alone). */
export function pendingDeliveryIds(db: Db, limit = 1000): string[] {
  return db
    .select({ id: webhookDeliveries.id })
    .from(webhookDeliveries)
    .where(eq(webhookDeliveries.state, 'pending'))
    .orderBy(asc(webhookDeliveries.createdAt))
    .limit(limit)
    .all()
    .map((r) => r.id);
}

export interface AttemptOutcome {
  /** The receiver's HTTP status; null when no answer came (network error, timeout). */
  status: number | null;
  error: string | null;
  at: number;
}

/**
 * Records one attempt. `state` is where the delivery goes: `delivered` (a 2xx),
 * `failed` (refused, or attempts spent) or `pending` (to be retried). Only a
 * pending delivery changes, so a late or repeated outcome never undoes one
 * already settled. Returns false when the delivery was not pending.
 */
export function recordAttempt(
  db: Db,
  id: string,
  state: WebhookDeliveryRow['state'],
  outcome: AttemptOutcome,
): boolean {
  const result = db
    .update(webhookDeliveries)
    .set({
      state,
      attempts: sql`${webhookDeliveries.attempts} + 1`,
      lastStatus: outcome.status,
      lastError: outcome.error,
      deliveredAt: state === 'delivered' ? outcome.at : null,
      updatedAt: outcome.at,
    })
    .where(and(eq(webhookDeliveries.id, id), eq(webhookDeliveries.state, 'pending')))
    .run();
  return result.changes > 0;
}

/**
 * Fails a pending delivery without an attempt: its queue job gave up outside
 * an attempt (stalled too often, or a crash before the outcome was written).
 */
export function markDeliveryFailed(db: Db, id: string, error: string, at = Date.now()): boolean {
  const result = db
    .update(webhookDeliveries)
    .set({ state: 'failed', lastError: error, updatedAt: at })
    .where(and(eq(webhookDeliveries.id, id), eq(webhookDeliveries.state, 'pending')))
    .run();
  return result.changes > 0;
}

/** Deliveries about a request, oldest first. */
export function deliveriesOfRequest(db: Db, requestId: string): WebhookDeliveryRow[] {
  return db
    .select()
    .from(webhookDeliveries)
    .where(eq(webhookDeliveries.requestId, requestId))
    .orderBy(asc(webhookDeliveries.createdAt))
    .all();
}

/** Deliveries carrying this run id, oldest first (no index: runs have a handful). */
export function deliveriesOfRun(db: Db, runId: string): WebhookDeliveryRow[] {
  return db
    .select()
    .from(webhookDeliveries)
    .where(eq(webhookDeliveries.runId, runId))
    .orderBy(asc(webhookDeliveries.createdAt))
    .all();
}
