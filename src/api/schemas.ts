import { z } from 'zod';
import { REQUEST_STATES, RUN_STATES, RUN_TRIGGERS, SUMMARY_KINDS, SUMMARY_STATES } from '../db/schema.js';
import { TRIAGE_CLASSES } from '../db/summary-data.js';
import { jobSpecSchema } from '../sched/job-spec.js';

/**
 * The local API's schemas: one set validates requests (through
 * fastify-type-provider-zod), shapes answers, and is the OpenAPI document.
 * JSON members use Slurm's snake_case, like the job spec they carry.
 * Schemas given an `id` (in zod's global registry, where `.describe()` keeps
 * descriptions too) become named components of the document.
 */
function named<T extends z.ZodType>(id: string, schema: T, description?: string): T {
  z.globalRegistry.add(schema, { id, ...(description && { description }) });
  return schema;
}

const time = z.string().describe('ISO 8601 time, UTC');
const webhookUrlOutput = z
  .string()
  .nullable()
  .describe('the webhook URL; without its user info and query string unless the token has the admin scope');
const timeInput = z.iso.datetime({ offset: true }).describe('ISO 8601 time with a zone, e.g. 2026-11-01T08:00:00Z');

// ---- errors

export const fieldProblemSchema = z.object({
  in: z.enum(['body', 'query', 'params', 'headers']),
  path: z.string().describe('dotted path inside the body, query, path or headers, e.g. spec.script'),
  reason: z.string(),
});

export const errorBodySchema = named(
  'Error',
  z.object({
    error: z.object({
      code: z.string().describe('stable code, e.g. SCHEDFLOW_ERR_VALIDATION'),
      message: z.string(),
      fields: z.array(fieldProblemSchema).optional().describe('validation errors: each field and what is wrong'),
      request_id: z.string().optional().describe('given on 500: the id to look for in the daemon log'),
      upstream: z
        .object({ status: z.number().int().nullable(), message: z.string().nullable(), code: z.string() })
        .optional()
        .describe("the scheduler's answer, when it refused or could not be reached"),
      state: z.string().optional().describe('the state of the resource, when it conflicts'),
      checks: z.record(z.string(), z.string()).optional().describe('readiness checks that failed'),
    }),
  }),
  'Every error answer: a code, a message, and what else helps',
);

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'invalid request (body, query, path or header): `fields` names each field and the reason',
  401: 'no token, or an unknown or revoked one',
  403: 'the token lacks the scope this route needs',
  404: 'no such resource',
  409: 'conflicts with the state of the resource or with an earlier use of the Idempotency-Key',
  413: 'body larger than 1 MiB',
  415: 'a body of a media type the API does not read: send Content-Type: application/json',
  429: "the token's rate limit is reached: see Retry-After",
  500: 'a bug; the answer carries a request id to find it in the log',
  502: 'the scheduler refused (its status and message are in `upstream`)',
  503: 'not available now (scheduler unreachable, pipelines not loaded); try again later',
};

/**
 * A documented answer: fastify serializes it with the schema, and the OpenAPI
 * document gets the description (a described copy of a named schema would
 * lose its name).
 */
export function answer<T extends z.ZodType>(description: string, schema: T) {
  return { description, content: { 'application/json': { schema } } };
}

/** Error answers of a route, documented with the shared Error body. */
export function errors(...statuses: number[]): Record<number, ReturnType<typeof answer<typeof errorBodySchema>>> {
  return Object.fromEntries(statuses.map((s) => [s, answer(ERROR_DESCRIPTIONS[s] ?? 'error', errorBodySchema)]));
}

// ---- common inputs

export const idParams = z.strictObject({ id: z.string().min(1).max(200) });

export const limitQuery = z.coerce
  .number()
  .int()
  .min(1)
  .max(200)
  .default(50)
  .describe('page size, 1 to 200 (default 50)');
export const cursorQuery = z
  .string()
  .min(1)
  .max(500)
  .optional()
  .describe('opaque: the `next` of the page before; absent for the first page');

