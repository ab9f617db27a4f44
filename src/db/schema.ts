import { sql } from 'drizzle-orm';
import { index, integer, primaryKey, real, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';
import type { SpecSuggestion, SummaryFindings } from './summary-data.js';

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
  /** Refused for now by an accounting/QOS submit limit (Slurm error 2050): submitted once jobs end. */
  'waiting',
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

/**
 * Who recorded a transition: `submit` and `summarize` are those queues' workers; `retry` made a
 * policy's attempt; `move` moved a job that waited too long to another partition (`on_pending`).
 */
export const TRANSITION_SOURCES = [
  'api',
  'cli',
  'submit',
  'poll',
  'accounting',
  'pipeline',
  'summarize',
  'retry',
  'move',
] as const;
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
    /**
     * Whose it is (src/access/principal.ts): the owner of the token that asked, of the pipeline a
     * step belongs to, or of the request a retry or re-submission repeats. Rows recorded before
     * owners existed belong to `default`.
     */
    owner: text('owner').notNull().default('default'),
    /** Who made it: `token:<name>`, `ui:<user>`, `cli:<unix user>`, `schedule:<pipeline>`, …; null before actors were recorded. */
    actor: text('actor'),
    state: text('state', { enum: REQUEST_STATES }).notNull(),
    /** Slurm's job id, once the scheduler accepted the job. */
    jobId: integer('job_id'),
    /**
     * When the controller's record under jobId was seen carrying this request's marker: the id is
     * this request's job. Until then it is only what slurmctld answered, and a slurmctld that
     * crashed before saving its state may have given the id to another job since.
     */
    jobConfirmedAt: integer('job_confirmed_at'),
    /** True when the job was found by its marker after an ambiguous submit. */
    adopted: integer('adopted', { mode: 'boolean' }).notNull().default(false),
    /** Upstream's view, as last seen. */
    rawState: text('raw_state'),
    /** Slurm's reason, as last seen: why a pending job waits, or why an ended job ended. */
    reason: text('reason'),
    /**
     * The scheduler's forecast of a pending job's start (ms), as last read from the controller's
     * full record (src/requests/pending-details.ts); null without one, and once the job left
     * pending (the start reached is startedAt).
     */
    expectedStartAt: integer('expected_start_at'),
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
    /** A pipeline run's step: the run, the step's name, and which attempt (retries make new requests). */
    runId: text('run_id'),
    step: text('step'),
    attempt: integer('attempt').notNull().default(1),
    /**
     * Which attempt of its run made this step request (1 unless the run was resumed: a resume is
     * a new attempt of the run, src/pipelines/run-resume.ts); its step retries keep it.
     */
    runAttempt: integer('run_attempt').notNull().default(1),
    /** Steps of the same run this one waits for, as Slurm dependencies: `[{ step, type }]`. */
    needs: text('needs', { mode: 'json' }).$type<StepNeed[]>(),
    /**
     * A pipeline step's outputs (`name=value` lines it wrote to $SCHEDFLOW_OUTPUTS), read by the
     * run engine once the step completed (src/pipelines/step-outputs.ts); null until then.
     */
    outputs: text('outputs', { mode: 'json' }).$type<StepOutputs>(),
    /** POSTed (signed) when the request reaches a terminal state. */
    webhookUrl: text('webhook_url'),
    /** Absolute limits: `{ maxPendingSec, startBy, finishBy }` (ms for the times). */
    deadlines: text('deadlines', { mode: 'json' }).$type<Deadlines>(),
    /** A summary when the request ends: true or false, or null for the pipeline's or the global setting. */
    summarize: integer('summarize', { mode: 'boolean' }),
    /** When the summaries dispatcher took this ended request up (a summary made, or none wanted). */
    summaryCheckedAt: integer('summary_checked_at'),
    /** The request this one submits again with a summary's suggested change. */
    resubmitOf: text('resubmit_of'),
    /**
     * Where the job's stdout and stderr go, expanded (`%j`, `%x`, …) and absolute: as the
     * scheduler reports them once a record has them, computed from the spec at submission until
     * then (null when the pattern needs what is not known yet, such as `%N`). stderr is the
     * stdout file when the spec names none.
     */
    stdoutPath: text('stdout_path'),
    stderrPath: text('stderr_path'),
    /**
     * An array job (`array:` in its spec): how many tasks it has; the tasks the scheduler has
     * reported are `array_tasks` rows, the others pending. Null for a single job.
     */
    arrayTaskCount: integer('array_task_count'),
    /** The array request whose tasks (some of them: the failed ones, say) this one runs again. */
    arrayRetryOf: text('array_retry_of'),
    /** Its retry policy (src/requests/attempt-policy.ts), copied to every attempt. */
    retryPolicy: text('retry_policy', { mode: 'json' }).$type<AttemptPolicy>(),
    /** A retry's first attempt: the request that was asked for (null on that one). */
    firstAttemptId: text('first_attempt_id'),
    /** Why this attempt was made: the previous attempt's end and what grew. */
    retryCause: text('retry_cause', { mode: 'json' }).$type<RetryCause>(),
    /** Ended, and its policy makes another attempt at this time (a persisted backoff). */
    retryDueAt: integer('retry_due_at'),
    /** The attempt made after this one ended. */
    nextAttemptId: text('next_attempt_id'),
    /** Why no attempt follows this one though its policy named its end (limit reached, a bound). */
    retryNote: text('retry_note'),
    /** Its spec's `on_pending` at work (src/requests/pending-mover.ts); null without one. */
    pendingMove: text('pending_move', { mode: 'json' }).$type<PendingMove>(),
    /**
     * Held (src/requests/job-control.ts): since when and by whom (an actor). A submitted job is
     * held in Slurm (priority 0); one not submitted yet is kept back, not submitted, until released.
     * Null when not held.
     */
    heldAt: integer('held_at'),
    heldBy: text('held_by'),
    /**
     * When its spec was last changed before submission (a hold or an update, not its owner's
     * file): the submitter's move to `submitting` is refused when it read an older spec.
     */
    specChangedAt: integer('spec_changed_at'),
  },
  (t) => [
    index('job_requests_state').on(t.profile, t.state),
    uniqueIndex('job_requests_job').on(t.profile, t.jobId),
    index('job_requests_created').on(t.createdAt),
    index('job_requests_run').on(t.runId, t.step),
    // Partial: only requests the summaries dispatcher has not taken up (active ones and those just ended).
    index('job_requests_summary_todo').on(t.state).where(sql`"summary_checked_at" is null`),
    // Partial: the deadline check reads only requests that have deadlines, on every tick.
    index('job_requests_deadlines').on(t.state).where(sql`"deadlines" is not null`),
    // Partial: the retry check reads only ended attempts waiting for their next one.
    index('job_requests_retry_due').on(t.retryDueAt).where(sql`"retry_due_at" is not null`),
    // Partial: the mover reads only requests whose spec says on_pending, on every tick.
    index('job_requests_pending_move').on(t.state).where(sql`"pending_move" is not null`),
    index('job_requests_attempts').on(t.firstAttemptId),
    // An owner's lists, and the count of its requests in flight (a token's quota).
    index('job_requests_owner').on(t.owner, t.createdAt),
    index('job_requests_owner_state').on(t.owner, t.state),
  ],
);

