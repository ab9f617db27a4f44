import type { FastifyRequest } from 'fastify';
import type { AuditContext } from '../db/audit.js';
import { callerOf } from './api/local-credential.js';
import type { UiLogin } from './ui/sessions.js';

/**
 * The audit context of an HTTP call (src/db/audit.ts): who asks, by the caller's principal, and
 * the call's id, Fastify's `request.id`, which the server answers as `x-request-id`
 * (src/http/app.ts) so a row can be matched with the call's log lines.
 */
export function apiAuditContext(request: FastifyRequest): AuditContext {
  return { actor: callerOf(request).principal.actor, httpRequestId: request.id };
}

/** The same for a web UI page's action, by the logged-in session. */
export function uiAuditContext(request: FastifyRequest, session: UiLogin): AuditContext {
  return { actor: session.actor, httpRequestId: request.id };
}
