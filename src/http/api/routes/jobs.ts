import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { changeOwner, readOwner } from '../../../access/visibility.js';
import { getProfileSync } from '../../../db/accounting.js';
import { tasksOf } from '../../../db/array-tasks.js';
import type { History } from '../../../db/history.js';
import { replaysOf } from '../../../db/idempotency.js';
import { getReadableRequest, getRequest, jobsPage, requestStateOf, transitionsOf } from '../../../db/requests.js';
import type { Deadlines, JobRequestRow } from '../../../db/schema.js';
import { summaryOfRequest } from '../../../db/summaries.js';
import { WebhookTargets } from '../../../notify/webhook-target.js';
import { policyIssues } from '../../../requests/attempt-policy.js';
import { attemptsOf } from '../../../requests/attempts.js';
import { cancelRequest } from '../../../requests/canceller.js';
import { taskOutputPaths } from '../../../requests/job-output.js';
import { isTerminalRequest } from '../../../requests/request-state.js';
import { type ArrayExpression, ArraySyntaxError, parseArrayExpression } from '../../../sched/job-array.js';
import { summaryForRequest } from '../../../summaries/show.js';
import {
  attemptView,
  deduplicatedView,
  freshnessView,
  jobLink,
  jobView,
  specView,
  summaryView,
  transitionView,
} from '../../../views/views.js';
import { apiAuditContext } from '../../audit-context.js';
import type { ApiDeps } from '../../deps.js';
import { pendingPartitionLoad } from '../../pending-load.js';
import { viewerOf } from '../../scopes.js';
import { principalOf, runAccessOf } from '../access.js';
import { ConflictApiError, NotFoundApiError, ValidationApiError, WebhookTargetApiError } from '../api-errors.js';
import { decodeCursor, encodeCursor } from '../cursor.js';
import { type Answer, idempotently } from '../idempotency.js';
import { callerOf } from '../local-credential.js';
import { answer, errors, idempotencyHeaders, idParams, pageOf } from '../shared-schemas.js';
import {
  cancelAnswerSchema,
  createdJobSchema,
  type deadlinesInput,
  jobDetailSchema,
  jobSchema,
  listJobsQuery,
  resubmittedJobSchema,
  retriedTasksSchema,
  retryTasksBody,
  submitJobBody,
} from './jobs.schema.js';
import { bearer } from './security.js';

