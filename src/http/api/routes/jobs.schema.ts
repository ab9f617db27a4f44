import { z } from 'zod';
import { REQUEST_STATES } from '../../../db/schema.js';
import { attemptPolicySchema } from '../../../requests/attempt-policy.js';
import { MAX_ARRAY_EXPRESSION_CHARS } from '../../../sched/job-array.js';
import { jobSpecOverridesSchema, jobSpecSchema, parseTimeLimit } from '../../../sched/job-spec.js';
import { describeProblem, SbatchScriptError, sbatchSpec } from '../../../sched/sbatch-script.js';
import { unwrapSubmitBody } from '../../../sched/slurmrestd-body.js';
import {
  BODY_EXAMPLES_KEY,
  type BodyExamples,
  cursorQuery,
  limitQuery,
  listOf,
  named,
  time,
  timeInput,
  webhookUrlOutput,
} from '../shared-schemas.js';
import { suggestionSchema, summarySchema } from './summaries.schema.js';

/** Schemas of the job request routes (jobs.ts). */

export const deadlinesInput = z
  .strictObject({
    max_pending: z.number().int().positive().optional().describe('seconds the job may wait to start'),
    start_by: timeInput.optional(),
    finish_by: timeInput.optional(),
  })
  .refine((d) => !d.start_by || !d.finish_by || Date.parse(d.start_by) <= Date.parse(d.finish_by), {
    message: 'finish_by is before start_by',
    path: ['finish_by'],
  });

/** The largest `sbatch` script taken: a script, not a data file (the body limit holds the rest). */
export const MAX_SBATCH_SCRIPT_CHARS = 1_000_000;

export const submitJobBody = named(
  'SubmitJob',
  z
    .strictObject({
      // slurmrestd's own submit body (`{"job": {…}}`) is taken as the job it wraps.
      spec: z
        .preprocess(unwrapSubmitBody, jobSpecOverridesSchema)
        .optional()
        .describe(
          "the job, in slurmrestd's job_desc_msg names (name, script, partition, time_limit, …); any other job_desc_msg member passes through. slurmrestd's submit body ({\"job\": {…}}) is taken as the job it wraps. Required unless `sbatch` is given; beside `sbatch`, its members take precedence over the script's #SBATCH lines",
        ),
      sbatch: z
        .string()
        .min(1)
        .max(MAX_SBATCH_SCRIPT_CHARS)
        .optional()
        .describe(
          'the job as an sbatch script: its #SBATCH lines (read as sbatch reads them, up to the first command) give the spec, the whole text is its `script`; named "sbatch" without --job-name, as sbatch names a script read from its input',
        ),
      profile: z.string().min(1).optional().describe("scheduler profile; default: the daemon's first"),
      webhook_url: z
        .url({ protocol: /^https?$/ })
        .optional()
        .describe(
          "POSTed, signed, when the job ends; never to the daemon's own host or network (loopback, private, link-local, metadata) unless the operator allows the host: 400 SCHEDFLOW_ERR_WEBHOOK_TARGET_REFUSED",
        ),
      deadlines: deadlinesInput.optional(),
      summarize: z
        .boolean()
        .optional()
        .describe("a summary when the job ends (true) or none (false); absent: the daemon's setting"),
      retry: attemptPolicySchema
        .optional()
        .describe(
          'retry policy: { on, limit, exit_codes, backoff, escalate: { memory_per_node: { factor, max }, time_limit: { factor, max } } }',
        ),
    })
    .transform(({ spec, sbatch, ...rest }, ctx) => {
      const job = jobOf(spec, sbatch, ctx);
      return job === undefined ? z.NEVER : { ...rest, spec: job };
    }),
  undefined,
  {
    spec: {
      summary: 'a job spec, with a webhook and a retry policy',
      value: {
        spec: {
          name: 'align-sample-42',
          script: '#!/bin/bash\nalign --threads 4 sample-42.fastq > sample-42.bam\n',
          partition: 'batch',
          cpus_per_task: 4,
          memory_per_node: '8G',
          time_limit: '2:00:00',
          environment: { SAMPLE: '42' },
        },
        webhook_url: 'https://lims.example.org/hooks/schedflow',
        retry: {
          on: ['NODE_FAIL', 'OUT_OF_MEMORY'],
          limit: 2,
          escalate: { memory_per_node: { factor: 2, max: '32G' } },
        },
      },
    },
    sbatch: {
      summary: 'an sbatch script, with a time limit set on top of its #SBATCH lines',
      value: {
        sbatch: '#!/bin/bash\n#SBATCH --job-name=hello\n#SBATCH --time=10\necho hello\n',
        spec: { time_limit: '0:30:00' },
      },
    },
  },
);

