import type { FastifyInstance } from 'fastify';
import { seesEveryOwner } from '../../../access/principal.js';
import { listAudit } from '../../../db/audit.js';
import type { AuditRow } from '../../../db/schema.js';
import { queryField, sendPage, sessionOf, type UiContext } from '../context.js';
import { type Html, html, time } from '../html.js';
import { page, UI_PREFIX } from '../layout.js';
import { principalOfLogin, type UiLogin } from '../sessions.js';
import { dayRange, textField } from './common.js';

/** Rows a page shows; "Older" pages back from its last. */
const PAGE_ROWS = 100;

/** Whether the session may read the audit log: admins and auditors, who see every owner. */
export const readsAudit = (session: UiLogin): boolean => seesEveryOwner(principalOfLogin(session));

/**
 * The audit log (docs/audit.md): every state-changing action, newest first, filtered by day,
 * owner and action, for admin and auditor sessions only (as `GET /api/v1/audit`).
 */
export async function auditPages(app: FastifyInstance, { ctx }: { ctx: UiContext }): Promise<void> {
  app.get(`${UI_PREFIX}/audit`, async (request, reply) => {
    const session = sessionOf(request);
    if (!readsAudit(session)) {
      return reply.code(403).type('text/plain').send('the audit log is for admins and auditors');
    }
    const owner = queryField(request, 'owner');
    const action = queryField(request, 'action');
    const from = queryField(request, 'from');
    const before = Number(queryField(request, 'before'));
    const range = dayRange(from, undefined);
    const rows = await listAudit(ctx.deps.store, {
      since: range.sinceMs,
      owner,
      action,
      beforeId: Number.isSafeInteger(before) && before > 0 ? before : undefined,
      limit: PAGE_ROWS + 1,
    });
    const shown = rows.slice(0, PAGE_ROWS);
    const last = shown.at(-1);
    const older =
      rows.length > PAGE_ROWS && last
        ? html`<p><a href="${UI_PREFIX}/audit?${new URLSearchParams({
            ...(owner && { owner }),
            ...(action && { action }),
            ...(from && { from }),
            before: String(last.id),
          }).toString()}">Older</a></p>`
        : '';
    const body = html`<h1>Audit log</h1>
<p class="muted">Who did what, newest first: every cancel, re-submission, retry, run, schedule pause, token change and login (rows are never deleted by the daemon).</p>
<form class="filters" method="get" action="${UI_PREFIX}/audit" aria-label="filter the audit log">
${textField('from', 'From (day, UTC)', from, 'date')}
${textField('owner', 'Owner', owner)}
${textField('action', 'Action', action)}
<button type="submit">Filter</button></form>${auditTable(shown)}${older}`;
    return sendPage(reply, page({ title: 'Audit log', nav: 'audit', session, body }));
  });
}

function auditTable(rows: AuditRow[]): Html {
  if (rows.length === 0) return html`<p class="muted">No audit rows match.</p>`;
  return html`<div class="table-wrap"><table class="responsive"><thead><tr><th>When</th><th>Actor</th><th>Owner</th><th>Action</th><th>Target</th><th>Outcome</th><th>HTTP request</th><th>Detail</th></tr></thead><tbody>
${rows.map(
  (r) =>
    html`<tr><td data-label="When">${time(r.at)}</td><td data-label="Actor">${r.actor}</td><td data-label="Owner">${
      r.owner ?? '—'
    }</td><td data-label="Action">${r.action}</td><td data-label="Target">${r.target ?? '—'}</td><td data-label="Outcome">${
      r.outcome
    }</td><td data-label="HTTP request"><code>${r.httpRequestId ?? '—'}</code></td><td data-label="Detail">${
      r.detail ?? ''
    }</td></tr>`,
)}</tbody></table></div>`;
}
