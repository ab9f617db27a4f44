import type { paths } from './api-types.js';

/**
 * Names for the shapes the client takes and gives, read from the generated document types
 * (api-types.ts) by path and method rather than by component name: a path is part of the
 * API's promise, a component's name is how the document happens to share a schema.
 */

type Operation<P extends keyof paths, M extends keyof paths[P]> = paths[P][M];

/** The JSON body of an operation's answer with this status. */
type AnswerOf<O, S extends number> = O extends { responses: { [K in S]: { content: { 'application/json': infer B } } } }
  ? B
  : never;
/** The JSON body an operation takes. */
type BodyOf<O> = O extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;
/** The query string an operation takes. */
type QueryOf<O> = O extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

export type SubmitJobBody = BodyOf<Operation<'/api/v1/jobs', 'post'>>;
export type CreatedJob = AnswerOf<Operation<'/api/v1/jobs', 'post'>, 201>;
export type Job = AnswerOf<Operation<'/api/v1/jobs', 'get'>, 200>['items'][number];
export type JobState = Job['state'];
export type ListJobsQuery = QueryOf<Operation<'/api/v1/jobs', 'get'>>;
export type JobDetail = AnswerOf<Operation<'/api/v1/jobs/{id}', 'get'>, 200>;
export type CancelledJob = AnswerOf<Operation<'/api/v1/jobs/{id}', 'delete'>, 200 | 202>;
export type UpdateJobBody = BodyOf<Operation<'/api/v1/jobs/{id}', 'patch'>>;
export type JobControlAnswer = AnswerOf<Operation<'/api/v1/jobs/{id}/hold', 'post'>, 200>;
export type ControlJobBody = NonNullable<BodyOf<Operation<'/api/v1/jobs/{id}/hold', 'post'>>>;
export type ResubmittedJob = AnswerOf<Operation<'/api/v1/jobs/{id}/resubmit', 'post'>, 201>;
export type RetryJobTasksBody = NonNullable<BodyOf<Operation<'/api/v1/jobs/{id}/retry-tasks', 'post'>>>;
export type RetriedTasks = AnswerOf<Operation<'/api/v1/jobs/{id}/retry-tasks', 'post'>, 201>;
export type JobOutput = AnswerOf<Operation<'/api/v1/jobs/{id}/output', 'get'>, 200>;
export type JobOutputQuery = QueryOf<Operation<'/api/v1/jobs/{id}/output', 'get'>>;

export type Pipeline = AnswerOf<Operation<'/api/v1/pipelines', 'get'>, 200>['items'][number];
export type TriggerPipelineRunBody = BodyOf<Operation<'/api/v1/pipelines/{name}/runs', 'post'>>;
export type Run = AnswerOf<Operation<'/api/v1/runs', 'get'>, 200>['items'][number];
export type RunState = Run['state'];
export type ListRunsQuery = QueryOf<Operation<'/api/v1/runs', 'get'>>;
export type RunDetail = AnswerOf<Operation<'/api/v1/runs/{id}', 'get'>, 200>;
export type CancelledRun = AnswerOf<Operation<'/api/v1/runs/{id}/cancel', 'post'>, 200 | 202>;
export type RunControlAnswer = AnswerOf<Operation<'/api/v1/runs/{id}/hold', 'post'>, 200>;
export type ResumeRunBody = BodyOf<Operation<'/api/v1/runs/{id}/resume', 'post'>>;
export type ResumedRun = AnswerOf<Operation<'/api/v1/runs/{id}/resume', 'post'>, 201>;

/** The body of every error answer: `{ error: { code, message, fields?, request_id?, … } }`. */
export type ErrorBody = AnswerOf<Operation<'/api/v1/jobs', 'post'>, 400>;
export type ErrorDetail = ErrorBody['error'];
export type FieldProblem = NonNullable<ErrorDetail['fields']>[number];