/** The job a submit body asks for: its `spec`, or its `sbatch` script with the `spec` on top. */
function jobOf(spec: Record<string, unknown> | undefined, sbatch: string | undefined, ctx: z.RefinementCtx) {
  if (sbatch === undefined) {
    if (spec === undefined) {
      ctx.addIssue({ code: 'custom', path: ['spec'], message: 'a job needs `spec` (or `sbatch`, a job script)' });
      return undefined;
    }
    const parsed = jobSpecSchema.safeParse(spec);
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) ctx.addIssue({ ...issue, path: ['spec', ...issue.path] });
    return undefined;
  }
  try {
    return sbatchSpec(sbatch, { defaultName: 'sbatch', overrides: spec });
  } catch (error) {
    if (!(error instanceof SbatchScriptError)) throw error;
    for (const problem of error.problems) {
      // A problem of the spec's members is the spec's (`spec.time_limit`); of a line, the script's.
      const path = problem.line === null ? (problem.option ?? 'spec').split('.') : ['sbatch'];
      ctx.addIssue({
        code: 'custom',
        path,
        message: problem.line === null ? problem.message : describeProblem(problem),
      });
    }
    return undefined;
  }
}

export const listJobsQuery = z.strictObject({
  state: listOf(REQUEST_STATES, 'state').optional(),
  profile: z.string().min(1).optional(),
  pipeline: z.string().min(1).optional().describe('steps of runs of this pipeline'),
  run_id: z.string().min(1).optional().describe('steps of this pipeline run'),
  created_since: timeInput.optional(),
  created_until: timeInput.optional(),
  limit: limitQuery,
  cursor: cursorQuery,
});

const deadlinesOutput = z.object({
  max_pending: z.number().int().nullable(),
  start_by: time.nullable(),
  finish_by: time.nullable(),
});

const retryOutput = z.object({
  cause: z
    .object({
      previous_attempt_id: z.string(),
      after: z.enum(REQUEST_STATES).describe('how the attempt before ended'),
      exit_code: z.number().int().nullable(),
      reason: z.string().describe('the same, in words, with what grew'),
      escalated: z.array(
        z.object({
          field: z.enum(['memory_per_node', 'time_limit']),
          from: z.number().describe('MB for memory, minutes for time'),
          to: z.number(),
          capped_by: z.enum(['policy', 'partition']).nullable().describe('what held it below its factor'),
        }),
      ),
    })
    .nullable()
    .describe('why this attempt was made; null for the first'),
  due_at: time.nullable().describe('after this attempt ended: when the next one is made (its backoff)'),
  next_attempt_id: z.string().nullable().describe('the attempt made after this one'),
  note: z.string().nullable().describe('why no attempt follows though the policy named this end (its limit, a bound)'),
  limit: z.number().int().nullable().describe("the policy's further attempts after the first"),
});

const pendingFields = {
  reason: z
    .string()
    .nullable()
    .describe(
      "Slurm's reason code as it sends it (`Resources`, `ReqNodeNotAvail, Reserved for maintenance`); null before the scheduler gave one",
    ),
  meaning: z.string().nullable().describe('the reason in plain words'),
  action: z.string().nullable().describe('what the user can do about it; null where there is nothing to say'),
  expected_start: time
    .nullable()
    .describe(
      "the scheduler's forecast of its start (Slurm's `start_time` of a pending job); null while it gives none (held, behind a dependency, just submitted)",
    ),
};

const pendingOutput = named('Pending', z.object(pendingFields), 'Why a pending job waits');