/**
 * One task of an array request: its state (a request state), and what the scheduler said of it.
 * A task has a row once the scheduler has reported it (a pending array lists every task), never
 * before, so an array costs the history what its tasks are, not what its expression spans; a
 * task has its own Slurm job id once it leaves the array's pending record (the last to start
 * takes the array's own id).
 */
export const arrayTasks = sqliteTable(
  'array_tasks',
  {
    requestId: text('request_id').notNull(),
    taskId: integer('task_id').notNull(),
    jobId: integer('job_id'),
    state: text('state', { enum: REQUEST_STATES }).notNull(),
    reason: text('reason'),
    exitCode: integer('exit_code'),
    signal: integer('signal'),
    startedAt: integer('started_at'),
    endedAt: integer('ended_at'),
    nodes: text('nodes'),
    /**
     * Since when the task has been missing from the controller with nothing from accounting (ms);
     * after the lost grace it is `lost`, as a single job is (src/requests/array-poll.ts).
     */
    missingSince: integer('missing_since'),
    /**
     * Where the task's stdout and stderr went, as a record of it reported them (Slurm expands
     * `%A_%a`, `%j`, `%N`, … per task, and resolves them against the working directory); null
     * until one has, when the reader computes them from the spec (src/requests/job-output.ts).
     */
    stdoutPath: text('stdout_path'),
    stderrPath: text('stderr_path'),
  },
  (t) => [primaryKey({ columns: [t.requestId, t.taskId] }), index('array_tasks_state').on(t.requestId, t.state)],
);

