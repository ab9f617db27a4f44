import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { getRun, stepRequests } from '../../../db/runs.js';
import { summaryOfRun } from '../../../db/summaries.js';
import { jobView, runView, summaryView } from '../../../views/views.js';
import type { ApiDeps } from '../../deps.js';
import { runsPage } from '../../queries.js';
import { viewerOf } from '../../scopes.js';
import { NotFoundApiError } from '../api-errors.js';
import { decodeCursor, encodeCursor } from '../cursor.js';
import { answer, errors, idParams, pageOf } from '../shared-schemas.js';
import { runDetailSchema, runSchema, runsQuery } from './runs.schema.js';
import { bearer } from './security.js';

/** `/api/v1/runs`: pipeline runs and their steps. */
export const runRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps }> = async (app, { deps }) => {
  app.get(
    '/api/v1/runs',
    {
      config: { scope: 'read' },
      schema: {
        tags: ['pipelines'],
        summary: 'List pipeline runs',
        description: 'Newest first, a page at a time. Scope: read.',
        security: bearer,
        querystring: runsQuery,
        response: { 200: answer('a page of runs', pageOf(runSchema)), ...errors(400, 401, 403, 429) },
      },
    },
    async (request) => {
      const q = request.query;
      const rows = runsPage(deps.db, {
        pipeline: q.pipeline,
        states: q.state,
        after: q.cursor === undefined ? undefined : decodeCursor(q.cursor, ['number', 'string'] as const),
        limit: q.limit,
      });
      const page = rows.slice(0, q.limit);
      const last = page.at(-1);
      return {
        items: page.map((run) => runView(run, viewerOf(request.apiToken))),
        next: rows.length > q.limit && last ? encodeCursor([last.createdAt, last.id]) : null,
      };
    },
  );

  app.get(
    '/api/v1/runs/:id',
    {
      config: { scope: 'read' },
      schema: {
        tags: ['pipelines'],
        summary: 'Show a pipeline run',
        description:
          'The run, the job request of each of its steps (every attempt), and its summary once it has ended. Scope: read.',
        security: bearer,
        params: idParams,
        response: { 200: answer('the run', runDetailSchema), ...errors(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const run = getRun(deps.db, request.params.id);
      if (!run) throw new NotFoundApiError(`no pipeline run ${request.params.id}`);
      const summary = summaryOfRun(deps.db, run.id);
      return {
        ...runView(run, viewerOf(request.apiToken)),
        definition: run.definition,
        steps: stepRequests(deps.db, run.id).map((row) => jobView(row, viewerOf(request.apiToken))),
        summary: summaryView(summary ? { of: 'run', summary } : null),
      };
    },
  );
};