const partitionLoadOutput = named(
  'PartitionLoad',
  z.object({
    name: z.string().describe('the partition the job waits in'),
    state: z.string().describe('its state (`UP`, `DOWN`, `DRAIN`, `INACTIVE`)'),
    cpus_allocated: z.number().int(),
    cpus_idle: z.number().int().describe('on nodes that could take work now'),
    cpus_total: z.number().int(),
    jobs_running: z.number().int(),
    jobs_pending: z.number().int(),
    as_of: time.describe('when the cluster view it is read from was produced upstream'),
  }),
  "The load of the partition a pending job waits in, from the cluster view's last answer",
);

const pendingDetailOutput = named(
  'PendingDetail',
  z.object({
    ...pendingFields,
    partition: partitionLoadOutput
      .nullable()
      .describe(
        "its partition's load as the cluster view (GET /api/v1/cluster/{profile}/partitions) last read it; null when the view keeps no answer of the last 10 lifetimes (nobody viewed the cluster lately). Never read from the scheduler for this page",
      ),
  }),
  'Why a pending job waits, with its partition’s load',
);

export const jobSchema = named(
  'Job',
  z.object({
    id: z.string().describe('the request id'),
    name: z.string(),
    profile: z.string(),
    state: z.enum(REQUEST_STATES),
    origin: z.enum(['api', 'cli', 'pipeline']),
    owner: z
      .string()
      .describe(
        "whose request it is: its token's owner, its pipeline's for a step; `default` for what was recorded before owners existed. Only this owner (and admins, auditors) sees it",
      ),
    actor: z
      .string()
      .nullable()
      .describe(
        'who made it: `token:<name>`, `ui:<user>`, `cli:<unix user>`, `schedule:<pipeline>`, `schedflow` (the daemon: a retry, a step); null for what was recorded before actors were',
      ),
    job_id: z.number().int().nullable().describe("Slurm's job id, once the scheduler accepted the job"),
    adopted: z.boolean().describe('found by its marker after an interrupted submit'),
    raw_state: z.string().nullable(),
    reason: z.string().nullable().describe("Slurm's reason, as last seen: why it waits, or why it ended"),
    pending: pendingOutput
      .nullable()
      .describe('why it waits, while it is pending (null otherwise): read from the controller every 30 s'),
    exit_code: z.number().int().nullable(),
    signal: z.number().int().nullable(),
    error: z.object({ code: z.string().nullable(), message: z.string() }).nullable(),
    created_at: time,
    updated_at: time,
    submitted_at: time.nullable(),
    started_at: time.nullable(),
    ended_at: time.nullable(),
    run_id: z.string().nullable(),
    step: z.string().nullable(),
    attempt: z.number().int().describe('1, or which retry of its request this is'),
    run_attempt: z
      .number()
      .int()
      .nullable()
      .describe(
        'a pipeline step: which attempt of its run made it (1, or the resume that did); null for other requests',
      ),
    first_attempt_id: z.string().nullable().describe("a retry's first attempt: the request as submitted"),
    retry: retryOutput.nullable().describe('its retry policy at work; null without a policy'),
    held: z
      .object({
        by: z.string().describe('who held it: `token:<name>`, `ui:<user>`, `cli:<unix user>`'),
        at: time,
      })
      .nullable()
      .describe(
        'held through schedflow (hold): by whom and since when; a submitted job is held in Slurm, one not submitted yet is kept back until released. Null when not held',
      ),
    webhook_url: webhookUrlOutput,
    deadlines: deadlinesOutput.nullable(),
    links: z.object({ self: z.string(), run: z.string().optional() }),
  }),
  'A job request and where it is',
);

export const attemptSchema = z.object({
  id: z.string(),
  attempt: z.number().int(),
  state: z.enum(REQUEST_STATES),
  job_id: z.number().int().nullable(),
  exit_code: z.number().int().nullable(),
  reason: z.string().nullable().describe('why this attempt was made (null for the first)'),
  created_at: time,
  ended_at: time.nullable(),
  links: z.object({ self: z.string() }),
});

export const transitionSchema = z.object({
  from: z.enum(REQUEST_STATES).nullable(),
  to: z.enum(REQUEST_STATES),
  at: time,
  source: z.string().describe('api, cli, submit, poll, accounting, pipeline, summarize, retry, move'),
  raw_state: z.string().nullable(),
  reason: z.string().nullable(),
  stale: z.boolean().describe('learned from a stale (cached during an outage) answer'),
  detail: z.string().nullable(),
});