export const DEPENDENCY_TYPES = ['afterok', 'afterany', 'afternotok'] as const;
export type DependencyType = (typeof DEPENDENCY_TYPES)[number];
export interface StepNeed {
  step: string;
  type: DependencyType;
}

/**
 * What the daemon read of a step's outputs file: the values, or why there are none (`error`: the
 * file could not be read, or was not valid). `path` is the file read (null: the step has no
 * working directory, so no file was given to it).
 */
export interface StepOutputs {
  path: string | null;
  values: Record<string, string>;
  error: string | null;
}

/** How a resource grows at each retry: times `factor`, never above `max` (MB for memory, minutes for time). */
export interface Escalation {
  factor: number;
  max: number;
}

/**
 * A retry policy as stored (with a request, or in a run's plan); src/requests/attempt-policy.ts
 * reads it. Only `on` and `limit` are required: plans of runs made before backoff and
 * escalation existed hold just those.
 */
export interface AttemptPolicy {
  /** Request states that give another attempt. */
  on: RequestState[];
  /** Further attempts after the first. */
  limit: number;
  /** FAILED is retried only with one of these exit codes; absent or null: any. */
  exitCodes?: number[] | null;
  /** Wait before attempt n+1: `delaySec × factor^(n-1)`, at most `maxSec`. Absent: at once. */
  backoff?: { delaySec: number; factor: number; maxSec: number | null } | null;
  /** `memoryPerNode` grows on OUT_OF_MEMORY, `timeLimit` on TIMEOUT. */
  escalate?: { memoryPerNode?: Escalation; timeLimit?: Escalation } | null;
}

/** A resource changed for a retry. */
export interface EscalatedField {
  field: 'memory_per_node' | 'time_limit';
  from: number;
  to: number;
  /** What capped it below the factor's value, when something did. */
  cappedBy?: 'policy' | 'partition';
}

/** Why an attempt was made: how the one before it ended, and what grew. */
export interface RetryCause {
  previousId: string;
  after: RequestState;
  exitCode: number | null;
  escalated: EscalatedField[];
  /** The same, in words. */
  reason: string;
}

/**
 * A request's `on_pending` (src/sched/on-pending.ts) as the mover follows it: where the job goes
 * next and since when it waits where it is. A move by cancel and resubmission makes a new attempt,
 * which carries it on from the next partition.
 */
export interface PendingMove {
  afterSec: number;
  partitions: string[];
  /** Index in `partitions` of the next move; its length once none is left. */
  next: number;
  /** The partition it waits in: the spec's (null: the profile's or Slurm's default) or the last it was moved to. */
  partition: string | null;
  /** When it began waiting there (its last move); null: since its submission (`submitted_at`). */
  since: number | null;
  /**
   * Set before the job is cancelled to be submitted again in this partition (Slurm refused the
   * update): the cancel is then the move's, not the request's end, and a mover that stopped
   * half-way finishes it.
   */
  movingTo?: string | null;
  /** That move's reason, for its transition (the request's `reason` is Slurm's, JobHeldUser by then). */
  movingReason?: string | null;
  /** Why no move is made any more, when one could not be (the job could not be held, say). */
  note?: string | null;
}

