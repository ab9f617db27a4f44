import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { getRun, runsPage, runTransitionsOf, stepRequests } from '../../../db/runs.js';
import { summaryOfRun } from '../../../db/summaries.js';
import { ConfigError, RunNotResumableError } from '../../../errors.js';
import { assertNever } from '../../../lib/assert-never.js';
import type { StepCancel } from '../../../pipelines/cancels-in-flight.js';
import {
  jobView,
  runDefinitionView,
  runLink,
  runOutputsView,
  runTransitionView,
  runView,
  summaryView,
} from '../../../views/views.js';
import { apiAuditContext } from '../../audit-context.js';
import type { ApiDeps } from '../../deps.js';
import { viewerOf } from '../../scopes.js';
import { principalOf, runAccessOf } from '../access.js';
import { ConflictApiError, NotFoundApiError, UnavailableApiError, ValidationApiError } from '../api-errors.js';
import { decodeCursor, encodeCursor } from '../cursor.js';
import { callerOf } from '../local-credential.js';
import { answer, errors, idParams, pageOf } from '../shared-schemas.js';
import {
  runCancelAnswerSchema,
  runDetailSchema,
  runResumeAnswerSchema,
  runResumeBody,
  runSchema,
  runsQuery,
} from './runs.schema.js';
import { bearer } from './security.js';

