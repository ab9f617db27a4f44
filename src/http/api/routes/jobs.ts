import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { getProfileSync } from '../../../db/accounting.js';
import { replaysOf } from '../../../db/idempotency.js';
import { getRequest, requestStateOf, transitionsOf } from '../../../db/requests.js';
import type { Deadlines } from '../../../db/schema.js';
import { summaryOfRequest } from '../../../db/summaries.js';
import { cancelRequest } from '../../../requests/canceller.js';
import { summaryForRequest } from '../../../summaries/show.js';
import {
  deduplicatedView,
  freshnessView,
  jobLink,
  jobView,
  summaryView,
  transitionView,
} from '../../../views/views.js';
import type { ApiDeps } from '../../deps.js';
import { jobsPage } from '../../queries.js';
import { viewerOf } from '../../scopes.js';
import { ConflictApiError, NotFoundApiError, ValidationApiError } from '../api-errors.js';
import { decodeCursor, encodeCursor } from '../cursor.js';
import { type Answer, idempotently } from '../idempotency.js';
import { answer, errors, idempotencyHeaders, idParams, pageOf } from '../shared-schemas.js';
import {
  cancelAnswerSchema,
  createdJobSchema,
  type deadlinesInput,
  jobDetailSchema,
  jobSchema,
  listJobsQuery,
  resubmittedJobSchema,
  submitJobBody,
} from './jobs.schema.js';
import { bearer } from './security.js';