export interface Deadlines {
  maxPendingSec?: number;
  startBy?: number;
  finishBy?: number;
}

export const RUN_STATES = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'skipped'] as const;
export type RunState = (typeof RUN_STATES)[number];
export const TERMINAL_RUN_STATES = [
  'succeeded',
  'failed',
  'cancelled',
  'skipped',
] as const satisfies readonly RunState[];

export const RUN_TRIGGERS = ['schedule', 'catchup', 'api', 'cli', 'ui', 'upstream'] as const;
export type RunTrigger = (typeof RUN_TRIGGERS)[number];

/** One run of a pipeline: its steps are job requests with this run id. */
export const pipelineRuns = sqliteTable(
  'pipeline_runs',
  {
    id: text('id').primaryKey(),
    pipeline: text('pipeline').notNull(),
    /** The pipeline's owner when the run was made (its file's `owner:`); its steps are this owner's. */
    owner: text('owner').notNull().default('default'),
    /** Who made it, as on a request (`schedule:<pipeline>` for the schedule's runs); null before actors were recorded. */
    actor: text('actor'),
    trigger: text('trigger', { enum: RUN_TRIGGERS }).notNull(),
    /**
     * Who started it, in words (`API token "ci"`, `web UI (alice)`, `CLI (bob, pid 4242)`); null
     * for the schedule's runs, and for runs recorded before the column (their `trigger` says how).
     */
    triggeredBy: text('triggered_by'),
    /** The cron time this run is for (scheduled and catch-up runs); one run per tick. */
    scheduledFor: integer('scheduled_for'),
    /** Values given at trigger time (`${params.x}`). */
    params: text('params', { mode: 'json' }).$type<Record<string, string>>().notNull(),
    /** The steps as resolved when the run was created (templating applied), so a reload does not change a run. */
    definition: text('definition', { mode: 'json' }).notNull(),
    state: text('state', { enum: RUN_STATES }).notNull(),
    /** Why a run was skipped or failed, in words. */
    detail: text('detail'),
    webhookUrl: text('webhook_url'),
    createdAt: integer('created_at').notNull(),
    startedAt: integer('started_at'),
    endedAt: integer('ended_at'),
    updatedAt: integer('updated_at').notNull(),
    /** When the summaries dispatcher took this ended run up (a summary made, or none wanted). */
    summaryCheckedAt: integer('summary_checked_at'),
    /**
     * When someone asked for the run to be cancelled, and who (`API token "ci"`, `web UI (…)`,
     * `CLI`): from then on its steps are cancelled rather than retried, and it ends `cancelled`
     * once every one has ended. Kept here, not in memory, so a restart finishes the cancel.
     */
    cancelRequestedAt: integer('cancel_requested_at'),
    cancelledBy: text('cancelled_by'),
    /** How many times the run has been started: 1, and one more for each resume (src/pipelines/run-resume.ts). */
    attempt: integer('attempt').notNull().default(1),
    /**
     * The run whose end started this one (`trigger: upstream`, the pipeline file's `on:`), and
     * which attempt of it ended: one run per upstream end (the unique index), however many
     * hosts follow the ends (src/pipelines/upstream-runs.ts).
     */
    upstreamRunId: text('upstream_run_id'),
    upstreamAttempt: integer('upstream_attempt'),
    /**
     * When the runs this ended run starts (`on:` of other pipelines) were made, or none was
     * wanted; null while that is to do. A resume clears it: the run will end again.
     */
    downstreamCheckedAt: integer('downstream_checked_at'),
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

/** Who moved a run: how it was started (its trigger) when made, `pipeline` for the engine's moves (started, ended), `api`/`cli` for a cancel. */
export const RUN_TRANSITION_SOURCES = [...RUN_TRIGGERS, 'pipeline'] as const;
export type RunTransitionSource = (typeof RUN_TRANSITION_SOURCES)[number];

/**
 * A run's state changes, as job_transitions are a request's: one row per move, written in the
 * transaction of the move by src/pipelines/run-transition.ts (from_state null: the run was made).
 */
export const runTransitions = sqliteTable(
  'run_transitions',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    runId: text('run_id')
      .notNull()
      .references(() => pipelineRuns.id, { onDelete: 'cascade' }),
    fromState: text('from_state', { enum: RUN_STATES }),
    toState: text('to_state', { enum: RUN_STATES }).notNull(),
    at: integer('at').notNull(),
    source: text('source', { enum: RUN_TRANSITION_SOURCES }).notNull(),
    /** Why, in words: a skip's reason, a failed run's steps, who cancelled it. */
    detail: text('detail'),
  },
  (t) => [index('run_transitions_run').on(t.runId, t.at)],
);

/**
 * Per-pipeline schedule state: the last cron time a run was made for, for
 * catch-up after downtime, and an admin's pause. The pause lives here rather
 * than in Redis so it outlasts a restart and every daemon sharing the history
 * honours it.
 */
export const pipelineSchedules = sqliteTable('pipeline_schedules', {
  pipeline: text('pipeline').primaryKey(),
  lastScheduledFor: integer('last_scheduled_for'),
  /** Set while an admin has paused the schedule (the UI or the local API): when, and who (`token <name>`, `password`). */
  pausedAt: integer('paused_at'),
  pausedBy: text('paused_by'),
  updatedAt: integer('updated_at').notNull(),
});

export const DEADLINE_KINDS = ['max_pending', 'start_by', 'finish_by', 'never_started'] as const;
export type DeadlineKind = (typeof DEADLINE_KINDS)[number];

/** A missed deadline, recorded once per request (or run) and kind. */
export const deadlineMisses = sqliteTable(
  'deadline_misses',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    /** `request:<id>` or `run:<id>`: what missed it, unique with the kind. */
    subject: text('subject').notNull(),
    requestId: text('request_id'),
    runId: text('run_id'),
    kind: text('kind', { enum: DEADLINE_KINDS }).notNull(),
    at: integer('at').notNull(),
    /** What was late and why, with the scheduler's reason for pending jobs. */
    detail: text('detail').notNull(),
  },
  (t) => [uniqueIndex('deadline_misses_once').on(t.subject, t.kind), index('deadline_misses_run').on(t.runId)],
);

