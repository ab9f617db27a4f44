import { sql } from 'drizzle-orm';
import { index, integer, primaryKey, real, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';

/**
 * The local history. One row per job request (what someone asked for), its
 * transitions (every state change with time and source), and slurmdbd's
 * accounting records of each profile's account, including jobs schedflow did
 * not submit. Times are Unix milliseconds unless the name says otherwise.
 */

/** Life of a request; the terminal ones mirror Slurm's, plus submit_failed and lost. */
export const REQUEST_STATES = [
  'accepted',
  'queued',
  'submitting',
  'submitted',
  'pending',
  'running',
  'completed',
  'failed',
  'timeout',
  'cancelled',
  'node_fail',
  'out_of_memory',
  'preempted',
  'boot_fail',
  'deadline',
  'submit_failed',
  'lost',
] as const;
export type RequestState = (typeof REQUEST_STATES)[number];

/** States nothing changes any more. `lost` is not one: accounting may still resolve it. */
export const TERMINAL_REQUEST_STATES = [
  'completed',
  'failed',
  'timeout',
  'cancelled',
  'node_fail',
  'out_of_memory',
  'preempted',
  'boot_fail',
  'deadline',
  'submit_failed',
] as const satisfies readonly RequestState[];

/** Where a transition was learned. */
export const TRANSITION_SOURCES = ['api', 'cli', 'submit', 'poll', 'accounting'] as const;
export type TransitionSource = (typeof TRANSITION_SOURCES)[number];

export const jobRequests = sqliteTable(
  'job_requests',
  {
    id: text('id').primaryKey(),
    profile: text('profile').notNull(),
    name: text('name').notNull(),
    /** The job spec as submitted (JSON). */
    spec: text('spec', { mode: 'json' }).notNull(),
    origin: text('origin', { enum: ['api', 'cli', 'pipeline'] }).notNull(),
    state: text('state', { enum: REQUEST_STATES }).notNull(),
    /** Slurm's job id, once the scheduler accepted the job. */
    jobId: integer('job_id'),
    /** True when the job was found by its marker after an ambiguous submit. */
    adopted: integer('adopted', { mode: 'boolean' }).notNull().default(false),
    /** Upstream's view, as last seen. */
    rawState: text('raw_state'),
    reason: text('reason'),
    exitCode: integer('exit_code'),
    signal: integer('signal'),
    /** Errors of a failed submit, or why a job is lost: what to do is in the message. */
    errorCode: text('error_code'),
    errorMessage: text('error_message'),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
    /** When the last submit attempt began; a retry after a crash looks for the job from here. */
    submitAttemptAt: integer('submit_attempt_at'),
    submittedAt: integer('submitted_at'),
    startedAt: integer('started_at'),
    endedAt: integer('ended_at'),
    /** When the poller last saw the job upstream, and how old that answer was. */
    lastSeenAt: integer('last_seen_at'),
    lastSeenAgeSec: integer('last_seen_age_sec'),
    lastSeenStale: integer('last_seen_stale', { mode: 'boolean' }),
    /** When the job went missing from both controller and accounting (grace period start). */
    missingSince: integer('missing_since'),
  },
  (t) => [
    index('job_requests_state').on(t.profile, t.state),
    uniqueIndex('job_requests_job').on(t.profile, t.jobId),
    index('job_requests_created').on(t.createdAt),
  ],
);

export const jobTransitions = sqliteTable(
  'job_transitions',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    requestId: text('request_id')
      .notNull()
      .references(() => jobRequests.id, { onDelete: 'cascade' }),
    fromState: text('from_state', { enum: REQUEST_STATES }),
    toState: text('to_state', { enum: REQUEST_STATES }).notNull(),
    at: integer('at').notNull(),
    source: text('source', { enum: TRANSITION_SOURCES }).notNull(),
    rawState: text('raw_state'),
    reason: text('reason'),
    /** True when learned from a stale (cached during an outage) answer. */
    stale: integer('stale', { mode: 'boolean' }).notNull().default(false),
    detail: text('detail'),
  },
  (t) => [index('job_transitions_request').on(t.requestId, t.at)],
);

/** slurmdbd's records, imported by the reconciler; `requestId` links those schedflow submitted. */
export const accountingJobs = sqliteTable(
  'accounting_jobs',
  {
    profile: text('profile').notNull(),
    jobId: integer('job_id').notNull(),
    requestId: text('request_id'),
    name: text('name').notNull(),
    account: text('account').notNull(),
    user: text('user').notNull(),
    partition: text('partition').notNull(),
    state: text('state').notNull(),
    rawState: text('raw_state').notNull(),
    reason: text('reason'),
    exitCode: integer('exit_code'),
    signal: integer('signal'),
    submitTime: integer('submit_time_sec'),
    startTime: integer('start_time_sec'),
    endTime: integer('end_time_sec'),
    elapsedSec: integer('elapsed_sec'),
    timeLimitMin: integer('time_limit_min'),
    nodes: text('nodes'),
    cpus: integer('cpus'),
    memoryPerNodeMb: integer('memory_per_node_mb'),
    cpuTimeSec: real('cpu_time_sec'),
    comment: text('comment').notNull(),
    syncedAt: integer('synced_at').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.profile, t.jobId] }),
    index('accounting_jobs_request').on(t.requestId),
    index('accounting_jobs_submit').on(t.submitTime),
  ],
);

/** Per-profile progress of the reconciler and the poller. */
export const profileSync = sqliteTable('profile_sync', {
  profile: text('profile').primaryKey(),
  /** Unix seconds: accounting is imported from here (minus an overlap) next time. */
  accountingSyncedTo: integer('accounting_synced_to_sec'),
  accountingSyncedAt: integer('accounting_synced_at'),
  lastPollAt: integer('last_poll_at'),
  lastPollOk: integer('last_poll_ok', { mode: 'boolean' }),
  lastPollError: text('last_poll_error'),
  /** Age of the last poll's answer and whether it was stale: the freshness of every tracked job's state. */
  lastPollAgeSec: integer('last_poll_age_sec'),
  lastPollStale: integer('last_poll_stale', { mode: 'boolean' }),
  /** The proxy's cache lifetime seen in the last answer; the poll interval follows it. */
  lastMaxAgeSec: integer('last_max_age_sec'),
  updatedAt: integer('updated_at').notNull().default(sql`(unixepoch() * 1000)`),
});

export type JobRequestRow = typeof jobRequests.$inferSelect;
export type JobTransitionRow = typeof jobTransitions.$inferSelect;
export type AccountingJobRow = typeof accountingJobs.$inferSelect;
