import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { listAudit } from '../../../db/audit.js';
import { auditRowView } from '../../../views/audit-view.js';
import type { ApiDeps } from '../../deps.js';
import { decodeCursor, encodeCursor } from '../cursor.js';
import { answer, errors, pageOf } from '../shared-schemas.js';
import { auditQuery, auditRowSchema } from './audit.schema.js';
import { bearer } from './security.js';

/** `/api/v1/audit`: the audit log, for admins and auditors (the `audit` scope): who did what, when. */
export const auditRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps }> = async (app, { deps }) => {
  app.get(
    '/api/v1/audit',
    {
      // `audit` (or `admin`, which holds every scope): a read, submit or cancel token gets 403.
      config: { scope: 'audit' },
      schema: {
        tags: ['audit'],
        operationId: 'listAudit',
        summary: 'List the audit log',
        description: [
          'Every state-changing action (accept, cancel, resubmit, retry-tasks, run trigger and cancel, schedule pause and resume, token changes, UI login and logout) as one row: newest first, a page at a time (pass `next` as `cursor`).',
          'Filters: `since` (ISO time), `owner`, `action`. Scope: audit or admin.',
        ].join(' '),
        security: bearer,
        querystring: auditQuery,
        response: { 200: answer('a page of audit rows', pageOf(auditRowSchema)), ...errors(400, 401, 403, 429) },
      },
    },
    async (request) => {
      const q = request.query;
      const rows = await listAudit(deps.store, {
        since: q.since === undefined ? undefined : Date.parse(q.since),
        owner: q.owner,
        action: q.action,
        beforeId: q.cursor === undefined ? undefined : decodeCursor(q.cursor, ['number'] as const)[0],
        // One more than the page: whether there is a next one.
        limit: q.limit + 1,
      });
      const page = rows.slice(0, q.limit);
      const last = page.at(-1);
      return {
        items: page.map(auditRowView),
        next: rows.length > q.limit && last ? encodeCursor([last.id]) : null,
      };
    },
  );
};
