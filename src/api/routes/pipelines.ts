import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ConfigError } from '../../errors.js';
import type { PipelineService } from '../../pipelines/pipeline-service.js';
import { NotFoundApiError, UnavailableApiError, ValidationApiError } from '../api-errors.js';
import type { ApiDeps } from '../deps.js';
import { idempotently } from '../idempotency.js';
import {
  answer,
  errors,
  idempotencyHeaders,
  pipelineNameParams,
  pipelineSchema,
  runSchema,
  triggerRunBody,
} from '../schemas.js';
import { pipelineView, runLink, runView } from '../views.js';
import { bearer } from './security.js';

/** `/api/v1/pipelines`: the loaded pipeline files, and runs started by hand. */
export const pipelineRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps }> = async (app, { deps }) => {
  const service = (): PipelineService => {
    if (!deps.pipelines) throw new UnavailableApiError('pipelines not loaded', 5);
    return deps.pipelines;
  };

  app.get(
    '/api/v1/pipelines',
    {
      config: { scope: 'read' },
      schema: {
        tags: ['pipelines'],
        summary: 'List pipelines',
        description:
          'Every pipeline file of the pipelines folder, with its steps, parameters, schedule and next five fire times; a file whose last edit is invalid shows its problem in `error` (the version loaded before keeps running). Scope: read.',
        security: bearer,
        response: {
          200: answer('the pipelines', z.object({ items: z.array(pipelineSchema) })),
          ...errors(401, 403, 429, 503),
        },
      },
    },
    async () => ({ items: service().list().map(pipelineView) }),
  );

  app.post(
    '/api/v1/pipelines/:name/runs',
    {
      config: { scope: 'submit' },
      schema: {
        tags: ['pipelines'],
        summary: 'Start a pipeline run',
        description:
          'Starts a run now with the given parameters (a run asked for by hand is not subject to the schedule’s overlap policy). Scope: submit.',
        security: bearer,
        headers: idempotencyHeaders,
        params: pipelineNameParams,
        body: triggerRunBody,
        response: {
          201: answer('the run', runSchema),
          ...errors(400, 401, 403, 404, 409, 413, 429, 503),
        },
      },
    },
    async (request, reply) =>
      idempotently(deps.db, request, reply, async () => {
        const pipelines = service();
        const name = request.params.name;
        if (!pipelines.get(name)) throw new NotFoundApiError(`no pipeline "${name}"`);
        try {
          const run = await pipelines.trigger(name, {
            params: request.body.params,
            trigger: 'api',
            webhookUrl: request.body.webhook_url ?? null,
          });
          return { status: 201, body: runView(run), headers: { location: runLink(run.id) } };
        } catch (error) {
          // Bad parameters: the message names the parameter.
          if (error instanceof ConfigError)
            throw new ValidationApiError([{ in: 'body', path: 'params', reason: error.message }]);
          throw error;
        }
      }),
  );
};