export const deduplicatedSchema = z
  .array(
    z.object({
      token: z.string().describe("the API token's name (never the token)"),
      idempotency_key: z.string(),
      count: z.number().int().describe('POSTs with this key answered with this request'),
      first_at: time,
      last_at: time,
    }),
  )
  .describe(
    'duplicate submissions: POSTs answered from a stored Idempotency-Key with this request instead of a new one, per token and key; empty when none',
  );

export const freshnessSchema = z
  .object({
    stale: z.boolean().describe('true when the state shown may be out of date'),
    detail: z.string(),
    profile: z.object({
      last_poll_at: time.nullable(),
      last_poll_ok: z.boolean().nullable(),
      last_poll_error: z.string().nullable(),
      seconds_since_poll: z.number().int().nullable(),
      answer_age_sec: z.number().int().nullable().describe("age of the scheduler's answer when it was read"),
      answer_stale: z.boolean().nullable(),
    }),
    job: z.object({
      last_seen_at: time.nullable(),
      last_seen_age_sec: z.number().int().nullable(),
      last_seen_stale: z.boolean().nullable(),
    }),
  })
  .describe("how current the state is: the profile's last poll and the job's last sighting");

export const outputPathsSchema = z
  .object({
    stdout: z
      .string()
      .nullable()
      .describe(
        "absolute path of the stdout file; null while not known, and for an array job, whose tasks each write their own (read one with the link's `task`)",
      ),
    stderr: z
      .string()
      .nullable()
      .describe('absolute path of the stderr file: the stdout file when the spec names none'),
    links: z
      .object({ stdout: z.string(), stderr: z.string() })
      .describe(
        "their ends, when the daemon's host can read them; an array job's are URI templates naming `{task}`, a task index",
      ),
  })
  .describe(
    "where the job's output goes, Slurm's patterns (%j, %x, %A_%a, …) expanded: as the scheduler reports it, or computed from the spec until it does",
  );

export const arraySchema = z
  .object({
    expression: z.string().describe("the spec's `array:` (Slurm's syntax: `0-99%10`)"),
    task_count: z.number().int(),
    counts: z.record(z.string(), z.number().int()).describe('tasks in each state (only the states some task is in)'),
    failures: z
      .array(
        z.object({
          task_id: z.number().int(),
          job_id: z.number().int().nullable(),
          state: z.enum(REQUEST_STATES),
          exit_code: z.number().int().nullable(),
          reason: z.string().nullable(),
          nodes: z.string().nullable(),
          started_at: time.nullable(),
          ended_at: time.nullable(),
          stdout: z
            .string()
            .nullable()
            .describe("the task's own stdout file (`slurm-%A_%a.out` by default); null while not known"),
          links: z.object({ output: z.string().describe("the end of the task's stdout") }),
        }),
      )
      .describe('the tasks that ended other than completed, by index (at most 100)'),
    retry_of: z.string().nullable().describe('the array request whose tasks this one runs again'),
  })
  .describe('an array job: its tasks, compactly; null for a single job');

export const jobDetailSchema = named(
  'JobDetail',
  jobSchema.extend({
    pending: pendingDetailOutput
      .nullable()
      .describe('why it waits, while it is pending (null otherwise): read from the controller every 30 s'),
    array: arraySchema.nullable(),
    spec: z
      .record(z.string(), z.unknown())
      .describe(
        'the spec as submitted, except the values of environment variables whose names say secret (DB_PASS, API_TOKEN, ssh_key...): `NAME=[redacted:NAME]`, as the output view masks them',
      ),
    output: outputPathsSchema,
    transitions: z.array(transitionSchema),
    attempts: z
      .array(attemptSchema)
      .describe('every attempt of its request, first to last (one, without retries), each its own Slurm job'),
    deduplicated: deduplicatedSchema,
    freshness: freshnessSchema,
    summary: summarySchema.nullable().describe('null until the job has ended and its summary is made, or when off'),
  }),
);

export const createdJobSchema = z.object({
  id: z.string(),
  state: z.enum(REQUEST_STATES),
  links: z.object({ self: z.string() }),
});

export const resubmittedJobSchema = createdJobSchema.extend({
  resubmits: z.string().describe('the request whose suggested change this one applies'),
  changes: suggestionSchema.shape.changes,
});