/** `/api/v1/runs`: pipeline runs and their steps. */
export const runRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps }> = async (app, { deps }) => {
  app.get(
    '/api/v1/runs',
    {
      config: { scope: 'read' },
      schema: {
        tags: ['pipelines'],
        operationId: 'listRuns',
        summary: 'List pipeline runs',
        description:
          'Newest first, a page at a time. Scope: read (or audit). Without admin or audit, only the runs of the caller’s owner and of the pipelines whose `allow:` names it.',
        security: bearer,
        querystring: runsQuery,
        response: { 200: answer('a page of runs', pageOf(runSchema)), ...errors(400, 401, 403, 429) },
      },
    },
    async (request) => {
      const q = request.query;
      const rows = await runsPage(deps.store, {
        pipeline: q.pipeline,
        states: q.state,
        access: await runAccessOf(deps, principalOf(request), 'read'),
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
        operationId: 'getRun',
        summary: 'Show a pipeline run',
        description:
          'The run, the job request of each of its steps (every attempt), its state changes, and its summary once it has ended. Scope: read (or audit). Without admin or audit, only the runs of the caller’s owner and of the pipelines whose `allow:` names it: another run answers 404 as an unknown id.',
        security: bearer,
        params: idParams,
        response: { 200: answer('the run', runDetailSchema), ...errors(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      // Another owner's run answers as an unknown one (src/access/visibility.ts).
      const run = await getRun(deps.store, request.params.id, await runAccessOf(deps, principalOf(request), 'read'));
      if (!run) throw new NotFoundApiError(`no pipeline run ${request.params.id}`);
      const summary = await summaryOfRun(deps.store, run.id);
      const steps = await stepRequests(deps.store, run.id);
      const transitions = await runTransitionsOf(deps.store, run.id);
      return {
        ...runView(run, viewerOf(request.apiToken)),
        definition: runDefinitionView(run.definition, viewerOf(request.apiToken)),
        outputs: runOutputsView(steps),
        steps: steps.map((row) => jobView(row, viewerOf(request.apiToken))),
        summary: summaryView(summary ? { of: 'run', summary } : null),
        transitions: transitions.map(runTransitionView),
      };
    },
  );

  app.post(
    '/api/v1/runs/:id/cancel',
    {
      config: { scope: 'cancel' },
      schema: {
        tags: ['pipelines'],
        operationId: 'cancelRun',
        summary: 'Cancel a pipeline run',
        description: [
          'Every step not yet ended is withdrawn (not submitted yet, including steps waiting on their dependencies: they are never submitted) or cancelled upstream (submitted); no step is retried after.',
          'Every step ended at once: the run is `cancelled` (200), and its webhook fires once. Otherwise 202: the run ends `cancelled` when the next polls record its jobs CANCELLED; a step being submitted right now is cancelled as soon as it is (`outcome: submitting`).',
          'Asking again answers where the cancel stands (200 once it is cancelled, with `cancel` saying when and by whom). A run that ended otherwise: 409 `SCHEDFLOW_ERR_RUN_ENDED` with its `state`. Scope: cancel. Without admin, only the runs of the caller’s owner and of the pipelines whose `allow:` names it: another run answers 404 as an unknown id.',
        ].join(' '),
        security: bearer,
        params: idParams,
        response: {
          200: answer('the run is cancelled', runCancelAnswerSchema),
          202: answer('cancel under way: steps are ending', runCancelAnswerSchema),
          ...errors(400, 401, 403, 404, 409, 413, 415, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const { pipelines, id, origin, who } = await changeableRun(deps, request);
      const outcome = await pipelines.cancelRun(id, { source: origin, who, audit: apiAuditContext(request) });
      switch (outcome.kind) {
        case 'not_found':
          throw new NotFoundApiError(`no pipeline run ${id}`);
        case 'ended':
          throw new ConflictApiError(
            'SCHEDFLOW_ERR_RUN_ENDED',
            `pipeline run ${id} has already ended: ${outcome.run.state}${outcome.run.detail ? ` (${outcome.run.detail})` : ''}`,
            { extra: { state: outcome.run.state } },
          );
        case 'cancelled':
        case 'cancelling': {
          const view = runView(outcome.run, viewerOf(request.apiToken));
          const message =
            outcome.kind === 'cancelling'
              ? `cancel under way: ${describeSteps(outcome.steps)}; the run ends cancelled once every step has ended`
              : outcome.already
                ? `already cancelled${view.cancel?.by ? ` by ${view.cancel.by}` : ''}${view.ended_at ? ` at ${view.ended_at}` : ''}`
                : `cancelled${outcome.steps.length ? `: ${describeSteps(outcome.steps)}` : ''}`;
          return reply.code(outcome.kind === 'cancelling' ? 202 : 200).send({
            id,
            state: outcome.run.state,
            message,
            cancel: view.cancel,
            steps: outcome.steps.map((s) => ({
              step: s.step,
              request_id: s.requestId,
              outcome: s.outcome,
              detail: s.detail,
            })),
            links: { self: runLink(id) },
          });
        }
        default:
          return assertNever(outcome);
      }
    },
  );

  app.post(
    '/api/v1/runs/:id/resume',
    {
      config: { scope: 'submit' },
      schema: {
        tags: ['pipelines'],
        operationId: 'resumeRun',
        summary: 'Resume a failed or cancelled pipeline run',
        description: [
          'A new attempt of the same run (its `attempt` one more, its state `running` again): the steps that completed keep their jobs and results; every other step (failed, cancelled, timed out, lost, never run because a step it needs failed) is submitted again as a new request of the run, its dependencies on kept steps met and only those among the steps run again sent to Slurm; a step using another step’s outputs is made once the values it waits on are known, as in a first attempt.',
          'Parameters are the run’s own unless `params` changes some (the steps run again are then rendered from the pipeline file as loaded now). The run’s and its steps’ `start_by`/`finish_by` move with the resume; its webhook is sent again when it ends.',
          'A run still queued or running, one that succeeded or was skipped, or one whose steps retention has pruned: 409 `SCHEDFLOW_ERR_RUN_NOT_RESUMABLE` with its `state`; of two resumes at once, one wins. A bad parameter: 400. Scope: submit (as for triggering a run). Without admin, only the runs of the caller’s owner and of the pipelines whose `allow:` names it: another run answers 404 as an unknown id.',
        ].join(' '),
        security: bearer,
        params: idParams,
        body: runResumeBody,
        response: {
          201: answer('the run is resumed: a new attempt', runResumeAnswerSchema),
          ...errors(400, 401, 403, 404, 409, 413, 415, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const { pipelines, id, origin, who } = await changeableRun(deps, request);
      try {
        const outcome = await pipelines.resumeRun(id, {
          source: origin,
          who,
          params: request.body.params,
          audit: apiAuditContext(request),
        });
        if (outcome.kind === 'not_found') throw new NotFoundApiError(`no pipeline run ${id}`);
        const { run, kept, again, later } = outcome;
        // Steps waiting on other steps' outputs are made later, by the run itself.
        const waiting = later.length ? `; ${later.join(', ')} once the outputs they wait on are known` : '';
        return reply.code(201).send({
          id,
          state: run.state,
          attempt: run.attempt,
          message: `resumed: attempt ${run.attempt} runs ${again.map((s) => s.step).join(', ')} again${waiting}${kept.length ? `; kept ${kept.join(', ')}` : ''}`,
          kept,
          steps: again.map((s) => ({ step: s.step, request_id: s.requestId })),
          links: { self: runLink(id) },
        });
      } catch (error) {
        if (error instanceof RunNotResumableError) {
          throw new ConflictApiError(error.code, error.message, { extra: { state: error.state } });
        }
        if (error instanceof ConfigError) {
          throw new ValidationApiError([{ in: 'body', path: 'params', reason: error.message }]);
        }
        throw error;
      }
    },
  );
};

/** `2 withdrawn (b, c), 1 cancel sent (a)`. */
/**
 * The run a route changes (cancel, resume), and who asks: a run the caller may not change
 * answers as an unknown one (src/access/visibility.ts).
 */
async function changeableRun(deps: ApiDeps, request: Parameters<typeof callerOf>[0] & { params: { id: string } }) {
  const { pipelines } = deps;
  if (!pipelines) throw new UnavailableApiError('pipelines not loaded', 5);
  const id = request.params.id;
  const { origin, who, principal } = callerOf(request);
  if (!(await getRun(deps.store, id, await runAccessOf(deps, principal, 'change')))) {
    throw new NotFoundApiError(`no pipeline run ${id}`);
  }
  return { pipelines, id, origin, who };
}

function describeSteps(steps: readonly StepCancel[]): string {
  if (steps.length === 0) return 'no step left to cancel';
  const groups = new Map<string, string[]>();
  for (const s of steps) groups.set(s.outcome, [...(groups.get(s.outcome) ?? []), s.step]);
  const words: Record<StepCancel['outcome'], string> = {
    withdrawn: 'withdrawn',
    cancel_sent: 'cancel sent',
    submitting: 'being submitted (cancelled once submitted)',
    error: 'cancel refused, tried again',
  };
  return [...groups]
    .map(([o, names]) => `${names.length} ${words[o as StepCancel['outcome']]} (${names.join(', ')})`)
    .join(', ');
}
