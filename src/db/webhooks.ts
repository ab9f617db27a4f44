import { randomUUID } from 'node:crypto';
import { and, asc, eq, sql } from 'drizzle-orm';
import type { History } from './history.js';
import type { WebhookDeliveryRow, WebhookEvent } from './schema.js';
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
export async function addDelivery<E extends WebhookEvent>(tx: History, delivery: NewDelivery<E>): Promise<string> {
  const id = randomUUID();
  const at = delivery.at ?? Date.now();
  const payload = {
    event: delivery.event,
    id,
    occurred_at: new Date(at).toISOString(),
    ...delivery.payload,
  } as WebhookPayload<E>;
  const now = Date.now();
  await tx.run(
    tx.db.insert(tx.t.webhookDeliveries).values({
      id,
      event: delivery.event,
      url: delivery.url,
      requestId: delivery.requestId ?? null,
      runId: delivery.runId ?? null,
      payload,
      state: 'pending',
      createdAt: now,
      updatedAt: now,
    }),
  );
  return id;
}

export function getDelivery(h: History, id: string): Promise<WebhookDeliveryRow | undefined> {
  const t = h.t.webhookDeliveries;
  return h.one(h.db.select().from(t).where(eq(t.id, id)));
}

/** Ids of deliveries still to send, oldest first (the state index answers it alone). */
export async function pendingDeliveryIds(h: History, limit = 1000): Promise<string[]> {
  const t = h.t.webhookDeliveries;
  const rows = await h.all(
    h.db.select({ id: t.id }).from(t).where(eq(t.state, 'pending')).orderBy(asc(t.createdAt)).limit(limit),
  );
  return rows.map((r) => r.id);
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
 * already settled (by another host's worker too). Returns false when the delivery was not pending.
 */
export async function recordAttempt(
  h: History,
  id: string,
  state: WebhookDeliveryRow['state'],
  outcome: AttemptOutcome,
): Promise<boolean> {
  const t = h.t.webhookDeliveries;
  const changed = await h.run(
    h.db
      .update(t)
      .set({
        state,
        attempts: sql`${t.attempts} + 1`,
        lastStatus: outcome.status,
        lastError: outcome.error,
        deliveredAt: state === 'delivered' ? outcome.at : null,
        updatedAt: outcome.at,
      })
      .where(and(eq(t.id, id), eq(t.state, 'pending'))),
  );
  return changed > 0;
}

/**
 * Fails a pending delivery without an attempt: its queue job gave up outside
 * an attempt (stalled too often, or a crash before the outcome was written).
 */
export async function markDeliveryFailed(h: History, id: string, error: string, at = Date.now()): Promise<boolean> {
  const t = h.t.webhookDeliveries;
  const changed = await h.run(
    h.db
      .update(t)
      .set({ state: 'failed', lastError: error, updatedAt: at })
      .where(and(eq(t.id, id), eq(t.state, 'pending'))),
  );
  return changed > 0;
}

/** Deliveries about a request, oldest first. */
export function deliveriesOfRequest(h: History, requestId: string): Promise<WebhookDeliveryRow[]> {
  const t = h.t.webhookDeliveries;
  return h.all(h.db.select().from(t).where(eq(t.requestId, requestId)).orderBy(asc(t.createdAt)));
}

/** Deliveries carrying this run id, oldest first (no index: runs have a handful). */
export function deliveriesOfRun(h: History, runId: string): Promise<WebhookDeliveryRow[]> {
  const t = h.t.webhookDeliveries;
  return h.all(h.db.select().from(t).where(eq(t.runId, runId)).orderBy(asc(t.createdAt)));
}