/**
 * What a token may do. `read`, `submit`, `cancel` and `control` (hold, release, update) act on its
 * owner's requests and runs only;
 * `audit` reads every owner's and changes nothing; `admin` holds every scope, on every owner's.
 */
export const API_SCOPES = ['submit', 'read', 'cancel', 'control', 'audit', 'admin'] as const;
export type ApiScope = (typeof API_SCOPES)[number];

/** Local API tokens: only a SHA-256 of the token is kept; the token is shown once. */
export const apiTokens = sqliteTable('api_tokens', {
  id: text('id').primaryKey(),
  name: text('name').notNull().unique(),
  hash: text('hash').notNull().unique(),
  scopes: text('scopes', { mode: 'json' }).$type<ApiScope[]>().notNull(),
  /** Whose requests the token makes and sees. Tokens made before owners existed belong to `default`. */
  owner: text('owner').notNull().default('default'),
  /** The scheduler profiles its requests may name; null: any. */
  profiles: text('profiles', { mode: 'json' }).$type<string[]>(),
  /** Its owner's requests not yet ended past which it submits no more; null: no limit. */
  maxInFlight: integer('max_in_flight'),
  /** Requests it may have accepted in a day (the last 24 hours); null: no limit. */
  maxPerDay: integer('max_per_day'),
  createdAt: integer('created_at').notNull(),
  lastUsedAt: integer('last_used_at'),
  revokedAt: integer('revoked_at'),
});

