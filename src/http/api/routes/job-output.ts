import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { getReadableRequest } from '../../../db/requests.js';
import type { ErrorCode } from '../../../errors.js';
import { jobOutputOf, OUTPUT_TAIL_MAX_BYTES } from '../../../requests/job-output.js';
import { outputRedactor } from '../../../summaries/redact.js';
import type { ApiDeps } from '../../deps.js';
import { principalOf, runAccessOf } from '../access.js';
import { ApiError, NotFoundApiError } from '../api-errors.js';
import { answer, errors, idParams } from '../shared-schemas.js';
import { jobOutputQuery, jobOutputSchema } from './job-output.schema.js';
import { bearer } from './security.js';

/** When to ask again for output not written yet: about a poll cycle. */
const NOT_YET_RETRY_AFTER_SEC = 10;

/** A job output that cannot be read: its code says why (404, 403, 409), `output` what was tried and where. */
class OutputUnavailableApiError extends ApiError {
  constructor(
    readonly code: ErrorCode,
    message: string,
    output: Record<string, unknown>,
  ) {
    super(message);
    this.extra.output = output;
    if (code === 'SCHEDFLOW_ERR_OUTPUT_NOT_YET') this.headers['retry-after'] = String(NOT_YET_RETRY_AFTER_SEC);
  }
}

/** `GET /api/v1/jobs/{id}/output`: the end of a job's stdout or stderr, when the daemon's host can read it. */
export const jobOutputRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps }> = async (app, { deps }) => {
  const { store } = deps;
  app.get(
    '/api/v1/jobs/:id/output',
    {
      config: { scope: 'read' },
      schema: {
        tags: ['jobs'],
        operationId: 'getJobOutput',
        summary: "Read the end of a job's output",
        description: [
          "The last `tail` lines of the job's stdout or stderr file, read on the daemon's host from the path the scheduler reported (at most 1 MiB from the end, however large the file).",
          "An array job's tasks each write their own file (Slurm's `%A_%a` patterns, `slurm-%A_%a.out` by default): name one with `task`; without it, or with a task of a single job or an index not in the array, 400 `SCHEDFLOW_ERR_OUTPUT_TASK`.",
          'Not written yet (not submitted, not started): 409 `SCHEDFLOW_ERR_OUTPUT_NOT_YET` with Retry-After.',
          "Not on this host (the file may exist only on the job's node) or never written: 404 `SCHEDFLOW_ERR_OUTPUT_NOT_FOUND`.",
          "No permission, a path inside schedflow's own folders or through a symbolic link, not a regular file (a FIFO, a device), or a file of another user than the job's: 403 `SCHEDFLOW_ERR_OUTPUT_UNREADABLE`.",
          'Each of those says in `error.output` the path tried, the host and the reason. Scope: read (or audit). Without admin or audit, only the caller’s owner’s requests and the steps of the runs it may read (of pipelines whose `allow:` names its owner): another owner’s id answers 404 exactly as an unknown id.',
        ].join(' '),
        security: bearer,
        params: idParams,
        querystring: jobOutputQuery,
        response: { 200: answer('the end of the file', jobOutputSchema), ...errors(400, 401, 403, 404, 409, 429) },
      },
    },
    async (request) => {
      // Another owner's id answers as an unknown one; a step of a run the caller reads (through
      // a pipeline's `allow:`) is read as the run is (src/access/visibility.ts).
      const access = await runAccessOf(deps, principalOf(request), 'read');
      const row = await getReadableRequest(store, request.params.id, access);
      if (!row) throw new NotFoundApiError(`no job request ${request.params.id}`);
      const output = await jobOutputOf(
        store,
        row,
        request.query.stream,
        {
          tailLines: request.query.tail,
          maxBytes: deps.settings.outputTailMaxBytes ?? OUTPUT_TAIL_MAX_BYTES,
          protectedDirs: deps.settings.protectedDirs ?? [],
        },
        request.query.task ?? null,
      );
      if (output.kind === 'unavailable') {
        throw new OutputUnavailableApiError(output.code, output.message, {
          stream: output.stream,
          path: output.path,
          host: output.host,
          reason: output.reason,
        });
      }
      // The job's own environment values (tokens, passwords) are masked, as on the UI's job page.
      const redactor = outputRedactor(row.spec);
      return {
        id: row.id,
        job_id: output.jobId,
        task_id: output.taskId,
        stream: output.stream,
        path: output.path,
        host: output.host,
        same_file: output.sameFile,
        size_bytes: output.sizeBytes,
        modified_at: new Date(output.modifiedAt).toISOString(),
        lines: output.lines,
        truncated: output.truncated,
        text: redactor.redact(output.text),
      };
    },
  );
};
