import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { readOwner, seesExternalJobs } from '../../../access/visibility.js';
import { accountingHistory } from '../../../db/accounting.js';
import { historyView } from '../../../views/views.js';
import type { ApiDeps } from '../../deps.js';
import { principalOf } from '../access.js';
import { decodeCursor, encodeCursor } from '../cursor.js';
import { answer, errors, pageOf } from '../shared-schemas.js';
import { historyItemSchema, historyQuery } from './history.schema.js';
import { bearer } from './security.js';

/** `/api/v1/history`: accounting records, schedflow's jobs and external ones, beside the local state. */
export const historyRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps }> = async (app, { deps }) => {
  app.get(
    '/api/v1/history',
    {
      config: { scope: 'read' },
      schema: {
        tags: ['history'],
        operationId: 'listHistory',
        summary: 'Accounting history',
        description:
          "Slurm's accounting records of each profile's account (imported every minute), jobs schedflow did not submit included, with schedflow's own request beside its jobs. Newest submission first, a page at a time. Scope: read (or audit). Without admin or audit, only the records of the caller’s owner’s requests (and, for the `default` owner, external jobs).",
        security: bearer,
        querystring: historyQuery,
        response: {
          200: answer('a page of accounting records', pageOf(historyItemSchema)),
          ...errors(400, 401, 403, 429),
        },
      },
    },
    async (request) => {
      const q = request.query;
      const toSec = (iso: string | undefined) => (iso === undefined ? undefined : Math.floor(Date.parse(iso) / 1000));
      const rows = await accountingHistory(deps.store, {
        profile: q.profile,
        states: q.state
          ?.split(',')
          .map((s) => s.trim().toUpperCase())
          .filter(Boolean),
        sinceSec: toSec(q.since),
        untilSec: toSec(q.until),
        external: q.external === undefined ? undefined : q.external === 'true',
        owner: readOwner(principalOf(request)),
        ownerSeesExternal: seesExternalJobs(readOwner(principalOf(request))),
        after: q.cursor === undefined ? undefined : decodeCursor(q.cursor, ['number', 'number', 'string'] as const),
        // One more than the page: whether there is a next one.
        limit: q.limit + 1,
      });
      const page = rows.slice(0, q.limit);
      const last = page.at(-1)?.accounting;
      return {
        items: page.map(historyView),
        next: rows.length > q.limit && last ? encodeCursor([last.submitTime ?? 0, last.jobId, last.profile]) : null,
      };
    },
  );
};