/** Answers to POSTs with an `Idempotency-Key`, per token, so a retried POST gets the first answer. */
export const idempotencyKeys = sqliteTable(
  'idempotency_keys',
  {
    tokenId: text('token_id').notNull(),
    key: text('key').notNull(),
    /** Method and path, and a SHA-256 of the body: another body under the same key is a conflict. */
    route: text('route').notNull(),
    bodyHash: text('body_hash').notNull(),
    status: integer('status').notNull(),
    response: text('response', { mode: 'json' }).notNull(),
    createdAt: integer('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.tokenId, t.key] }), index('idempotency_keys_created').on(t.createdAt)],
);

/**
 * Duplicate submissions: POSTs answered with an existing request from a stored
 * `Idempotency-Key` (a lab service sending the same job again), counted per
 * request, token and key. Kept with the request: the keys themselves expire
 * after a day, and a token's row goes when its name is taken over.
 */
export const requestReplays = sqliteTable(
  'request_replays',
  {
    requestId: text('request_id')
      .notNull()
      .references(() => jobRequests.id, { onDelete: 'cascade' }),
    /** The token's name, never the token. */
    tokenName: text('token_name').notNull(),
    key: text('key').notNull(),
    count: integer('count').notNull(),
    firstAt: integer('first_at').notNull(),
    lastAt: integer('last_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.requestId, t.tokenName, t.key] })],
);

export const WEBHOOK_EVENTS = ['job.finished', 'run.finished', 'deadline.missed', 'summary.ready'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

/**
 * Webhook deliveries, written in the same transaction as what they report (an
 * outbox), then sent by the notify queue; attempts and outcome are kept.
 */
export const webhookDeliveries = sqliteTable(
  'webhook_deliveries',
  {
    id: text('id').primaryKey(),
    event: text('event', { enum: WEBHOOK_EVENTS }).notNull(),
    url: text('url').notNull(),
    requestId: text('request_id'),
    runId: text('run_id'),
    payload: text('payload', { mode: 'json' }).notNull(),
    state: text('state', { enum: ['pending', 'delivered', 'failed'] }).notNull(),
    attempts: integer('attempts').notNull().default(0),
    lastStatus: integer('last_status'),
    lastError: text('last_error'),
    createdAt: integer('created_at').notNull(),
    deliveredAt: integer('delivered_at'),
    updatedAt: integer('updated_at').notNull(),
  },
  (t) => [
    index('webhook_deliveries_state').on(t.state, t.createdAt),
    index('webhook_deliveries_request').on(t.requestId),
  ],
);

export const SUMMARY_STATES = ['pending', 'ready', 'failed'] as const;
export type SummaryState = (typeof SUMMARY_STATES)[number];
export const SUMMARY_KINDS = ['llm', 'template'] as const;
export type SummaryKind = (typeof SUMMARY_KINDS)[number];

/**
 * Post-job summaries: one per ended request or pipeline run that asked for one.
 * `kind` says who wrote the text (the LLM, or the fixed template from the same
 * facts); `state` is `failed` when the LLM could not, after retries (the
 * template text is kept then, with the reason in `error`).
 */
export const summaries = sqliteTable(
  'summaries',
  {
    id: text('id').primaryKey(),
    requestId: text('request_id'),
    runId: text('run_id'),
    state: text('state', { enum: SUMMARY_STATES }).notNull(),
    kind: text('kind', { enum: SUMMARY_KINDS }),
    text: text('text'),
    /** Why the text is the template's (LLM off, budget spent, the job never ran, the LLM failed). */
    note: text('note'),
    model: text('model'),
    promptTokens: integer('prompt_tokens'),
    completionTokens: integer('completion_tokens'),
    latencyMs: integer('latency_ms'),
    attempts: integer('attempts').notNull().default(0),
    errorCode: text('error_code'),
    error: text('error'),
    /** Efficiency, triage, per-step findings and a pipeline's trend. */
    findings: text('findings', { mode: 'json' }).$type<SummaryFindings>(),
    /** The proposed spec change (a request's own summary only); applied by an explicit action. */
    suggestion: text('suggestion', { mode: 'json' }).$type<SpecSuggestion>(),
    /** The request made by applying the suggestion, and when. */
    appliedRequestId: text('applied_request_id'),
    appliedAt: integer('applied_at'),
    createdAt: integer('created_at').notNull(),
    updatedAt: integer('updated_at').notNull(),
    completedAt: integer('completed_at'),
  },
  (t) => [
    uniqueIndex('summaries_request').on(t.requestId),
    uniqueIndex('summaries_run').on(t.runId),
    index('summaries_state').on(t.state, t.createdAt),
  ],
);

/** LLM use per UTC day, against the daily request and token budget. */
export const llmUsage = sqliteTable('llm_usage', {
  /** `YYYY-MM-DD`, UTC. */
  day: text('day').primaryKey(),
  requests: integer('requests').notNull().default(0),
  tokens: integer('tokens').notNull().default(0),
  updatedAt: integer('updated_at').notNull(),
});

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
    /** Largest step's MaxRSS (tres.requested.max mem); null where the cluster gathers none. */
    peakMemoryMb: integer('peak_memory_mb'),
    comment: text('comment').notNull(),
    syncedAt: integer('synced_at').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.profile, t.jobId] }),
    index('accounting_jobs_request').on(t.requestId),
    index('accounting_jobs_submit').on(t.submitTime),
  ],
);

