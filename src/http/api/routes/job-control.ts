import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { changeOwner, mayUsePipeline } from '../../../access/visibility.js';
import { getRequest } from '../../../db/requests.js';
import { controlPipelineRuns, controlRun, type RunControlKind, type StepControl } from '../../../pipelines/run-hold.js';
import { type ControlAction, type ControlDeps, controlRequest } from '../../../requests/job-control.js';
import { type ArrayExpression, ArraySyntaxError, parseArrayExpression } from '../../../sched/job-array.js';
import { jobLink, runLink } from '../../../views/views.js';
import { apiAuditContext } from '../../audit-context.js';
import type { ApiDeps } from '../../deps.js';
import { principalOf, runAccessOf } from '../access.js';
import { ConflictApiError, NotFoundApiError, UnavailableApiError, ValidationApiError } from '../api-errors.js';
import { callerOf } from '../local-credential.js';
import { answer, errors, idParams } from '../shared-schemas.js';
import { controlAnswerSchema, controlJobBody, updateJobBody } from './jobs.schema.js';
import { pipelineNameParams } from './pipelines.schema.js';
import { pipelineControlAnswerSchema, runControlAnswerSchema } from './runs.schema.js';
import { bearer } from './security.js';

const OWN_ONLY =
  'Scope: control. Without admin, only the caller’s owner’s requests: another owner’s id answers 404 exactly as an unknown id.';

const JOB_ACTIONS = {
  hold: {
    operationId: 'holdJob',
    summary: 'Hold a job',
    description: [
      'Submitted and pending: held in Slurm (a user hold, priority 0) until released.',
      'Not submitted yet: kept back, not submitted, until released (no Slurm job meanwhile).',
      'An array job: the whole array, or the tasks `indexes` names.',
      'The request shows `held` (by whom, since when); its timeline a line `Held`. A running job: 409 `SCHEDFLOW_ERR_JOB_CONTROL_REFUSED` in Slurm’s words. Already held: 200 with `changed: false`.',
      'Being submitted right now: 409 `SCHEDFLOW_ERR_JOB_SUBMITTING` with Retry-After. Ended: 409 `SCHEDFLOW_ERR_JOB_ENDED`.',
      OWN_ONLY,
    ].join(' '),
  },
  release: {
    operationId: 'releaseJob',
    summary: 'Release a held job',
    description: [
      'Submitted: released in Slurm. Not submitted yet: submitted within a few seconds.',
      'An array job: the whole array, or the tasks `indexes` names.',
      'Not held: 200 with `changed: false` (a job not submitted yet), or the release is sent to Slurm (a submitted one, which may have been held outside schedflow).',
      'Being submitted right now: 409 `SCHEDFLOW_ERR_JOB_SUBMITTING`. Ended: 409 `SCHEDFLOW_ERR_JOB_ENDED`.',
      OWN_ONLY,
    ].join(' '),
  },
} as const;