const retryTasksObject = z.strictObject({
  indexes: z
    .string()
    .min(1)
    // An expression no longer than the spec's own `array:` may be (src/sched/job-array.ts).
    .max(MAX_ARRAY_EXPRESSION_CHARS)
    .optional()
    .describe("the task indexes to run again, in Slurm's syntax (`3,7-9`); default: every task that did not complete"),
});

export const retryTasksBody = retryTasksObject.optional().meta({
  [BODY_EXAMPLES_KEY]: {
    some: { summary: 'these tasks', value: { indexes: '3,7-9' } },
    failed: { summary: 'every task that did not complete', value: {} },
  } satisfies BodyExamples<typeof retryTasksObject>,
});

export const retriedTasksSchema = createdJobSchema.extend({
  array: z.string().describe("the new request's `array:`"),
  retry_of: z.string(),
});

export const cancelAnswerSchema = z.object({
  id: z.string(),
  state: z.enum(REQUEST_STATES),
  message: z.string(),
  links: z.object({ self: z.string() }),
});

/** Some of an array job's tasks, in Slurm's syntax: read at the route (a syntax error is the field's). */
const arrayIndexesInput = z
  .string()
  .min(1)
  .max(MAX_ARRAY_EXPRESSION_CHARS)
  .describe("task indexes of an array job in Slurm's syntax (`1,3-5`); absent: the whole job");

/** `PATCH /api/v1/jobs/:id`: the fields a job may have changed, one at least. */
export const updateJobBody = named(
  'UpdateJob',
  z
    .strictObject({
      time_limit: z
        .union([z.number().int().min(1), z.string().min(1)])
        .optional()
        .describe('minutes, or a Slurm time (`90`, `1:30:00`, `2-00:00:00`)'),
      partition: z.string().min(1).max(200).optional(),
      qos: z.string().min(1).max(200).optional(),
      nice: z.number().int().min(-2_147_483_645).max(2_147_483_645).optional(),
      name: z
        .string()
        .min(1)
        .max(200)
        .refine((s) => !/[\n\r]/.test(s), 'the job name must be one line')
        .optional(),
      comment: z.string().max(1000).optional(),
      indexes: arrayIndexesInput.optional(),
    })
    .superRefine((body, ctx) => {
      const { indexes: _indexes, ...fields } = body;
      if (Object.values(fields).every((value) => value === undefined)) {
        ctx.addIssue({
          code: 'custom',
          path: [],
          message: 'name at least one of time_limit, partition, qos, nice, name, comment',
        });
      }
      if (body.time_limit !== undefined) {
        try {
          parseTimeLimit(body.time_limit);
        } catch (error) {
          ctx.addIssue({ code: 'custom', path: ['time_limit'], message: (error as Error).message });
        }
      }
    }),
  undefined,
  {
    time_limit: { summary: 'a longer time limit', value: { time_limit: '4:00:00' } },
    partition: {
      summary: 'another partition for two tasks of an array job',
      value: { partition: 'long', comment: 'moved: waited too long in batch', indexes: '3,5' },
    },
  },
);

/** `POST /api/v1/jobs/:id/hold` and `/release`: the whole job, or some of an array's tasks. */
export const controlJobBody = named(
  'ControlJob',
  z
    .strictObject({ indexes: arrayIndexesInput.optional() })
    .optional()
    .describe('empty for the whole job (an array: every task not running); `indexes` for some of its tasks'),
  undefined,
  {
    whole: { summary: 'the whole job', value: {} },
    tasks: { summary: 'some tasks of an array job', value: { indexes: '1,3-5' } },
  },
);

/** The answer of a hold, release or update of a request. */
export const controlAnswerSchema = named(
  'JobControlAnswer',
  z.object({
    id: z.string(),
    state: z.enum(REQUEST_STATES),
    changed: z.boolean().describe('false when there was nothing to do (already held, not held)'),
    where: z
      .enum(['history', 'scheduler'])
      .nullable()
      .describe('`history`: not submitted yet, changed before it goes out; `scheduler`: Slurm accepted it'),
    held: z.object({ by: z.string(), at: time }).nullable(),
    message: z.string(),
    links: z.object({ self: z.string() }),
  }),
  'What a hold, release or update did',
);
