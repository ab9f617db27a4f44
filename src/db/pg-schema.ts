// Generated from src/db/schema.ts by `npm run db:generate` (test/db/pg-schema.ts): edit that
// schema, not this file. The history's tables for PostgreSQL, column for column.
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  doublePrecision,
  index,
  json,
  jsonb,
  pgSchema,
  primaryKey,
  text,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import type * as sqlite from './schema.js';

/** schedflow's own schema: a database shared with other applications keeps their tables apart. */
export const schedflow = pgSchema('schedflow');

/**
 * A column's type as the SQLite schema's row has it, without its null (nullability is the
 * column's own); JSON of no declared type stays unknown.
 */
type Of<T extends { $inferSelect: object }, K extends keyof T['$inferSelect']> = unknown extends T['$inferSelect'][K]
  ? unknown
  : NonNullable<T['$inferSelect'][K]>;

export const accountingJobs = schedflow.table(
  'accounting_jobs',
  {
    profile: text('profile').notNull().$type<Of<typeof sqlite.accountingJobs, 'profile'>>(),
    jobId: bigint('job_id', { mode: 'number' }).notNull().$type<Of<typeof sqlite.accountingJobs, 'jobId'>>(),
    requestId: text('request_id').$type<Of<typeof sqlite.accountingJobs, 'requestId'>>(),
    name: text('name').notNull().$type<Of<typeof sqlite.accountingJobs, 'name'>>(),
    account: text('account').notNull().$type<Of<typeof sqlite.accountingJobs, 'account'>>(),
    user: text('user').notNull().$type<Of<typeof sqlite.accountingJobs, 'user'>>(),
    partition: text('partition').notNull().$type<Of<typeof sqlite.accountingJobs, 'partition'>>(),
    state: text('state').notNull().$type<Of<typeof sqlite.accountingJobs, 'state'>>(),
    rawState: text('raw_state').notNull().$type<Of<typeof sqlite.accountingJobs, 'rawState'>>(),
    reason: text('reason').$type<Of<typeof sqlite.accountingJobs, 'reason'>>(),
    exitCode: bigint('exit_code', { mode: 'number' }).$type<Of<typeof sqlite.accountingJobs, 'exitCode'>>(),
    signal: bigint('signal', { mode: 'number' }).$type<Of<typeof sqlite.accountingJobs, 'signal'>>(),
    submitTime: bigint('submit_time_sec', { mode: 'number' }).$type<Of<typeof sqlite.accountingJobs, 'submitTime'>>(),
    startTime: bigint('start_time_sec', { mode: 'number' }).$type<Of<typeof sqlite.accountingJobs, 'startTime'>>(),
    endTime: bigint('end_time_sec', { mode: 'number' }).$type<Of<typeof sqlite.accountingJobs, 'endTime'>>(),
    elapsedSec: bigint('elapsed_sec', { mode: 'number' }).$type<Of<typeof sqlite.accountingJobs, 'elapsedSec'>>(),
    timeLimitMin: bigint('time_limit_min', { mode: 'number' }).$type<
      Of<typeof sqlite.accountingJobs, 'timeLimitMin'>
    >(),
    nodes: text('nodes').$type<Of<typeof sqlite.accountingJobs, 'nodes'>>(),
    cpus: bigint('cpus', { mode: 'number' }).$type<Of<typeof sqlite.accountingJobs, 'cpus'>>(),
    memoryPerNodeMb: bigint('memory_per_node_mb', { mode: 'number' }).$type<
      Of<typeof sqlite.accountingJobs, 'memoryPerNodeMb'>
    >(),
    cpuTimeSec: doublePrecision('cpu_time_sec').$type<Of<typeof sqlite.accountingJobs, 'cpuTimeSec'>>(),
    peakMemoryMb: bigint('peak_memory_mb', { mode: 'number' }).$type<
      Of<typeof sqlite.accountingJobs, 'peakMemoryMb'>
    >(),
    comment: text('comment').notNull().$type<Of<typeof sqlite.accountingJobs, 'comment'>>(),
    syncedAt: bigint('synced_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.accountingJobs, 'syncedAt'>>(),
  },
  (t) => [
    primaryKey({ columns: [t.profile, t.jobId] }),
    index('accounting_jobs_request').on(t.requestId),
    index('accounting_jobs_submit').on(t.submitTime),
  ],
);

export const apiTokens = schedflow.table('api_tokens', {
  id: text('id').primaryKey().$type<Of<typeof sqlite.apiTokens, 'id'>>(),
  name: text('name').notNull().unique('api_tokens_name_unique').$type<Of<typeof sqlite.apiTokens, 'name'>>(),
  hash: text('hash').notNull().unique('api_tokens_hash_unique').$type<Of<typeof sqlite.apiTokens, 'hash'>>(),
  scopes: jsonb('scopes').notNull().$type<Of<typeof sqlite.apiTokens, 'scopes'>>(),
  owner: text('owner').notNull().default('default').$type<Of<typeof sqlite.apiTokens, 'owner'>>(),
  profiles: jsonb('profiles').$type<Of<typeof sqlite.apiTokens, 'profiles'>>(),
  maxInFlight: bigint('max_in_flight', { mode: 'number' }).$type<Of<typeof sqlite.apiTokens, 'maxInFlight'>>(),
  maxPerDay: bigint('max_per_day', { mode: 'number' }).$type<Of<typeof sqlite.apiTokens, 'maxPerDay'>>(),
  createdAt: bigint('created_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.apiTokens, 'createdAt'>>(),
  lastUsedAt: bigint('last_used_at', { mode: 'number' }).$type<Of<typeof sqlite.apiTokens, 'lastUsedAt'>>(),
  revokedAt: bigint('revoked_at', { mode: 'number' }).$type<Of<typeof sqlite.apiTokens, 'revokedAt'>>(),
});

export const arrayTasks = schedflow.table(
  'array_tasks',
  {
    requestId: text('request_id').notNull().$type<Of<typeof sqlite.arrayTasks, 'requestId'>>(),
    taskId: bigint('task_id', { mode: 'number' }).notNull().$type<Of<typeof sqlite.arrayTasks, 'taskId'>>(),
    jobId: bigint('job_id', { mode: 'number' }).$type<Of<typeof sqlite.arrayTasks, 'jobId'>>(),
    state: text('state').notNull().$type<Of<typeof sqlite.arrayTasks, 'state'>>(),
    reason: text('reason').$type<Of<typeof sqlite.arrayTasks, 'reason'>>(),
    exitCode: bigint('exit_code', { mode: 'number' }).$type<Of<typeof sqlite.arrayTasks, 'exitCode'>>(),
    signal: bigint('signal', { mode: 'number' }).$type<Of<typeof sqlite.arrayTasks, 'signal'>>(),
    startedAt: bigint('started_at', { mode: 'number' }).$type<Of<typeof sqlite.arrayTasks, 'startedAt'>>(),
    endedAt: bigint('ended_at', { mode: 'number' }).$type<Of<typeof sqlite.arrayTasks, 'endedAt'>>(),
    nodes: text('nodes').$type<Of<typeof sqlite.arrayTasks, 'nodes'>>(),
    missingSince: bigint('missing_since', { mode: 'number' }).$type<Of<typeof sqlite.arrayTasks, 'missingSince'>>(),
    stdoutPath: text('stdout_path').$type<Of<typeof sqlite.arrayTasks, 'stdoutPath'>>(),
    stderrPath: text('stderr_path').$type<Of<typeof sqlite.arrayTasks, 'stderrPath'>>(),
  },
  (t) => [primaryKey({ columns: [t.requestId, t.taskId] }), index('array_tasks_state').on(t.requestId, t.state)],
);

export const auditLog = schedflow.table(
  'audit_log',
  {
    id: bigint('id', { mode: 'number' })
      .primaryKey()
      .generatedByDefaultAsIdentity()
      .$type<Of<typeof sqlite.auditLog, 'id'>>(),
    at: bigint('at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.auditLog, 'at'>>(),
    actor: text('actor').notNull().$type<Of<typeof sqlite.auditLog, 'actor'>>(),
    owner: text('owner').$type<Of<typeof sqlite.auditLog, 'owner'>>(),
    action: text('action').notNull().$type<Of<typeof sqlite.auditLog, 'action'>>(),
    target: text('target').$type<Of<typeof sqlite.auditLog, 'target'>>(),
    outcome: text('outcome').notNull().$type<Of<typeof sqlite.auditLog, 'outcome'>>(),
    httpRequestId: text('http_request_id').$type<Of<typeof sqlite.auditLog, 'httpRequestId'>>(),
    detail: text('detail').$type<Of<typeof sqlite.auditLog, 'detail'>>(),
  },
  (t) => [index('audit_log_at').on(t.at), index('audit_log_owner').on(t.owner, t.at)],
);

export const clusterSamples = schedflow.table(
  'cluster_samples',
  {
    profile: text('profile').notNull().$type<Of<typeof sqlite.clusterSamples, 'profile'>>(),
    partition: text('partition').notNull().$type<Of<typeof sqlite.clusterSamples, 'partition'>>(),
    at: bigint('at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.clusterSamples, 'at'>>(),
    cpusTotal: bigint('cpus_total', { mode: 'number' })
      .notNull()
      .$type<Of<typeof sqlite.clusterSamples, 'cpusTotal'>>(),
    cpusAllocated: bigint('cpus_allocated', { mode: 'number' })
      .notNull()
      .$type<Of<typeof sqlite.clusterSamples, 'cpusAllocated'>>(),
    cpusIdle: bigint('cpus_idle', { mode: 'number' }).notNull().$type<Of<typeof sqlite.clusterSamples, 'cpusIdle'>>(),
    cpusOther: bigint('cpus_other', { mode: 'number' })
      .notNull()
      .$type<Of<typeof sqlite.clusterSamples, 'cpusOther'>>(),
    jobsRunning: bigint('jobs_running', { mode: 'number' })
      .notNull()
      .$type<Of<typeof sqlite.clusterSamples, 'jobsRunning'>>(),
    jobsPending: bigint('jobs_pending', { mode: 'number' })
      .notNull()
      .$type<Of<typeof sqlite.clusterSamples, 'jobsPending'>>(),
  },
  (t) => [primaryKey({ columns: [t.profile, t.partition, t.at] }), index('cluster_samples_at').on(t.at)],
);

export const deadlineMisses = schedflow.table(
  'deadline_misses',
  {
    id: bigint('id', { mode: 'number' })
      .primaryKey()
      .generatedByDefaultAsIdentity()
      .$type<Of<typeof sqlite.deadlineMisses, 'id'>>(),
    subject: text('subject').notNull().$type<Of<typeof sqlite.deadlineMisses, 'subject'>>(),
    requestId: text('request_id').$type<Of<typeof sqlite.deadlineMisses, 'requestId'>>(),
    runId: text('run_id').$type<Of<typeof sqlite.deadlineMisses, 'runId'>>(),
    kind: text('kind').notNull().$type<Of<typeof sqlite.deadlineMisses, 'kind'>>(),
    at: bigint('at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.deadlineMisses, 'at'>>(),
    detail: text('detail').notNull().$type<Of<typeof sqlite.deadlineMisses, 'detail'>>(),
  },
  (t) => [uniqueIndex('deadline_misses_once').on(t.subject, t.kind), index('deadline_misses_run').on(t.runId)],
);

export const historyMeta = schedflow.table('history_meta', {
  key: text('key').primaryKey().$type<Of<typeof sqlite.historyMeta, 'key'>>(),
  value: text('value').notNull().$type<Of<typeof sqlite.historyMeta, 'value'>>(),
});

export const idempotencyKeys = schedflow.table(
  'idempotency_keys',
  {
    tokenId: text('token_id').notNull().$type<Of<typeof sqlite.idempotencyKeys, 'tokenId'>>(),
    key: text('key').notNull().$type<Of<typeof sqlite.idempotencyKeys, 'key'>>(),
    route: text('route').notNull().$type<Of<typeof sqlite.idempotencyKeys, 'route'>>(),
    bodyHash: text('body_hash').notNull().$type<Of<typeof sqlite.idempotencyKeys, 'bodyHash'>>(),
    status: bigint('status', { mode: 'number' }).notNull().$type<Of<typeof sqlite.idempotencyKeys, 'status'>>(),
    response: json('response').notNull().$type<Of<typeof sqlite.idempotencyKeys, 'response'>>(),
    createdAt: bigint('created_at', { mode: 'number' })
      .notNull()
      .$type<Of<typeof sqlite.idempotencyKeys, 'createdAt'>>(),
  },
  (t) => [primaryKey({ columns: [t.tokenId, t.key] }), index('idempotency_keys_created').on(t.createdAt)],
);

export const jobRequests = schedflow.table(
  'job_requests',
  {
    id: text('id').primaryKey().$type<Of<typeof sqlite.jobRequests, 'id'>>(),
    profile: text('profile').notNull().$type<Of<typeof sqlite.jobRequests, 'profile'>>(),
    name: text('name').notNull().$type<Of<typeof sqlite.jobRequests, 'name'>>(),
    spec: jsonb('spec').notNull().$type<Of<typeof sqlite.jobRequests, 'spec'>>(),
    origin: text('origin').notNull().$type<Of<typeof sqlite.jobRequests, 'origin'>>(),
    owner: text('owner').notNull().default('default').$type<Of<typeof sqlite.jobRequests, 'owner'>>(),
    actor: text('actor').$type<Of<typeof sqlite.jobRequests, 'actor'>>(),
    state: text('state').notNull().$type<Of<typeof sqlite.jobRequests, 'state'>>(),
    jobId: bigint('job_id', { mode: 'number' }).$type<Of<typeof sqlite.jobRequests, 'jobId'>>(),
    jobConfirmedAt: bigint('job_confirmed_at', { mode: 'number' }).$type<
      Of<typeof sqlite.jobRequests, 'jobConfirmedAt'>
    >(),
    adopted: boolean('adopted').notNull().default(false).$type<Of<typeof sqlite.jobRequests, 'adopted'>>(),
    rawState: text('raw_state').$type<Of<typeof sqlite.jobRequests, 'rawState'>>(),
    reason: text('reason').$type<Of<typeof sqlite.jobRequests, 'reason'>>(),
    expectedStartAt: bigint('expected_start_at', { mode: 'number' }).$type<
      Of<typeof sqlite.jobRequests, 'expectedStartAt'>
    >(),
    exitCode: bigint('exit_code', { mode: 'number' }).$type<Of<typeof sqlite.jobRequests, 'exitCode'>>(),
    signal: bigint('signal', { mode: 'number' }).$type<Of<typeof sqlite.jobRequests, 'signal'>>(),
    errorCode: text('error_code').$type<Of<typeof sqlite.jobRequests, 'errorCode'>>(),
    errorMessage: text('error_message').$type<Of<typeof sqlite.jobRequests, 'errorMessage'>>(),
    createdAt: bigint('created_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.jobRequests, 'createdAt'>>(),
    updatedAt: bigint('updated_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.jobRequests, 'updatedAt'>>(),
    submitAttemptAt: bigint('submit_attempt_at', { mode: 'number' }).$type<
      Of<typeof sqlite.jobRequests, 'submitAttemptAt'>
    >(),
    submittedAt: bigint('submitted_at', { mode: 'number' }).$type<Of<typeof sqlite.jobRequests, 'submittedAt'>>(),
    startedAt: bigint('started_at', { mode: 'number' }).$type<Of<typeof sqlite.jobRequests, 'startedAt'>>(),
    endedAt: bigint('ended_at', { mode: 'number' }).$type<Of<typeof sqlite.jobRequests, 'endedAt'>>(),
    lastSeenAt: bigint('last_seen_at', { mode: 'number' }).$type<Of<typeof sqlite.jobRequests, 'lastSeenAt'>>(),
    lastSeenAgeSec: bigint('last_seen_age_sec', { mode: 'number' }).$type<
      Of<typeof sqlite.jobRequests, 'lastSeenAgeSec'>
    >(),
    lastSeenStale: boolean('last_seen_stale').$type<Of<typeof sqlite.jobRequests, 'lastSeenStale'>>(),
    missingSince: bigint('missing_since', { mode: 'number' }).$type<Of<typeof sqlite.jobRequests, 'missingSince'>>(),
    runId: text('run_id').$type<Of<typeof sqlite.jobRequests, 'runId'>>(),
    step: text('step').$type<Of<typeof sqlite.jobRequests, 'step'>>(),
    attempt: bigint('attempt', { mode: 'number' })
      .notNull()
      .default(1)
      .$type<Of<typeof sqlite.jobRequests, 'attempt'>>(),
    runAttempt: bigint('run_attempt', { mode: 'number' })
      .notNull()
      .default(1)
      .$type<Of<typeof sqlite.jobRequests, 'runAttempt'>>(),
    needs: jsonb('needs').$type<Of<typeof sqlite.jobRequests, 'needs'>>(),
    outputs: jsonb('outputs').$type<Of<typeof sqlite.jobRequests, 'outputs'>>(),
    webhookUrl: text('webhook_url').$type<Of<typeof sqlite.jobRequests, 'webhookUrl'>>(),
    deadlines: jsonb('deadlines').$type<Of<typeof sqlite.jobRequests, 'deadlines'>>(),
    summarize: boolean('summarize').$type<Of<typeof sqlite.jobRequests, 'summarize'>>(),
    summaryCheckedAt: bigint('summary_checked_at', { mode: 'number' }).$type<
      Of<typeof sqlite.jobRequests, 'summaryCheckedAt'>
    >(),
    resubmitOf: text('resubmit_of').$type<Of<typeof sqlite.jobRequests, 'resubmitOf'>>(),
    stdoutPath: text('stdout_path').$type<Of<typeof sqlite.jobRequests, 'stdoutPath'>>(),
    stderrPath: text('stderr_path').$type<Of<typeof sqlite.jobRequests, 'stderrPath'>>(),
    arrayTaskCount: bigint('array_task_count', { mode: 'number' }).$type<
      Of<typeof sqlite.jobRequests, 'arrayTaskCount'>
    >(),
    arrayRetryOf: text('array_retry_of').$type<Of<typeof sqlite.jobRequests, 'arrayRetryOf'>>(),
    retryPolicy: jsonb('retry_policy').$type<Of<typeof sqlite.jobRequests, 'retryPolicy'>>(),
    firstAttemptId: text('first_attempt_id').$type<Of<typeof sqlite.jobRequests, 'firstAttemptId'>>(),
    retryCause: jsonb('retry_cause').$type<Of<typeof sqlite.jobRequests, 'retryCause'>>(),
    retryDueAt: bigint('retry_due_at', { mode: 'number' }).$type<Of<typeof sqlite.jobRequests, 'retryDueAt'>>(),
    nextAttemptId: text('next_attempt_id').$type<Of<typeof sqlite.jobRequests, 'nextAttemptId'>>(),
    retryNote: text('retry_note').$type<Of<typeof sqlite.jobRequests, 'retryNote'>>(),
    pendingMove: jsonb('pending_move').$type<Of<typeof sqlite.jobRequests, 'pendingMove'>>(),
    heldAt: bigint('held_at', { mode: 'number' }).$type<Of<typeof sqlite.jobRequests, 'heldAt'>>(),
    heldBy: text('held_by').$type<Of<typeof sqlite.jobRequests, 'heldBy'>>(),
    specChangedAt: bigint('spec_changed_at', { mode: 'number' }).$type<
      Of<typeof sqlite.jobRequests, 'specChangedAt'>
    >(),
  },
  (t) => [
    index('job_requests_state').on(t.profile, t.state),
    uniqueIndex('job_requests_job').on(t.profile, t.jobId),
    index('job_requests_created').on(t.createdAt),
    index('job_requests_run').on(t.runId, t.step),
    index('job_requests_summary_todo').on(t.state).where(sql`"summary_checked_at" is null`),
    index('job_requests_deadlines').on(t.state).where(sql`"deadlines" is not null`),
    index('job_requests_retry_due').on(t.retryDueAt).where(sql`"retry_due_at" is not null`),
    index('job_requests_pending_move').on(t.state).where(sql`"pending_move" is not null`),
    index('job_requests_attempts').on(t.firstAttemptId),
    index('job_requests_owner').on(t.owner, t.createdAt),
    index('job_requests_owner_state').on(t.owner, t.state),
  ],
);

export const jobTransitions = schedflow.table(
  'job_transitions',
  {
    id: bigint('id', { mode: 'number' })
      .primaryKey()
      .generatedByDefaultAsIdentity()
      .$type<Of<typeof sqlite.jobTransitions, 'id'>>(),
    requestId: text('request_id')
      .notNull()
      .references(() => jobRequests.id, { onDelete: 'cascade' })
      .$type<Of<typeof sqlite.jobTransitions, 'requestId'>>(),
    fromState: text('from_state').$type<Of<typeof sqlite.jobTransitions, 'fromState'>>(),
    toState: text('to_state').notNull().$type<Of<typeof sqlite.jobTransitions, 'toState'>>(),
    at: bigint('at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.jobTransitions, 'at'>>(),
    source: text('source').notNull().$type<Of<typeof sqlite.jobTransitions, 'source'>>(),
    rawState: text('raw_state').$type<Of<typeof sqlite.jobTransitions, 'rawState'>>(),
    reason: text('reason').$type<Of<typeof sqlite.jobTransitions, 'reason'>>(),
    stale: boolean('stale').notNull().default(false).$type<Of<typeof sqlite.jobTransitions, 'stale'>>(),
    detail: text('detail').$type<Of<typeof sqlite.jobTransitions, 'detail'>>(),
  },
  (t) => [index('job_transitions_request').on(t.requestId, t.at)],
);

export const jobUsage = schedflow.table(
  'job_usage',
  {
    requestId: text('request_id').primaryKey().$type<Of<typeof sqlite.jobUsage, 'requestId'>>(),
    profile: text('profile').notNull().$type<Of<typeof sqlite.jobUsage, 'profile'>>(),
    jobId: bigint('job_id', { mode: 'number' }).$type<Of<typeof sqlite.jobUsage, 'jobId'>>(),
    runId: text('run_id').$type<Of<typeof sqlite.jobUsage, 'runId'>>(),
    step: text('step').$type<Of<typeof sqlite.jobUsage, 'step'>>(),
    attempt: bigint('attempt', { mode: 'number' }).notNull().$type<Of<typeof sqlite.jobUsage, 'attempt'>>(),
    state: text('state').notNull().$type<Of<typeof sqlite.jobUsage, 'state'>>(),
    elapsedSec: bigint('elapsed_sec', { mode: 'number' }).$type<Of<typeof sqlite.jobUsage, 'elapsedSec'>>(),
    timeLimitMin: bigint('time_limit_min', { mode: 'number' }).$type<Of<typeof sqlite.jobUsage, 'timeLimitMin'>>(),
    timeLimitInfinite: boolean('time_limit_infinite')
      .notNull()
      .default(false)
      .$type<Of<typeof sqlite.jobUsage, 'timeLimitInfinite'>>(),
    cpus: bigint('cpus', { mode: 'number' }).$type<Of<typeof sqlite.jobUsage, 'cpus'>>(),
    cpuTimeSec: doublePrecision('cpu_time_sec').$type<Of<typeof sqlite.jobUsage, 'cpuTimeSec'>>(),
    peakMemoryMb: bigint('peak_memory_mb', { mode: 'number' }).$type<Of<typeof sqlite.jobUsage, 'peakMemoryMb'>>(),
    spec: jsonb('spec').notNull().$type<Of<typeof sqlite.jobUsage, 'spec'>>(),
    endedAt: bigint('ended_at', { mode: 'number' }).$type<Of<typeof sqlite.jobUsage, 'endedAt'>>(),
    keptAt: bigint('kept_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.jobUsage, 'keptAt'>>(),
  },
  (t) => [index('job_usage_run').on(t.runId, t.step)],
);

export const llmUsage = schedflow.table('llm_usage', {
  day: text('day').primaryKey().$type<Of<typeof sqlite.llmUsage, 'day'>>(),
  requests: bigint('requests', { mode: 'number' }).notNull().default(0).$type<Of<typeof sqlite.llmUsage, 'requests'>>(),
  tokens: bigint('tokens', { mode: 'number' }).notNull().default(0).$type<Of<typeof sqlite.llmUsage, 'tokens'>>(),
  updatedAt: bigint('updated_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.llmUsage, 'updatedAt'>>(),
});

export const pipelineRuns = schedflow.table(
  'pipeline_runs',
  {
    id: text('id').primaryKey().$type<Of<typeof sqlite.pipelineRuns, 'id'>>(),
    pipeline: text('pipeline').notNull().$type<Of<typeof sqlite.pipelineRuns, 'pipeline'>>(),
    owner: text('owner').notNull().default('default').$type<Of<typeof sqlite.pipelineRuns, 'owner'>>(),
    actor: text('actor').$type<Of<typeof sqlite.pipelineRuns, 'actor'>>(),
    trigger: text('trigger').notNull().$type<Of<typeof sqlite.pipelineRuns, 'trigger'>>(),
    triggeredBy: text('triggered_by').$type<Of<typeof sqlite.pipelineRuns, 'triggeredBy'>>(),
    scheduledFor: bigint('scheduled_for', { mode: 'number' }).$type<Of<typeof sqlite.pipelineRuns, 'scheduledFor'>>(),
    params: jsonb('params').notNull().$type<Of<typeof sqlite.pipelineRuns, 'params'>>(),
    definition: jsonb('definition').notNull().$type<Of<typeof sqlite.pipelineRuns, 'definition'>>(),
    state: text('state').notNull().$type<Of<typeof sqlite.pipelineRuns, 'state'>>(),
    detail: text('detail').$type<Of<typeof sqlite.pipelineRuns, 'detail'>>(),
    webhookUrl: text('webhook_url').$type<Of<typeof sqlite.pipelineRuns, 'webhookUrl'>>(),
    createdAt: bigint('created_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.pipelineRuns, 'createdAt'>>(),
    startedAt: bigint('started_at', { mode: 'number' }).$type<Of<typeof sqlite.pipelineRuns, 'startedAt'>>(),
    endedAt: bigint('ended_at', { mode: 'number' }).$type<Of<typeof sqlite.pipelineRuns, 'endedAt'>>(),
    updatedAt: bigint('updated_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.pipelineRuns, 'updatedAt'>>(),
    summaryCheckedAt: bigint('summary_checked_at', { mode: 'number' }).$type<
      Of<typeof sqlite.pipelineRuns, 'summaryCheckedAt'>
    >(),
    cancelRequestedAt: bigint('cancel_requested_at', { mode: 'number' }).$type<
      Of<typeof sqlite.pipelineRuns, 'cancelRequestedAt'>
    >(),
    cancelledBy: text('cancelled_by').$type<Of<typeof sqlite.pipelineRuns, 'cancelledBy'>>(),
    attempt: bigint('attempt', { mode: 'number' })
      .notNull()
      .default(1)
      .$type<Of<typeof sqlite.pipelineRuns, 'attempt'>>(),
    upstreamRunId: text('upstream_run_id').$type<Of<typeof sqlite.pipelineRuns, 'upstreamRunId'>>(),
    upstreamAttempt: bigint('upstream_attempt', { mode: 'number' }).$type<
      Of<typeof sqlite.pipelineRuns, 'upstreamAttempt'>
    >(),
    downstreamCheckedAt: bigint('downstream_checked_at', { mode: 'number' }).$type<
      Of<typeof sqlite.pipelineRuns, 'downstreamCheckedAt'>
    >(),
  },
  (t) => [
    uniqueIndex('pipeline_runs_tick').on(t.pipeline, t.scheduledFor),
    uniqueIndex('pipeline_runs_upstream').on(t.pipeline, t.upstreamRunId, t.upstreamAttempt),
    index('pipeline_runs_downstream_todo').on(t.endedAt).where(sql`"downstream_checked_at" is null`),
    index('pipeline_runs_state').on(t.state),
    index('pipeline_runs_created').on(t.pipeline, t.createdAt),
    index('pipeline_runs_summary_todo').on(t.state).where(sql`"summary_checked_at" is null`),
    index('pipeline_runs_owner').on(t.owner, t.createdAt),
  ],
);

export const pipelineSchedules = schedflow.table('pipeline_schedules', {
  pipeline: text('pipeline').primaryKey().$type<Of<typeof sqlite.pipelineSchedules, 'pipeline'>>(),
  lastScheduledFor: bigint('last_scheduled_for', { mode: 'number' }).$type<
    Of<typeof sqlite.pipelineSchedules, 'lastScheduledFor'>
  >(),
  pausedAt: bigint('paused_at', { mode: 'number' }).$type<Of<typeof sqlite.pipelineSchedules, 'pausedAt'>>(),
  pausedBy: text('paused_by').$type<Of<typeof sqlite.pipelineSchedules, 'pausedBy'>>(),
  updatedAt: bigint('updated_at', { mode: 'number' })
    .notNull()
    .$type<Of<typeof sqlite.pipelineSchedules, 'updatedAt'>>(),
});

export const profileSync = schedflow.table('profile_sync', {
  profile: text('profile').primaryKey().$type<Of<typeof sqlite.profileSync, 'profile'>>(),
  accountingSyncedTo: bigint('accounting_synced_to_sec', { mode: 'number' }).$type<
    Of<typeof sqlite.profileSync, 'accountingSyncedTo'>
  >(),
  accountingSyncedAt: bigint('accounting_synced_at', { mode: 'number' }).$type<
    Of<typeof sqlite.profileSync, 'accountingSyncedAt'>
  >(),
  lastPollAt: bigint('last_poll_at', { mode: 'number' }).$type<Of<typeof sqlite.profileSync, 'lastPollAt'>>(),
  lastPollOk: boolean('last_poll_ok').$type<Of<typeof sqlite.profileSync, 'lastPollOk'>>(),
  lastPollError: text('last_poll_error').$type<Of<typeof sqlite.profileSync, 'lastPollError'>>(),
  lastPollAgeSec: bigint('last_poll_age_sec', { mode: 'number' }).$type<
    Of<typeof sqlite.profileSync, 'lastPollAgeSec'>
  >(),
  lastPollStale: boolean('last_poll_stale').$type<Of<typeof sqlite.profileSync, 'lastPollStale'>>(),
  lastMaxAgeSec: bigint('last_max_age_sec', { mode: 'number' }).$type<Of<typeof sqlite.profileSync, 'lastMaxAgeSec'>>(),
  accountingOk: boolean('accounting_ok').$type<Of<typeof sqlite.profileSync, 'accountingOk'>>(),
  accountingError: text('accounting_error').$type<Of<typeof sqlite.profileSync, 'accountingError'>>(),
  accountingCheckedAt: bigint('accounting_checked_at', { mode: 'number' }).$type<
    Of<typeof sqlite.profileSync, 'accountingCheckedAt'>
  >(),
  updatedAt: bigint('updated_at', { mode: 'number' })
    .notNull()
    .default(sql`(extract(epoch from now()) * 1000)::bigint`)
    .$type<Of<typeof sqlite.profileSync, 'updatedAt'>>(),
});

export const requestReplays = schedflow.table(
  'request_replays',
  {
    requestId: text('request_id')
      .notNull()
      .references(() => jobRequests.id, { onDelete: 'cascade' })
      .$type<Of<typeof sqlite.requestReplays, 'requestId'>>(),
    tokenName: text('token_name').notNull().$type<Of<typeof sqlite.requestReplays, 'tokenName'>>(),
    key: text('key').notNull().$type<Of<typeof sqlite.requestReplays, 'key'>>(),
    count: bigint('count', { mode: 'number' }).notNull().$type<Of<typeof sqlite.requestReplays, 'count'>>(),
    firstAt: bigint('first_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.requestReplays, 'firstAt'>>(),
    lastAt: bigint('last_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.requestReplays, 'lastAt'>>(),
  },
  (t) => [primaryKey({ columns: [t.requestId, t.tokenName, t.key] })],
);

export const runTransitions = schedflow.table(
  'run_transitions',
  {
    id: bigint('id', { mode: 'number' })
      .primaryKey()
      .generatedByDefaultAsIdentity()
      .$type<Of<typeof sqlite.runTransitions, 'id'>>(),
    runId: text('run_id')
      .notNull()
      .references(() => pipelineRuns.id, { onDelete: 'cascade' })
      .$type<Of<typeof sqlite.runTransitions, 'runId'>>(),
    fromState: text('from_state').$type<Of<typeof sqlite.runTransitions, 'fromState'>>(),
    toState: text('to_state').notNull().$type<Of<typeof sqlite.runTransitions, 'toState'>>(),
    at: bigint('at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.runTransitions, 'at'>>(),
    source: text('source').notNull().$type<Of<typeof sqlite.runTransitions, 'source'>>(),
    detail: text('detail').$type<Of<typeof sqlite.runTransitions, 'detail'>>(),
  },
  (t) => [index('run_transitions_run').on(t.runId, t.at)],
);

export const summaries = schedflow.table(
  'summaries',
  {
    id: text('id').primaryKey().$type<Of<typeof sqlite.summaries, 'id'>>(),
    requestId: text('request_id').$type<Of<typeof sqlite.summaries, 'requestId'>>(),
    runId: text('run_id').$type<Of<typeof sqlite.summaries, 'runId'>>(),
    state: text('state').notNull().$type<Of<typeof sqlite.summaries, 'state'>>(),
    kind: text('kind').$type<Of<typeof sqlite.summaries, 'kind'>>(),
    text: text('text').$type<Of<typeof sqlite.summaries, 'text'>>(),
    note: text('note').$type<Of<typeof sqlite.summaries, 'note'>>(),
    model: text('model').$type<Of<typeof sqlite.summaries, 'model'>>(),
    promptTokens: bigint('prompt_tokens', { mode: 'number' }).$type<Of<typeof sqlite.summaries, 'promptTokens'>>(),
    completionTokens: bigint('completion_tokens', { mode: 'number' }).$type<
      Of<typeof sqlite.summaries, 'completionTokens'>
    >(),
    latencyMs: bigint('latency_ms', { mode: 'number' }).$type<Of<typeof sqlite.summaries, 'latencyMs'>>(),
    attempts: bigint('attempts', { mode: 'number' })
      .notNull()
      .default(0)
      .$type<Of<typeof sqlite.summaries, 'attempts'>>(),
    errorCode: text('error_code').$type<Of<typeof sqlite.summaries, 'errorCode'>>(),
    error: text('error').$type<Of<typeof sqlite.summaries, 'error'>>(),
    findings: jsonb('findings').$type<Of<typeof sqlite.summaries, 'findings'>>(),
    suggestion: jsonb('suggestion').$type<Of<typeof sqlite.summaries, 'suggestion'>>(),
    appliedRequestId: text('applied_request_id').$type<Of<typeof sqlite.summaries, 'appliedRequestId'>>(),
    appliedAt: bigint('applied_at', { mode: 'number' }).$type<Of<typeof sqlite.summaries, 'appliedAt'>>(),
    createdAt: bigint('created_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.summaries, 'createdAt'>>(),
    updatedAt: bigint('updated_at', { mode: 'number' }).notNull().$type<Of<typeof sqlite.summaries, 'updatedAt'>>(),
    completedAt: bigint('completed_at', { mode: 'number' }).$type<Of<typeof sqlite.summaries, 'completedAt'>>(),
  },
  (t) => [
    uniqueIndex('summaries_request').on(t.requestId),
    uniqueIndex('summaries_run').on(t.runId),
    index('summaries_state').on(t.state, t.createdAt),
  ],
);

export const webhookDeliveries = schedflow.table(
  'webhook_deliveries',
  {
    id: text('id').primaryKey().$type<Of<typeof sqlite.webhookDeliveries, 'id'>>(),
    event: text('event').notNull().$type<Of<typeof sqlite.webhookDeliveries, 'event'>>(),
    url: text('url').notNull().$type<Of<typeof sqlite.webhookDeliveries, 'url'>>(),
    requestId: text('request_id').$type<Of<typeof sqlite.webhookDeliveries, 'requestId'>>(),
    runId: text('run_id').$type<Of<typeof sqlite.webhookDeliveries, 'runId'>>(),
    payload: jsonb('payload').notNull().$type<Of<typeof sqlite.webhookDeliveries, 'payload'>>(),
    state: text('state').notNull().$type<Of<typeof sqlite.webhookDeliveries, 'state'>>(),
    attempts: bigint('attempts', { mode: 'number' })
      .notNull()
      .default(0)
      .$type<Of<typeof sqlite.webhookDeliveries, 'attempts'>>(),
    lastStatus: bigint('last_status', { mode: 'number' }).$type<Of<typeof sqlite.webhookDeliveries, 'lastStatus'>>(),
    lastError: text('last_error').$type<Of<typeof sqlite.webhookDeliveries, 'lastError'>>(),
    createdAt: bigint('created_at', { mode: 'number' })
      .notNull()
      .$type<Of<typeof sqlite.webhookDeliveries, 'createdAt'>>(),
    deliveredAt: bigint('delivered_at', { mode: 'number' }).$type<Of<typeof sqlite.webhookDeliveries, 'deliveredAt'>>(),
    updatedAt: bigint('updated_at', { mode: 'number' })
      .notNull()
      .$type<Of<typeof sqlite.webhookDeliveries, 'updatedAt'>>(),
  },
  (t) => [
    index('webhook_deliveries_state').on(t.state, t.createdAt),
    index('webhook_deliveries_request').on(t.requestId),
  ],
);