/** `/api/v1/jobs/:id/hold|release`, `PATCH /api/v1/jobs/:id`, and runs and pipelines held and released whole. */
export const jobControlRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps }> = async (app, { deps }) => {
  const controlDeps: ControlDeps = { store: deps.store, clients: deps.clients, logger: deps.logger };
  const byOf = (request: FastifyRequest) => {
    const { origin, principal } = callerOf(request);
    return { source: origin, actor: principal.actor, audit: apiAuditContext(request) };
  };

  /** One request's hold, release or update, answered; another owner's id as an unknown one. */
  const control = async (request: FastifyRequest, id: string, action: ControlAction, indexes: string | undefined) => {
    const tasks = indexes === undefined ? undefined : tasksOf(indexes);
    if (!(await getRequest(deps.store, id, { owner: changeOwner(principalOf(request)) }))) {
      throw new NotFoundApiError(`no job request ${id}`);
    }
    const outcome = await controlRequest(controlDeps, id, action, byOf(request), tasks);
    switch (outcome.kind) {
      case 'not_found':
        throw new NotFoundApiError(`no job request ${id}`);
      case 'ended':
        throw new ConflictApiError(
          'SCHEDFLOW_ERR_JOB_ENDED',
          `job request ${id} has already ended: ${outcome.row.state}`,
          {
            extra: { state: outcome.row.state },
          },
        );
      case 'submitting':
        throw new ConflictApiError(
          'SCHEDFLOW_ERR_JOB_SUBMITTING',
          `job request ${id} is being submitted right now; ask again once it is submitted`,
          { retryAfterSec: outcome.retryAfterSec, extra: { state: outcome.row.state } },
        );
      case 'unchanged':
      case 'done': {
        const row = outcome.row;
        return {
          id,
          state: row.state,
          changed: outcome.kind === 'done',
          where: outcome.kind === 'done' ? outcome.where : null,
          held: row.heldAt === null ? null : { by: row.heldBy ?? 'unknown', at: new Date(row.heldAt).toISOString() },
          message: outcome.message,
          links: { self: jobLink(id) },
        };
      }
    }
  };

  for (const kind of ['hold', 'release'] as const) {
    app.post(
      `/api/v1/jobs/:id/${kind}`,
      {
        config: { scope: 'control' },
        schema: {
          tags: ['jobs'],
          ...JOB_ACTIONS[kind],
          security: bearer,
          params: idParams,
          body: controlJobBody,
          response: {
            200: answer(kind === 'hold' ? 'held (or already held)' : 'released', controlAnswerSchema),
            ...errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 502, 503),
          },
        },
      },
      async (request) => control(request, request.params.id, { kind }, request.body?.indexes),
    );
  }

  app.patch(
    '/api/v1/jobs/:id',
    {
      config: { scope: 'control' },
      schema: {
        tags: ['jobs'],
        operationId: 'updateJob',
        summary: 'Update a job',
        description: [
          'Changes its time limit, partition, QOS, nice, name or comment.',
          'Not submitted yet: the spec it will be submitted with is changed, and checked as a submitted spec is (422 `SCHEDFLOW_ERR_JOB_UPDATE_INVALID` when it would not be valid).',
          'Submitted: updated in Slurm; what Slurm refuses comes back in its words, never retried: 409 `SCHEDFLOW_ERR_JOB_CONTROL_REFUSED` for the job’s state (a running job’s partition), 422 `SCHEDFLOW_ERR_JOB_UPDATE_INVALID` for the value (a time limit above the partition’s MaxTime).',
          'An array job: the whole array, or the tasks `indexes` names. Ended: 409 `SCHEDFLOW_ERR_JOB_ENDED`.',
          OWN_ONLY,
        ].join(' '),
        security: bearer,
        params: idParams,
        body: updateJobBody,
        response: {
          200: answer('updated', controlAnswerSchema),
          ...errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 502, 503),
        },
      },
    },
    async (request) => {
      const { indexes, ...change } = request.body;
      return control(request, request.params.id, { kind: 'update', change }, indexes);
    },
  );

  for (const kind of ['hold', 'release'] as const) {
    app.post(
      `/api/v1/runs/:id/${kind}`,
      {
        config: { scope: 'control' },
        schema: {
          tags: ['pipelines'],
          operationId: kind === 'hold' ? 'holdRun' : 'releaseRun',
          summary: kind === 'hold' ? 'Hold a pipeline run' : 'Release a held pipeline run',
          description: [
            kind === 'hold'
              ? 'Every step not running and not ended is held: a pending one in Slurm, one not submitted yet (waiting for the steps it needs) kept back. A running step is left as it is (`outcome: running`).'
              : 'Every step schedflow held is released.',
            '`steps` says what happened to each. A run that has ended: 409 `SCHEDFLOW_ERR_RUN_ENDED`.',
            'Scope: control. Without admin, only the runs of the caller’s owner and of the pipelines whose `allow:` names it: another run answers 404 as an unknown id.',
          ].join(' '),
          security: bearer,
          params: idParams,
          response: {
            200: answer('what was done to each step', runControlAnswerSchema),
            ...errors(400, 401, 403, 404, 409, 413, 415, 429, 503),
          },
        },
      },
      async (request) => {
        const id = request.params.id;
        const access = await runAccessOf(deps, principalOf(request), 'change');
        const outcome = await controlRun(controlDeps, id, kind, byOf(request), access);
        switch (outcome.kind) {
          case 'not_found':
            throw new NotFoundApiError(`no pipeline run ${id}`);
          case 'ended':
            throw new ConflictApiError(
              'SCHEDFLOW_ERR_RUN_ENDED',
              `pipeline run ${id} has already ended: ${outcome.run.state}`,
              {
                extra: { state: outcome.run.state },
              },
            );
          case 'done':
            return {
              id,
              state: outcome.run.state,
              message: describeSteps(kind, outcome.steps),
              steps: outcome.steps.map(stepView),
              links: { self: runLink(id) },
            };
        }
      },
    );

    app.post(
      `/api/v1/pipelines/:name/${kind}`,
      {
        config: { scope: 'control' },
        schema: {
          tags: ['pipelines'],
          operationId: kind === 'hold' ? 'holdPipeline' : 'releasePipeline',
          summary: kind === 'hold' ? "Hold a pipeline's active runs" : "Release a pipeline's held runs",
          description:
            'Every queued or running run of the pipeline, held or released as `POST /api/v1/runs/{id}/' +
            kind +
            '` does one. The schedule is not paused (pause it for that). Scope: control, on a pipeline of the caller’s owner or one whose `allow:` names it (any other answers 404, as an unknown pipeline); admin: any.',
          security: bearer,
          params: pipelineNameParams,
          response: {
            200: answer('what was done to each active run', pipelineControlAnswerSchema),
            ...errors(400, 401, 403, 404, 413, 415, 429, 503),
          },
        },
      },
      async (request) => {
        if (!deps.pipelines) throw new UnavailableApiError('pipelines not loaded', 5);
        const name = request.params.name;
        const principal = principalOf(request);
        const pipeline = (await deps.pipelines.list()).find(
          (p) => p.name === name && mayUsePipeline(principal, p, 'change'),
        );
        if (!pipeline) throw new NotFoundApiError(`no pipeline "${name}"`);
        const runs = await controlPipelineRuns(controlDeps, name, kind, byOf(request));
        return {
          pipeline: name,
          message: runs.length === 0 ? 'no active run' : `${runs.length} active run(s)`,
          runs: runs.map(({ run, steps }) => ({
            id: run.id,
            state: run.state,
            message: describeSteps(kind, steps),
            steps: steps.map(stepView),
            links: { self: runLink(run.id) },
          })),
        };
      },
    );
  }
};

/** Task indexes as the route reads them: a syntax error is the field's (400). */
function tasksOf(indexes: string): ArrayExpression {
  try {
    return parseArrayExpression(indexes);
  } catch (error) {
    if (!(error instanceof ArraySyntaxError)) throw error;
    throw new ValidationApiError([{ in: 'body', path: 'indexes', reason: error.message }]);
  }
}

function stepView(s: StepControl) {
  return { step: s.step, request_id: s.requestId, outcome: s.outcome, detail: s.detail };
}

/** `2 held (a, b), 1 running (c)`. */
export function describeSteps(kind: RunControlKind, steps: readonly StepControl[]): string {
  if (steps.length === 0) return kind === 'hold' ? 'no step left to hold' : 'no held step';
  const groups = new Map<string, string[]>();
  for (const s of steps) groups.set(s.outcome, [...(groups.get(s.outcome) ?? []), s.step]);
  return [...groups].map(([outcome, names]) => `${names.length} ${outcome} (${names.join(', ')})`).join(', ');
}