/** `/api/v1/jobs`: submit, list, show, cancel and re-submit (with a summary's suggestion) job requests. */
export const jobRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps }> = async (app, { deps }) => {
  const { db } = deps;
  // Every answer here names a request (`id`): a replay of one is recorded on it, as deduplicated.
  const idempotentlyFor = (
    request: FastifyRequest,
    reply: FastifyReply,
    work: (stableId: string | null) => Promise<Answer>,
  ) => idempotently(db, request, reply, work, { requestOf: requestIdOf });

  app.post(
    '/api/v1/jobs',
    {
      config: { scope: 'submit' },
      schema: {
        tags: ['jobs'],
        summary: 'Submit a job',
        description:
          'Records a job request and queues its submission to the scheduler (exactly one scheduler job per request). Scope: submit.',
        security: bearer,
        headers: idempotencyHeaders,
        body: submitJobBody,
        response: {
          201: answer('queued; `links.self` follows it', createdJobSchema),
          ...errors(400, 401, 403, 409, 413, 415, 429),
        },
      },
    },
    async (request, reply) =>
      idempotentlyFor(request, reply, async (stableId) => {
        const body = request.body;
        if (body.profile !== undefined && !deps.profiles.has(body.profile)) {
          throw new ValidationApiError([
            {
              in: 'body',
              path: 'profile',
              reason: `no scheduler profile "${body.profile}" (have: ${[...deps.profiles.keys()].join(', ')})`,
            },
          ]);
        }
        const id = await deps.submit({
          profile: body.profile,
          spec: body.spec,
          origin: 'api',
          requestId: stableId ?? undefined,
          webhookUrl: body.webhook_url ?? null,
          deadlines: deadlinesOf(body.deadlines),
          summarize: body.summarize ?? null,
        });
        // Its state alone: the row would parse the spec just accepted again.
        const state = requestStateOf(db, id);
        return {
          status: 201,
          body: { id, state: state ?? 'queued', links: { self: jobLink(id) } },
          headers: { location: jobLink(id) },
        };
      }),
  );

  app.get(
    '/api/v1/jobs',
    {
      config: { scope: 'read' },
      schema: {
        tags: ['jobs'],
        summary: 'List job requests',
        description: 'Newest first, a page at a time: pass `next` as `cursor` for the next page. Scope: read.',
        security: bearer,
        querystring: listJobsQuery,
        response: { 200: answer('a page of job requests', pageOf(jobSchema)), ...errors(400, 401, 403, 429) },
      },
    },
    async (request) => {
      const q = request.query;
      const rows = jobsPage(db, {
        states: q.state,
        profile: q.profile,
        pipeline: q.pipeline,
        runId: q.run_id,
        createdSince: q.created_since === undefined ? undefined : Date.parse(q.created_since),
        createdUntil: q.created_until === undefined ? undefined : Date.parse(q.created_until),
        after: q.cursor === undefined ? undefined : decodeCursor(q.cursor, ['number', 'string'] as const),
        limit: q.limit,
      });
      const page = rows.slice(0, q.limit);
      const last = page.at(-1);
      return {
        items: page.map((row) => jobView(row, viewerOf(request.apiToken))),
        next: rows.length > q.limit && last ? encodeCursor([last.createdAt, last.id]) : null,
      };
    },
  );

  app.get(
    '/api/v1/jobs/:id',
    {
      config: { scope: 'read' },
      schema: {
        tags: ['jobs'],
        summary: 'Show a job request',
        description:
          "Its state, every transition, the duplicate submissions answered with it (Idempotency-Key replays), how fresh the state is (the profile's last poll and the job's last sighting), and its summary once it has ended (a pipeline step: its run's). Scope: read.",
        security: bearer,
        params: idParams,
        response: { 200: answer('the job request', jobDetailSchema), ...errors(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      const row = getRequest(db, request.params.id);
      if (!row) throw new NotFoundApiError(`no job request ${request.params.id}`);
      return {
        ...jobView(row, viewerOf(request.apiToken)),
        spec: row.spec as Record<string, unknown>,
        transitions: transitionsOf(db, row.id).map(transitionView),
        deduplicated: replaysOf(db, row.id).map(deduplicatedView),
        freshness: freshnessView(row, getProfileSync(db, row.profile), deps.settings.pollCeilingMs),
        summary: summaryView(summaryForRequest(db, row)),
      };
    },
  );

  app.post(
    '/api/v1/jobs/:id/resubmit',
    {
      config: { scope: 'submit' },
      schema: {
        tags: ['jobs'],
        summary: "Apply a summary's suggested change",
        description: [
          'Queues a new request with the spec changed as the summary proposes (more memory, a longer limit, another partition), linked to this one (201).',
          'Applying again answers the request made the first time (200).',
          'Nothing to apply (no summary, no suggestion, or a pipeline step, whose change belongs in the pipeline file): 409 `SCHEDFLOW_ERR_NO_SUGGESTION`; a summary still being written: 409 `SCHEDFLOW_ERR_SUMMARY_PENDING`. Scope: submit.',
        ].join(' '),
        security: bearer,
        headers: idempotencyHeaders,
        params: idParams,
        response: {
          200: answer('applied before: the request made then', resubmittedJobSchema),
          201: answer('queued; `links.self` follows the new request', resubmittedJobSchema),
          ...errors(400, 401, 403, 404, 409, 413, 415, 429),
        },
      },
    },
    async (request, reply) =>
      idempotentlyFor(request, reply, async (stableId) => {
        const id = request.params.id;
        if (!getRequest(db, id)) throw new NotFoundApiError(`no job request ${id}`);
        const before = summaryOfRequest(db, id)?.appliedRequestId ?? null;
        // Its refusals carry their own codes: 409 NO_SUGGESTION, 409 SUMMARY_PENDING, 404 NOT_FOUND.
        const newId = await deps.resubmit(id, stableId ?? undefined);
        return {
          status: before === newId ? 200 : 201,
          body: {
            id: newId,
            state: getRequest(db, newId)?.state ?? 'queued',
            resubmits: id,
            changes: summaryOfRequest(db, id)?.suggestion?.changes ?? {},
            links: { self: jobLink(newId) },
          },
          headers: { location: jobLink(newId) },
        };
      }),
  );

  app.delete(
    '/api/v1/jobs/:id',
    {
      config: { scope: 'cancel' },
      schema: {
        tags: ['jobs'],
        summary: 'Cancel a job',
        description: [
          'Not submitted yet: its submission is withdrawn and it is cancelled here (200).',
          'Submitted, pending or running: the scheduler is asked to cancel it (202); the next poll records CANCELLED.',
          'Being submitted right now: 409 with Retry-After. Already ended: 409 naming its state.',
          "Scheduler errors: 502 (refused) or 503 (unreachable), with the scheduler's status and message. Scope: cancel.",
        ].join(' '),
        security: bearer,
        params: idParams,
        response: {
          200: answer('cancelled before submission', cancelAnswerSchema),
          202: answer('cancel sent to the scheduler', cancelAnswerSchema),
          ...errors(400, 401, 403, 404, 409, 413, 415, 429, 502, 503),
        },
      },
    },
    async (request, reply) => {
      const id = request.params.id;
      const who = `API token "${request.apiToken?.name ?? '?'}"`;
      const outcome = await cancelRequest(
        { db, submitQueue: deps.queues.submit, clients: deps.clients, logger: deps.logger },
        id,
        { source: 'api', who },
      );
      switch (outcome.kind) {
        case 'not_found':
          throw new NotFoundApiError(`no job request ${id}`);
        case 'ended':
          throw new ConflictApiError(
            'SCHEDFLOW_ERR_JOB_ENDED',
            outcome.upstream
              ? `job ${outcome.row.jobId} has already ended upstream (${outcome.upstream}); its final state is recorded at the next poll`
              : `job request ${id} has already ended: ${outcome.row.state}`,
            { extra: { state: outcome.row.state } },
          );
        case 'submitting':
          throw new ConflictApiError(
            'SCHEDFLOW_ERR_JOB_SUBMITTING',
            `job request ${id} is being submitted right now; cancel it again once it is submitted`,
            { retryAfterSec: outcome.retryAfterSec, extra: { state: outcome.row.state } },
          );
        case 'cancelled':
          return reply.code(200).send({
            id,
            state: outcome.row.state,
            message: 'cancelled before it was submitted',
            links: { self: jobLink(id) },
          });
        case 'requested':
          return reply.code(202).send({
            id,
            state: outcome.row.state,
            message: `cancel of job ${outcome.row.jobId} sent to the scheduler; the next poll records CANCELLED`,
            links: { self: jobLink(id) },
          });
      }
    },
  );
};

function requestIdOf(body: unknown): string | undefined {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === 'string' ? id : undefined;
}

function deadlinesOf(input: z.output<typeof deadlinesInput> | undefined): Deadlines | null {
  if (!input) return null;
  const deadlines: Deadlines = {
    ...(input.max_pending !== undefined && { maxPendingSec: input.max_pending }),
    ...(input.start_by !== undefined && { startBy: Date.parse(input.start_by) }),
    ...(input.finish_by !== undefined && { finishBy: Date.parse(input.finish_by) }),
  };
  return Object.keys(deadlines).length > 0 ? deadlines : null;
}