/** `/api/v1/jobs`: submit, list, show, cancel and re-submit (with a summary's suggestion) job requests. */
export const jobRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps }> = async (app, { deps }) => {
  const { store } = deps;
  const webhookTargets = deps.webhookTargets ?? new WebhookTargets();
  // Every answer here names a request (`id`): a replay of one is recorded on it, as deduplicated.
  const idempotentlyFor = (
    request: FastifyRequest,
    reply: FastifyReply,
    work: (stableId: string | null) => Promise<Answer>,
  ) => idempotently(deps.store, request, reply, work, { requestOf: requestIdOf });

  app.post(
    '/api/v1/jobs',
    {
      config: { scope: 'submit' },
      schema: {
        tags: ['jobs'],
        operationId: 'submitJob',
        summary: 'Submit a job',
        description:
          "Records a job request and queues its submission to the scheduler (exactly one scheduler job per request). A spec the profile's door refuses (another account than its token's or its user's, a missing scope, an array past its `maxArraySize`), or a profile that cannot work as written (its credential refused, the wrong flavor or version: `SCHEDFLOW_ERR_PROFILE_UNUSABLE`): 422, nothing recorded; a profile whose scheduler has not answered since the daemon started: 503 `SCHEDFLOW_ERR_PROFILE_NOT_CONNECTED`, nothing recorded. A profile the token is not bound to (the default counts when none is named): 403 `SCHEDFLOW_ERR_PROFILE_NOT_ALLOWED`; past one of the token's quotas: 429 `SCHEDFLOW_ERR_QUOTA_IN_FLIGHT` or `SCHEDFLOW_ERR_QUOTA_PER_DAY` with `Retry-After`; nothing recorded (docs/quotas.md). Scope: submit.",
        security: bearer,
        headers: idempotencyHeaders,
        body: submitJobBody,
        response: {
          201: answer('queued; `links.self` follows it', createdJobSchema),
          ...errors(400, 401, 403, 409, 413, 415, 422, 429, 503),
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
        const inward = body.webhook_url === undefined ? null : webhookTargets.refusal(new URL(body.webhook_url));
        if (inward) throw new WebhookTargetApiError(inward);
        const retryPolicy = body.retry ?? null;
        const issues = retryPolicy ? policyIssues(retryPolicy, body.spec) : [];
        if (issues.length) {
          throw new ValidationApiError(issues.map((reason) => ({ in: 'body', path: 'retry', reason })));
        }
        const caller = callerOf(request);
        const id = await deps.submit({
          profile: body.profile,
          spec: body.spec,
          origin: caller.origin,
          owner: caller.principal.owner,
          actor: caller.principal.actor,
          requestId: stableId ?? undefined,
          webhookUrl: body.webhook_url ?? null,
          deadlines: deadlinesOf(body.deadlines),
          summarize: body.summarize ?? null,
          retryPolicy,
          httpRequestId: request.id,
          allowedProfiles: request.apiToken?.profiles ?? null,
        });
        // Its state alone: the row would parse the spec just accepted again.
        const state = await requestStateOf(store, id);
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
        operationId: 'listJobs',
        summary: 'List job requests',
        description:
          'Newest first, a page at a time: pass `next` as `cursor` for the next page. Scope: read (or audit). Without admin or audit, only the caller’s owner’s requests are listed.',
        security: bearer,
        querystring: listJobsQuery,
        response: { 200: answer('a page of job requests', pageOf(jobSchema)), ...errors(400, 401, 403, 429) },
      },
    },
    async (request) => {
      const q = request.query;
      const rows = await jobsPage(deps.store, {
        states: q.state,
        profile: q.profile,
        pipeline: q.pipeline,
        runId: q.run_id,
        createdSince: q.created_since === undefined ? undefined : Date.parse(q.created_since),
        createdUntil: q.created_until === undefined ? undefined : Date.parse(q.created_until),
        owner: readOwner(principalOf(request)),
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
        operationId: 'getJob',
        summary: 'Show a job request',
        description:
          "Its state, every transition, the duplicate submissions answered with it (Idempotency-Key replays), how fresh the state is (the profile's last poll and the job's last sighting), and its summary once it has ended (a pipeline step: its run's). Scope: read (or audit). Without admin or audit, only the caller’s owner’s requests and the steps of the runs it may read (of pipelines whose `allow:` names its owner): another owner’s id answers 404 exactly as an unknown id.",
        security: bearer,
        params: idParams,
        response: { 200: answer('the job request', jobDetailSchema), ...errors(400, 401, 403, 404, 429) },
      },
    },
    async (request) => {
      // Another owner's id answers as an unknown one; a step of a run the caller reads (through
      // a pipeline's `allow:`) is read as the run is (src/access/visibility.ts).
      const access = await runAccessOf(deps, principalOf(request), 'read');
      const row = await getReadableRequest(store, request.params.id, access);
      if (!row) throw new NotFoundApiError(`no job request ${request.params.id}`);
      // Asked together, not one after another: on PostgreSQL they run side by side, and on
      // SQLite close together (no write in between, mostly), as the synchronous reads did.
      const [array, transitions, attempts, replays, sync, summary, load] = await Promise.all([
        arrayView(store, row),
        transitionsOf(store, row.id),
        attemptsOf(store, row.id),
        replaysOf(store, row.id),
        getProfileSync(store, row.profile),
        summaryForRequest(store, row),
        // The cluster view's last kept answer only: no scheduler read per job page.
        pendingPartitionLoad(deps.clusterView, row),
      ]);
      const shown = jobView(row, viewerOf(request.apiToken));
      return {
        ...shown,
        pending: shown.pending && { ...shown.pending, partition: load },
        array,
        spec: specView(row.spec),
        output:
          row.arrayTaskCount === null
            ? {
                stdout: row.stdoutPath,
                stderr: row.stderrPath,
                links: { stdout: `${jobLink(row.id)}/output`, stderr: `${jobLink(row.id)}/output?stream=stderr` },
              }
            : // Each task writes its own file: no one path is the array's.
              {
                stdout: null,
                stderr: null,
                links: {
                  stdout: `${jobLink(row.id)}/output?task={task}`,
                  stderr: `${jobLink(row.id)}/output?task={task}&stream=stderr`,
                },
              },
        transitions: transitions.map(transitionView),
        attempts: attempts.map(attemptView),
        deduplicated: replays.map(deduplicatedView),
        freshness: freshnessView(row, sync, deps.settings.pollCeilingMs),
        summary: summaryView(summary),
      };
    },
  );

  app.post(
    '/api/v1/jobs/:id/resubmit',
    {
      config: { scope: 'submit' },
      schema: {
        tags: ['jobs'],
        operationId: 'resubmitJob',
        summary: "Apply a summary's suggested change",
        description: [
          'Queues a new request with the spec changed as the summary proposes (more memory, a longer limit, another partition), linked to this one (201).',
          'Applying again answers the request made the first time (200).',
          'Nothing to apply (no summary, no suggestion, or a pipeline step, whose change belongs in the pipeline file): 409 `SCHEDFLOW_ERR_NO_SUGGESTION`; a summary still being written: 409 `SCHEDFLOW_ERR_SUMMARY_PENDING`. Scope: submit. Without admin, only the caller’s owner’s requests: another owner’s id answers 404 exactly as an unknown id.',
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
        if (!(await getRequest(store, id, { owner: changeOwner(principalOf(request)) }))) {
          throw new NotFoundApiError(`no job request ${id}`);
        }
        const before = (await summaryOfRequest(store, id))?.appliedRequestId ?? null;
        // Its refusals carry their own codes: 409 NO_SUGGESTION, 409 SUMMARY_PENDING, 404 NOT_FOUND.
        const caller = callerOf(request);
        const newId = await deps.resubmit({
          requestId: id,
          newRequestId: stableId ?? undefined,
          origin: caller.origin,
          actor: caller.principal.actor,
          httpRequestId: request.id,
        });
        return {
          status: before === newId ? 200 : 201,
          body: {
            id: newId,
            state: (await requestStateOf(store, newId)) ?? 'queued',
            resubmits: id,
            changes: (await summaryOfRequest(store, id))?.suggestion?.changes ?? {},
            links: { self: jobLink(newId) },
          },
          headers: { location: jobLink(newId) },
        };
      }),
  );

  app.post(
    '/api/v1/jobs/:id/retry-tasks',
    {
      config: { scope: 'submit' },
      schema: {
        tags: ['jobs'],
        operationId: 'retryJobTasks',
        summary: "Run some of an array job's tasks again",
        description: [
          'Queues a new request for the given task indexes of an array job (by default every task that ended other than completed), the same spec with `array:` naming only those, linked to this one (`array.retry_of`) (201).',
          "Not an array job, no failed task, or an index that is not one of its tasks: 409 `SCHEDFLOW_ERR_NO_TASKS_TO_RETRY`, naming the array's indexes; `indexes` is read without listing them, and listed only within the array's size.",
          "A spec the profile's door refuses now (another account than its token's or its user's, a missing scope): 422, nothing recorded. Scope: submit. Without admin, only the caller’s owner’s requests: another owner’s id answers 404 exactly as an unknown id.",
        ].join(' '),
        security: bearer,
        headers: idempotencyHeaders,
        params: idParams,
        body: retryTasksBody,
        response: {
          201: answer('queued; `links.self` follows the new request', retriedTasksSchema),
          ...errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 503),
        },
      },
    },
    async (request, reply) =>
      idempotentlyFor(request, reply, async (stableId) => {
        const id = request.params.id;
        // Read, not listed: planArrayRetry lists them once they are known to be the array's.
        let indexes: ArrayExpression | undefined;
        if (request.body?.indexes !== undefined) {
          try {
            indexes = parseArrayExpression(request.body.indexes);
          } catch (error) {
            if (!(error instanceof ArraySyntaxError)) throw error;
            throw new ValidationApiError([{ in: 'body', path: 'indexes', reason: error.message }]);
          }
        }
        const { origin, principal } = callerOf(request);
        // Another owner's request answers as an unknown one, before anything of it is read.
        if (!(await getRequest(store, id, { owner: changeOwner(principal) }))) {
          throw new NotFoundApiError(`no job request ${id}`);
        }
        const retried = await deps.retryTasks({
          requestId: id,
          indexes,
          origin,
          source: origin,
          actor: principal.actor,
          httpRequestId: request.id,
          newRequestId: stableId ?? undefined,
        });
        return {
          status: 201,
          body: {
            id: retried.id,
            state: (await requestStateOf(store, retried.id)) ?? 'queued',
            array: retried.array,
            retry_of: id,
            links: { self: jobLink(retried.id) },
          },
          headers: { location: jobLink(retried.id) },
        };
      }),
  );

  app.delete(
    '/api/v1/jobs/:id',
    {
      config: { scope: 'cancel' },
      schema: {
        tags: ['jobs'],
        operationId: 'cancelJob',
        summary: 'Cancel a job',
        description: [
          'Not submitted yet: its submission is withdrawn and it is cancelled here (200).',
          'Submitted, pending or running: the scheduler is asked to cancel it (202); the next poll records CANCELLED.',
          'Being submitted right now: 409 with Retry-After. Already ended: 409 naming its state.',
          "Scheduler errors: 502 (refused) or 503 (unreachable), with the scheduler's status and message. Scope: cancel. Without admin, only the caller’s owner’s requests: another owner’s id answers 404 exactly as an unknown id.",
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
      const { origin, who, principal } = callerOf(request);
      // Another owner's request answers as an unknown one (src/access/visibility.ts).
      if (!(await getRequest(store, id, { owner: changeOwner(principal) }))) {
        throw new NotFoundApiError(`no job request ${id}`);
      }
      const outcome = await cancelRequest(
        { store, submitQueue: deps.queues.submit, clients: deps.clients, logger: deps.logger },
        id,
        { source: origin, who, audit: apiAuditContext(request) },
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
            message: outcome.row.retryNote ?? 'cancelled before it was submitted',
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

/** Failures an answer lists; their count is in `counts`. */
const FAILURES_LISTED = 100;

/** An array request's tasks, compactly: counts by state, then the failures. */
async function arrayView(store: History, row: JobRequestRow) {
  if (row.arrayTaskCount === null) return null;
  const tasks = await tasksOf(store, row.id);
  // Tasks the scheduler has not reported yet have no row: pending in the array's record.
  const counts: Record<string, number> = {};
  const unreported = row.arrayTaskCount - tasks.length;
  if (unreported > 0) counts.pending = unreported;
  for (const task of tasks) counts[task.state] = (counts[task.state] ?? 0) + 1;
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  return {
    expression: String((row.spec as { array?: unknown }).array ?? ''),
    task_count: row.arrayTaskCount,
    counts,
    failures: tasks
      .filter((task) => isTerminalRequest(task.state) && task.state !== 'completed')
      .slice(0, FAILURES_LISTED)
      .map((task) => ({
        task_id: task.taskId,
        job_id: task.jobId,
        state: task.state,
        exit_code: task.exitCode,
        reason: task.reason,
        nodes: task.nodes,
        started_at: iso(task.startedAt),
        ended_at: iso(task.endedAt),
        stdout: taskOutputPaths(row, task, null).stdout,
        links: { output: `${jobLink(row.id)}/output?task=${task.taskId}` },
      })),
    retry_of: row.arrayRetryOf,
  };
}
