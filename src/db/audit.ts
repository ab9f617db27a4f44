import { and, desc, eq, gte, lt, placeholder, type SQL } from 'drizzle-orm';
import type { History } from './history.js';
import type { AuditOutcome, AuditRow } from './schema.js';

/**
 * Queries of the audit log (src/db/schema.ts `audit_log`). A row is appended in the
 * transaction of the action it records (pass the transaction's `History`), so an action and its
 * row commit or roll back together; a refusal, which changes nothing, is appended alone.
 */

export interface AuditEntry {
  at: number;
  actor: string;
  /** Whose thing it acted on; null: nobody's (a login, a refusal before any target was known). */
  owner: string | null;
  action: string;
  target?: string | null;
  outcome: AuditOutcome;
  httpRequestId?: string | null;
  detail?: string | null;
}

/**
 * Who asks for an action the audit log records, and through which HTTP call: handed by a route
 * (the caller's principal's actor, Fastify's `request.id`, which the server answers as
 * `x-request-id`) down to the service that writes the action, which writes its row in the same
 * transaction. Absent: the daemon's own doing (a run's cancel cancelling its steps), not written.
 */
export interface AuditContext {
  actor: string;
  httpRequestId: string | null;
}

/** An action's row for `ctx`: the action's own fields, the context's actor and request id. */
export function auditEntryOf(ctx: AuditContext, row: Omit<AuditEntry, 'actor' | 'httpRequestId'>): AuditEntry {
  return { ...row, actor: ctx.actor, httpRequestId: ctx.httpRequestId };
}

/** Prepared once: every submission appends one, in its acceptance's commit. */
export async function appendAudit(h: History, entry: AuditEntry): Promise<void> {
  await h.preparedRun(
    'audit.append',
    () =>
      h.db.insert(h.t.auditLog).values({
        at: placeholder('at'),
        actor: placeholder('actor'),
        owner: placeholder('owner'),
        action: placeholder('action'),
        target: placeholder('target'),
        outcome: placeholder('outcome'),
        httpRequestId: placeholder('httpRequestId'),
        detail: placeholder('detail'),
      }),
    {
      at: entry.at,
      actor: entry.actor,
      owner: entry.owner ?? null,
      action: entry.action,
      target: entry.target ?? null,
      outcome: entry.outcome,
      httpRequestId: entry.httpRequestId ?? null,
      detail: entry.detail ?? null,
    },
  );
}

export interface AuditQuery {
  /** Rows at or after this time. */
  since?: number;
  owner?: string;
  /** Exactly this action (`request.cancel`). */
  action?: string;
  /** Rows older than this id (the cursor of the page before). */
  beforeId?: number;
  limit: number;
}

/** The newest rows first. */
export function listAudit(h: History, q: AuditQuery): Promise<AuditRow[]> {
  const t = h.t.auditLog;
  const where: SQL[] = [];
  if (q.since !== undefined) where.push(gte(t.at, q.since));
  if (q.owner !== undefined) where.push(eq(t.owner, q.owner));
  if (q.action !== undefined) where.push(eq(t.action, q.action));
  if (q.beforeId !== undefined) where.push(lt(t.id, q.beforeId));
  return h.all(
    h.db
      .select()
      .from(t)
      .where(where.length ? and(...where) : undefined)
      .orderBy(desc(t.id))
      .limit(q.limit),
  );
}
