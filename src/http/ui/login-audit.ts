import { appendAudit } from '../../db/audit.js';
import type { History } from '../../db/history.js';
import type { LoginVia } from './sessions.js';

/** Actor of a login refused before anyone was known (a wrong token or password, an edited callback). */
export const UNKNOWN_UI_ACTOR = 'ui:unknown';

export interface LoginEvent {
  action: 'ui.login' | 'ui.logout';
  outcome: 'ok' | 'refused';
  via: LoginVia | undefined;
  actor: string;
  /** The session's owner; null when the login was refused before one was known. */
  owner: string | null;
  /** Fastify's id of the HTTP request (its `x-request-id`). */
  httpRequestId: string;
  /** Why a login was refused, in words for an admin: never a token, password or code. */
  reason?: string;
  at: number;
}

/**
 * One audit row for a login or logout of the web UI: `detail` is JSON, `{"via": "oidc", "reason": …}`.
 * A login changes no history, so the row is written alone. Logins refused past the failed-login
 * bound (429) write none: a guesser cannot fill the log faster than that bound.
 */
export async function auditLogin(store: History, e: LoginEvent): Promise<void> {
  await appendAudit(store, {
    at: e.at,
    actor: e.actor,
    owner: e.owner,
    action: e.action,
    target: null,
    outcome: e.outcome,
    httpRequestId: e.httpRequestId,
    detail: JSON.stringify({ via: e.via ?? null, ...(e.reason && { reason: e.reason }) }),
  });
}
