import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Principal } from '../../../access/principal.js';
import { refuseUnboundProfile } from '../../../access/quota.js';
import { mayUsePipeline } from '../../../access/visibility.js';
import { ConfigError } from '../../../errors.js';
import { WebhookTargets } from '../../../notify/webhook-target.js';
import type { PipelineService } from '../../../pipelines/pipeline-service.js';
import { pipelineView, runLink, runView } from '../../../views/views.js';
import { apiAuditContext } from '../../audit-context.js';
import type { ApiDeps } from '../../deps.js';
import { viewerOf } from '../../scopes.js';
import { principalOf } from '../access.js';
import {
  ConflictApiError,
  NotFoundApiError,
  UnavailableApiError,
  ValidationApiError,
  WebhookTargetApiError,
} from '../api-errors.js';
import { idempotently } from '../idempotency.js';
import { callerOf } from '../local-credential.js';
import { answer, errors, idempotencyHeaders } from '../shared-schemas.js';
import { pipelineNameParams, pipelineSchema, triggerRunBody } from './pipelines.schema.js';
import { runSchema } from './runs.schema.js';
import { bearer } from './security.js';

/** What pausing and resuming a schedule say in the OpenAPI document. */
const SCHEDULE_ACTIONS = {
  pause: {
    operationId: 'pausePipelineSchedule',
    summary: "Pause a pipeline's schedule",
    description:
      'Its cron ticks make no runs until it is resumed, in every daemon sharing the history and after a restart; starting a run by hand still works. Pausing a paused schedule keeps the first pause (who and when). 409 for a pipeline without a schedule. Scope: submit, on a pipeline of the caller’s owner or one whose `allow:` names it (any other answers 404, as an unknown pipeline); admin: any.',
  },
  resume: {
    operationId: 'resumePipelineSchedule',
    summary: "Resume a pipeline's paused schedule",
    description:
      'Its ticks make runs again from the next one; those that fell while paused are not caught up. A file with `schedule.enabled: false` keeps the schedule off (the file wins). 409 for a pipeline without a schedule. Scope: submit, on a pipeline of the caller’s owner or one whose `allow:` names it (any other answers 404, as an unknown pipeline); admin: any.',
  },
} as const;