/** `state=running,pending`: a comma-separated list of one enum's values. */
function listOf<T extends string>(values: readonly T[], what: string) {
  return z
    .string()
    .transform((text, ctx) => {
      const items = text
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean);
      const unknown = items.filter((s) => !(values as readonly string[]).includes(s));
      if (unknown.length) {
        ctx.addIssue({ code: 'custom', message: `unknown ${what} ${unknown.join(', ')}; one of ${values.join(', ')}` });
        return z.NEVER;
      }
      return items as T[];
    })
    .describe(`comma-separated: ${values.join(', ')}`);
}

/** Optional `Idempotency-Key` header of POST routes. */
export const idempotencyHeaders = z
  .object({
    'idempotency-key': z
      .string()
      .min(1)
      .max(255)
      .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces')
      .optional()
      .describe('the same key (per token) with the same body within 24 h gives the first answer again'),
  })
  .loose();

// ---- job requests

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

export const submitJobBody = named(
  'SubmitJob',
  z.strictObject({
    spec: jobSpecSchema.describe(
      "the job, in slurmrestd's job_desc_msg names (name, script, partition, time_limit, …); any other job_desc_msg member passes through",
    ),
    profile: z.string().min(1).optional().describe("scheduler profile; default: the daemon's first"),
    webhook_url: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe('POSTed, signed, when the job ends'),
    deadlines: deadlinesInput.optional(),
    summarize: z
      .boolean()
      .optional()
      .describe("a summary when the job ends (true) or none (false); absent: the daemon's setting"),
  }),
);

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

export const jobSchema = named(
  'Job',
  z.object({
    id: z.string().describe('the request id'),
    name: z.string(),
    profile: z.string(),
    state: z.enum(REQUEST_STATES),
    origin: z.enum(['api', 'cli', 'pipeline']),
    job_id: z.number().int().nullable().describe("Slurm's job id, once the scheduler accepted the job"),
    adopted: z.boolean().describe('found by its marker after an interrupted submit'),
    raw_state: z.string().nullable(),
    reason: z.string().nullable(),
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
    attempt: z.number().int(),
    webhook_url: webhookUrlOutput,
    deadlines: deadlinesOutput.nullable(),
    links: z.object({ self: z.string(), run: z.string().optional() }),
  }),
  'A job request and where it is',
);

