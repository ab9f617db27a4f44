import type { AuditRow } from '../db/schema.js';

/** An audit row in the words users see (snake_case, ISO time): the API's answer and `schedflow audit --json`. */
export function auditRowView(row: AuditRow) {
  return {
    id: row.id,
    at: new Date(row.at).toISOString(),
    actor: row.actor,
    owner: row.owner,
    action: row.action,
    target: row.target,
    outcome: row.outcome,
    http_request_id: row.httpRequestId,
    detail: row.detail,
  };
}