/** `/api/v1/pipelines`: the loaded pipeline files, runs started by hand, and pausing schedules. */
export const pipelineRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps }> = async (app, { deps }) => {
  const service = (): PipelineService => {
    if (!deps.pipelines) throw new UnavailableApiError('pipelines not loaded', 5);
    return deps.pipelines;
  };
  const webhookTargets = deps.webhookTargets ?? new WebhookTargets();
  /** The pipelines the principal may read: another owner's reads as one that does not exist. */
  const visible = async (principal: Principal) =>
    (await service().list()).filter((p) => mayUsePipeline(principal, p, 'read'));

  app.get(
    '/api/v1/pipelines',
    {
      config: { scope: 'read' },
      schema: {
        tags: ['pipelines'],
        operationId: 'listPipelines',
        summary: 'List pipelines',
        description:
          'Every pipeline file of the pipelines folder, with its steps, parameters, schedule and next five fire times; a file whose last edit is invalid shows its problem in `error` (the version loaded before keeps running). Scope: read (or audit). Without admin or audit, only the pipelines of the caller’s owner and those whose `allow:` names it.',
        security: bearer,
        response: {
          200: answer('the pipelines', z.object({ items: z.array(pipelineSchema) })),
          ...errors(401, 403, 429, 503),
        },
      },
    },
    async (request) => ({ items: (await visible(principalOf(request))).map(pipelineView) }),
  );

  app.post(
    '/api/v1/pipelines/:name/runs',
    {
      config: { scope: 'submit' },
      schema: {
        tags: ['pipelines'],
        operationId: 'triggerPipelineRun',
        summary: 'Start a pipeline run',
        description:
          'Starts a run now with the given parameters (a run asked for by hand is not subject to the schedule’s overlap policy). A step the profile’s door refuses (its account, a missing scope, an array past `maxArraySize`): 422, no run made. A token bound to other profiles than the pipeline’s: 403 `SCHEDFLOW_ERR_PROFILE_NOT_ALLOWED`, no run made. Scope: submit, on a pipeline of the caller’s owner or one whose `allow:` names it (any other answers 404, as an unknown pipeline); admin: any. The run is the pipeline’s owner’s.',
        security: bearer,
        headers: idempotencyHeaders,
        params: pipelineNameParams,
        body: triggerRunBody,
        response: {
          201: answer('the run', runSchema),
          ...errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 503),
        },
      },
    },
    async (request, reply) =>
      idempotently(deps.store, request, reply, async () => {
        const pipelines = service();
        const name = request.params.name;
        const principal = principalOf(request);
        // Those it may change; another owner's pipeline is unknown, and not among the names listed.
        const usable = (await pipelines.list()).filter((p) => mayUsePipeline(principal, p, 'change'));
        const pipeline = usable.find((p) => p.name === name);
        if (!pipeline) {
          // The names it has, as the CLI said them when it asked the daemon by its queue.
          const known = usable.map((p) => p.name).join(', ') || 'none';
          throw new NotFoundApiError(`no pipeline "${name}" (pipelines: ${known})`);
        }
        // A token bound to other profiles than the one its steps go to (src/access/quota.ts): 403, no run.
        const token = request.apiToken;
        if (token && pipeline.profile !== null) {
          await refuseUnboundProfile(deps.store, {
            token,
            profile: pipeline.profile,
            actor: callerOf(request).principal.actor,
            owner: token.owner,
            action: 'run.trigger',
            target: `pipeline:${name}`,
            httpRequestId: request.id,
            at: Date.now(),
          });
        }
        const url = request.body.webhook_url;
        const inward = url === undefined ? null : webhookTargets.refusal(new URL(url));
        if (inward) throw new WebhookTargetApiError(inward);
        try {
          const caller = callerOf(request);
          const run = await pipelines.trigger(name, {
            params: request.body.params,
            trigger: caller.origin,
            triggeredBy: caller.who,
            actor: caller.principal.actor,
            httpRequestId: request.id,
            webhookUrl: request.body.webhook_url ?? null,
          });
          return {
            status: 201,
            body: runView(run, viewerOf(request.apiToken)),
            headers: { location: runLink(run.id) },
          };
        } catch (error) {
          // Bad parameters: the message names the parameter.
          if (error instanceof ConfigError)
            throw new ValidationApiError([{ in: 'body', path: 'params', reason: error.message }]);
          throw error;
        }
      }),
  );

  // No Idempotency-Key here: pausing or resuming twice leaves the same state.
  for (const action of ['pause', 'resume'] as const) {
    app.post(
      `/api/v1/pipelines/:name/${action}`,
      {
        config: { scope: 'submit' },
        schema: {
          tags: ['pipelines'],
          ...SCHEDULE_ACTIONS[action],
          security: bearer,
          params: pipelineNameParams,
          response: {
            200: answer('the pipeline, with its schedule as it is now', pipelineSchema),
            ...errors(400, 401, 403, 404, 409, 413, 415, 429, 503),
          },
        },
      },
      async (request) => {
        const pipelines = service();
        const name = request.params.name;
        const principal = principalOf(request);
        // Another owner's pipeline (not its own, not allowing it) answers as an unknown one.
        const pipeline = (await pipelines.list()).find(
          (p) => p.name === name && mayUsePipeline(principal, p, 'change'),
        );
        if (!pipeline) throw new NotFoundApiError(`no pipeline "${name}"`);
        if (!pipeline.schedule) {
          throw new ConflictApiError(
            'SCHEDFLOW_ERR_PIPELINE_NOT_SCHEDULED',
            `pipeline "${name}" has no schedule: it runs only when triggered`,
          );
        }
        const by = `token ${request.apiToken?.name ?? 'unknown'}`;
        const audit = apiAuditContext(request);
        const summary =
          action === 'pause' ? await pipelines.pause(name, by, audit) : await pipelines.resume(name, by, audit);
        return pipelineView(summary);
      },
    );
  }
};