export const transitionSchema = z.object({
  from: z.enum(REQUEST_STATES).nullable(),
  to: z.enum(REQUEST_STATES),
  at: time,
  source: z.string().describe('api, cli, submit, poll, accounting, pipeline'),
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

// ---- summaries (src/summaries/summary-data.ts holds what they store)

const measureSchema = z.union([
  z.object({
    known: z.literal(true),
    used: z.number(),
    of: z.number(),
    percent: z.number().describe('used / of × 100, one decimal'),
  }),
  z.object({ known: z.literal(false), why: z.string() }),
]);

const efficiencySchema = z
  .object({
    cpu: measureSchema.describe('CPU time against allocated CPU time (elapsed × CPUs), seconds'),
    memory: measureSchema.describe('peak memory against requested memory, MB'),
    time: measureSchema.describe('elapsed against the time limit, seconds'),
  })
  .describe('figures not recorded are not known, with why; never estimated');

const triageSchema = z
  .object({
    classification: z.enum(TRIAGE_CLASSES),
    cause: z.string(),
    reason: z
      .object({ code: z.string(), meaning: z.string() })
      .nullable()
      .describe("Slurm's reason code and what it means"),
    evidence: z.array(z.string()),
  })
  .describe('why a job did not complete');

const specValue = z.union([z.string(), z.number(), z.array(z.string())]);

const suggestionSchema = z
  .object({
    changes: z
      .record(z.string(), specValue)
      .describe('job spec members and their new values; {} is the same spec again'),
    previous: z.record(z.string(), specValue.nullable()),
    why: z.string(),
    step: z.string().nullable().describe("a pipeline step's: the change belongs in the pipeline file"),
    request_id: z.string().nullable().describe("a step's: the request it is about"),
  })
  .describe('a proposed change to the job spec, applied only by an explicit action');

export const summarySchema = named(
  'Summary',
  z.object({
    id: z.string(),
    of: z.enum(['request', 'run']).describe("the request's own, or (for a pipeline step) its run's"),
    request_id: z.string().nullable(),
    run_id: z.string().nullable(),
    state: z.enum(SUMMARY_STATES).describe('failed: the LLM failed and the template text stands'),
    kind: z.enum(SUMMARY_KINDS).nullable().describe('who wrote the text: llm or template; null while pending'),
    text: z.string().nullable().describe('redacted like everything sent to the LLM'),
    note: z.string().nullable().describe('why the template, or that the text was cut at the bound'),
    model: z.string().nullable(),
    prompt_tokens: z.number().int().nullable(),
    completion_tokens: z.number().int().nullable(),
    latency_ms: z.number().int().nullable(),
    attempts: z.number().int().describe('LLM attempts made'),
    error: z
      .object({ code: z.string().nullable(), message: z.string() })
      .nullable()
      .describe('of the last LLM attempt'),
    findings: z
      .object({
        efficiency: efficiencySchema.nullable(),
        triage: triageSchema.nullable(),
        steps: z
          .array(
            z.object({
              step: z.string(),
              request_id: z.string(),
              state: z.string(),
              efficiency: efficiencySchema,
              triage: triageSchema.nullable(),
            }),
          )
          .nullable()
          .describe("a run's: per step"),
        trend: z
          .object({
            runs: z.array(
              z.object({
                run_id: z.string(),
                state: z.string(),
                duration_sec: z.number().nullable(),
                created_at: time,
              }),
            ),
            median_duration_sec: z.number().nullable(),
            comparison: z.string().nullable(),
            steps: z.array(
              z.object({
                step: z.string(),
                max_time_percent: z.number().nullable(),
                resize: suggestionSchema.nullable(),
              }),
            ),
          })
          .nullable()
          .describe("a recurring pipeline's last runs"),
      })
      .nullable(),
    suggestion: suggestionSchema.nullable(),
    applied_request_id: z.string().nullable().describe('the request made by applying the suggestion'),
    applied_at: time.nullable(),
    created_at: time,
    updated_at: time,
    completed_at: time.nullable(),
    links: z.object({
      resubmit: z.string().optional().describe('POST here to apply the suggestion'),
      applied: z.string().optional(),
    }),
  }),
  'A post-job summary as stored (never the prompt)',
);

export const jobDetailSchema = named(
  'JobDetail',
  jobSchema.extend({
    spec: z.record(z.string(), z.unknown()),
    transitions: z.array(transitionSchema),
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

export const cancelAnswerSchema = z.object({
  id: z.string(),
  state: z.enum(REQUEST_STATES),
  message: z.string(),
  links: z.object({ self: z.string() }),
});

export function pageOf<T extends z.ZodType>(item: T) {
  return z.object({
    items: z.array(item),
    next: z.string().nullable().describe('cursor of the next page; null on the last'),
  });
}

// ---- history

export const historyQuery = z.strictObject({
  profile: z.string().min(1).optional(),
  state: z.string().min(1).optional().describe("Slurm's state from accounting, comma-separated, e.g. COMPLETED,FAILED"),
  since: timeInput.optional().describe('submitted at or after'),
  until: timeInput.optional().describe('submitted before'),
  external: z
    .enum(['true', 'false'])
    .optional()
    .describe('true: only jobs schedflow did not submit; false: only its own'),
  limit: limitQuery,
  cursor: cursorQuery,
});

export const historyItemSchema = named(
  'HistoryItem',
  z.object({
    profile: z.string(),
    job_id: z.number().int(),
    name: z.string(),
    account: z.string(),
    user: z.string(),
    partition: z.string(),
    external: z.boolean().describe('a job schedflow did not submit'),
    accounting: z.object({
      state: z.string(),
      exit_code: z.number().int().nullable(),
      submit_time: time.nullable(),
      start_time: time.nullable(),
      end_time: time.nullable(),
      elapsed_sec: z.number().int().nullable(),
      nodes: z.string().nullable(),
      cpus: z.number().int().nullable(),
      cpu_time_sec: z.number().nullable(),
    }),
    local: z
      .object({
        request_id: z.string(),
        state: z.enum(REQUEST_STATES).nullable(),
        links: z.object({ self: z.string() }),
      })
      .nullable()
      .describe("schedflow's request, for its own jobs"),
  }),
  "An accounting record (slurmdbd's view) beside schedflow's own",
);

// ---- pipelines and runs

export const runsQuery = z.strictObject({
  pipeline: z.string().min(1).optional(),
  state: listOf(RUN_STATES, 'state').optional(),
  limit: limitQuery,
  cursor: cursorQuery,
});

export const runSchema = named(
  'Run',
  z.object({
    id: z.string(),
    pipeline: z.string(),
    trigger: z.enum(RUN_TRIGGERS),
    scheduled_for: time.nullable(),
    params: z.record(z.string(), z.string()),
    state: z.enum(RUN_STATES),
    detail: z.string().nullable(),
    webhook_url: webhookUrlOutput,
    created_at: time,
    started_at: time.nullable(),
    ended_at: time.nullable(),
    updated_at: time,
    links: z.object({ self: z.string(), jobs: z.string() }),
  }),
  'A run of a pipeline',
);

export const runDetailSchema = named(
  'RunDetail',
  runSchema.extend({
    definition: z.unknown().describe('the steps as resolved when the run was made'),
    steps: z.array(jobSchema).describe('every request of the run, all attempts, in step then attempt order'),
    summary: summarySchema.nullable().describe('one across its steps; null until it has ended, or when off'),
  }),
);

export const pipelineSchema = named(
  'Pipeline',
  z.object({
    name: z.string(),
    file: z.string(),
    description: z.string().nullable(),
    steps: z.array(z.object({ name: z.string(), needs: z.array(z.string()) })),
    schedule: z
      .object({
        cron: z.string(),
        timezone: z.string(),
        enabled: z.boolean(),
        overlap: z.enum(['skip', 'queue', 'allow']),
        catchup: z.enum(['none', 'latest', 'all']),
        next: z.array(time).describe('the next five fire times (none while off in the file or paused)'),
        paused: z
          .object({ by: z.string().describe('who paused it: token <name>, or password'), at: time })
          .nullable()
          .describe('set while an admin has paused the schedule: its ticks make no runs; triggering still works'),
      })
      .nullable(),
    params: z.record(z.string(), z.string().nullable()).describe('parameters and their defaults (null: required)'),
    error: z.string().nullable().describe("the file's current problem; the version loaded before keeps running"),
    links: z.object({ runs: z.string(), trigger: z.string() }),
  }),
);

export const pipelineNameParams = z.strictObject({ name: z.string().min(1).max(200) });

export const triggerRunBody = named(
  'TriggerRun',
  z.strictObject({
    params: z
      .record(z.string(), z.union([z.string(), z.number(), z.boolean()]).transform(String))
      .optional()
      .describe('parameter values (the pipeline file uses them as params.NAME)'),
    webhook_url: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe('POSTed, signed, when the run ends'),
  }),
);

// ---- health

export const healthSchema = z.object({ status: z.literal('ok') });
export const readySchema = z.object({
  status: z.enum(['ready', 'not ready']),
  checks: z.record(z.string(), z.string()).describe('each check: ok, or what failed'),
  detail: z
    .record(z.string(), z.string())
    .optional()
    .describe(
      'what is degraded without making the daemon unready, by check: e.g. "serving stale answers since <time>" while a scheduler is down behind its proxy (submissions are still accepted and queued)',
    ),
});