/**
 * What the efficiency trends of a pipeline (src/summaries/trend.ts) read of one ended step
 * request, kept after retention prunes the request and its accounting record
 * (src/db/retention.ts): one compact row per request, written from the detail just before the
 * detail goes, by the same function the trends use on the detail (src/db/job-usage.ts), so a
 * prune never changes what a trend says. Never pruned: a row per step a run, small.
 */
export const jobUsage = sqliteTable(
  'job_usage',
  {
    requestId: text('request_id').primaryKey(),
    profile: text('profile').notNull(),
    jobId: integer('job_id'),
    runId: text('run_id'),
    step: text('step'),
    attempt: integer('attempt').notNull(),
    state: text('state', { enum: REQUEST_STATES }).notNull(),
    elapsedSec: integer('elapsed_sec'),
    /** Minutes, or null when neither the spec nor accounting said (or the spec said `infinite`). */
    timeLimitMin: integer('time_limit_min'),
    timeLimitInfinite: integer('time_limit_infinite', { mode: 'boolean' }).notNull().default(false),
    cpus: integer('cpus'),
    cpuTimeSec: real('cpu_time_sec'),
    peakMemoryMb: integer('peak_memory_mb'),
    /** The spec's `cpus_per_task` and `time_limit`, the members a resize proposal changes. */
    spec: text('spec', { mode: 'json' }).$type<Record<string, unknown>>().notNull(),
    endedAt: integer('ended_at'),
    keptAt: integer('kept_at').notNull(),
  },
  (t) => [index('job_usage_run').on(t.runId, t.step)],
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
  /** The last accounting answer (poll or import): ok, or the error; schedflow then follows jobs with controller data alone. */
  accountingOk: integer('accounting_ok', { mode: 'boolean' }),
  accountingError: text('accounting_error'),
  accountingCheckedAt: integer('accounting_checked_at'),
  updatedAt: integer('updated_at').notNull().default(sql`(unixepoch() * 1000)`),
});

/**
 * Facts about the history itself, one row each: `history_id`, a random id made at its first
 * open, by which processes sharing one Redis tell whether they share this history.
 */
/**
 * What each partition's CPUs were doing, sampled every few minutes from the cluster view's
 * shared answer (workers/cluster-samples.ts): the Cluster page's allocation over the last hours.
 * Pruned past a window (`clusterSampleKeepMs`). One row per profile, partition and sample time;
 * a second process sampling the same instant writes nothing new.
 */
export const clusterSamples = sqliteTable(
  'cluster_samples',
  {
    profile: text('profile').notNull(),
    partition: text('partition').notNull(),
    /** When the view's answer was fetched from the scheduler (ms), not when it was sampled. */
    at: integer('at').notNull(),
    cpusTotal: integer('cpus_total').notNull(),
    cpusAllocated: integer('cpus_allocated').notNull(),
    cpusIdle: integer('cpus_idle').notNull(),
    cpusOther: integer('cpus_other').notNull(),
    jobsRunning: integer('jobs_running').notNull(),
    jobsPending: integer('jobs_pending').notNull(),
  },
  (t) => [primaryKey({ columns: [t.profile, t.partition, t.at] }), index('cluster_samples_at').on(t.at)],
);

export const historyMeta = sqliteTable('history_meta', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
});

export type JobRequestRow = typeof jobRequests.$inferSelect;
export type ArrayTaskRow = typeof arrayTasks.$inferSelect;
export type PipelineRunRow = typeof pipelineRuns.$inferSelect;
export type RunTransitionRow = typeof runTransitions.$inferSelect;
export type PipelineScheduleRow = typeof pipelineSchedules.$inferSelect;
export type DeadlineMissRow = typeof deadlineMisses.$inferSelect;
export type ApiTokenRow = typeof apiTokens.$inferSelect;
export type RequestReplayRow = typeof requestReplays.$inferSelect;
export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;
export type JobTransitionRow = typeof jobTransitions.$inferSelect;
export type AccountingJobRow = typeof accountingJobs.$inferSelect;
export type SummaryRow = typeof summaries.$inferSelect;
export type ClusterSampleRow = typeof clusterSamples.$inferSelect;
export type JobUsageRow = typeof jobUsage.$inferSelect;

/** How an audited action ended: done, refused (scope, ownership, quota, the door), or failed on the way. */
export const AUDIT_OUTCOMES = ['ok', 'refused', 'failed'] as const;
export type AuditOutcome = (typeof AUDIT_OUTCOMES)[number];

/**
 * Every state-changing action, one row each, written in the transaction of the action
 * (src/db/audit.ts): who did what to what, for whom, and how it ended. Never changed, never
 * deleted by the daemon; nothing secret is written (a token's name, never the token).
 */
export const auditLog = sqliteTable(
  'audit_log',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    at: integer('at').notNull(),
    /** `token:<name>`, `ui:<user>`, `cli:<unix user>`, `schedule:<pipeline>`, `schedflow` (the daemon itself). */
    actor: text('actor').notNull(),
    /** Whose thing it acted on (a request's or run's owner, a pipeline's, a token's); null: none (a login). */
    owner: text('owner'),
    /** `request.accept`, `request.cancel`, `run.trigger`, `token.create`, `ui.login`, … (docs/audit.md). */
    action: text('action').notNull(),
    /** What it acted on: `request:<id>`, `run:<id>`, `pipeline:<name>`, `token:<name>`, … */
    target: text('target'),
    outcome: text('outcome', { enum: AUDIT_OUTCOMES }).notNull(),
    /** The id of the HTTP request that asked (its `x-request-id`), when one did. */
    httpRequestId: text('http_request_id'),
    /** Why, in words: a refusal's reason, what changed. */
    detail: text('detail'),
  },
  (t) => [index('audit_log_at').on(t.at), index('audit_log_owner').on(t.owner, t.at)],
);
export type AuditRow = typeof auditLog.$inferSelect;
