import { CronExpressionParser } from 'cron-parser';
import { z } from 'zod';
import { DEFAULT_OWNER, OWNER_NAME } from '../access/principal.js';
import { DEPENDENCY_TYPES, type StepNeed } from '../db/schema.js';
import { durationSchema } from '../lib/duration.js';
import { attemptPolicySchema } from '../requests/attempt-policy.js';
import { OUTPUTS_ENV } from '../requests/outputs-file.js';
import { jobSpecSchema } from '../sched/job-spec.js';
import { onPendingIssues } from '../sched/on-pending.js';

/**
 * The pipeline file format (`config/pipelines/<name>.yaml`): one pipeline a
 * file. Strict: an unknown field is an error, so a typo never silently does
 * nothing. Step fields use slurmrestd's `job_desc_msg` names, like job files;
 * other `job_desc_msg` members go under `slurm:`. The shipped JSON Schema
 * (config/pipeline.schema.json) is generated from this.
 */

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
const nameSchema = z.string().regex(NAME, 'letters, digits, and _ . - (not first)');

/** Slurm states a step may be retried on (its request's terminal states, in Slurm's spelling). */
export { RETRY_STATES } from '../requests/attempt-policy.js';

const deadlinesSchema = z
  .object({
    /** Longest time a step may wait in PENDING; reported with the scheduler's reason. */
    max_pending: durationSchema.optional(),
    /** Must have started this long after the run's scheduled (or trigger) time. */
    start_by: durationSchema.optional(),
    /** Must have ended this long after the run's scheduled (or trigger) time. */
    finish_by: durationSchema.optional(),
  })
  .strict();

const needSchema = z.union([
  nameSchema,
  z.object({ step: nameSchema, type: z.enum(DEPENDENCY_TYPES).default('afterok') }).strict(),
]);

const spec = jobSpecSchema.shape;

/**
 * A step's (or the defaults') environment. `$SCHEDFLOW_OUTPUTS` is schedflow's to set: the daemon
 * reads the file it names, and one set here could name any file on the daemon's host (its owner
 * checked only once the job's user is known). A step names its own file with `outputs: { file }`.
 */
const stepEnvironment = spec.environment.refine(
  (env) => !env?.some((entry) => entry.startsWith(`${OUTPUTS_ENV}=`)),
  `${OUTPUTS_ENV} is set by schedflow (a file in the step's working directory): name the step's own file with outputs: { file: NAME }`,
);

const stepSchema = z
  .object({
    /** The Slurm job name; default `<pipeline>.<step>`. */
    name: z.string().min(1).optional(),
    script: z.string().min(1).optional(),
    /** A script file, relative to the pipeline file and inside its folder (symlinks included); read when a run is made. */
    script_file: z
      .string()
      .min(1)
      .optional()
      .describe('a script file, relative to the pipeline file; it must be inside the pipelines folder'),
    partition: spec.partition,
    account: spec.account,
    environment: stepEnvironment,
    current_working_directory: spec.current_working_directory,
    tasks: spec.tasks,
    cpus_per_task: spec.cpus_per_task,
    memory_per_node: spec.memory_per_node,
    time_limit: spec.time_limit,
    /**
     * Slurm's array expression; or `${steps.<step>.outputs.<name>}`, sized when that step has
     * ended: a count N (tasks 0..N-1, 0: the step is skipped) or an index list (`1,3,5-7`).
     */
    array: z
      .string()
      .refine((value) => value.includes('${') || spec.array.safeParse(value).success, {
        message: 'not an array expression (such as 0-99%10 or 1,3,5-7)',
      })
      .optional()
      .describe(
        "Slurm's array expression (0-99%10), or ${steps.<step>.outputs.<name>}: a count N (tasks 0..N-1; 0 skips the step) or an index list known when that step has ended",
      ),
    /** Where the step writes its outputs, relative to its working directory; default: a file schedflow names. */
    outputs: z
      .object({
        file: z
          .string()
          .min(1)
          .refine((file) => !file.startsWith('/') && !file.split('/').includes('..'), {
            message: 'a path relative to the working directory, without ..',
          })
          // Not rendered: one path for every run, retry and resume (docs/pipelines.md).
          .refine((file) => !file.includes('${'), {
            message: 'a fixed path: placeholders (${…}) are not filled in here',
          })
          .describe('the file the step writes name=value lines to, relative to its working directory'),
      })
      .strict()
      .optional()
      .describe(
        'where the step writes its outputs ($SCHEDFLOW_OUTPUTS); default: a file schedflow names in its working directory',
      ),
    comment: spec.comment,
    standard_output: spec.standard_output,
    standard_error: spec.standard_error,
    /** Steps this one waits for: a name (afterok) or `{ step, type: afterok | afterany | afternotok }`. */
    needs: z
      .array(needSchema)
      .default([])
      .describe('steps this one waits for: a name (afterok) or { step, type: afterok | afterany | afternotok }'),
    /** The retry policy of job requests (src/requests/attempt-policy.ts); `{ on, limit }` is one. */
    retry: attemptPolicySchema.optional(),
    deadlines: deadlinesSchema.optional(),
    /** Move the step's job on when it waits too long: `{ after: 30m, partitions: [b, c] }` (src/sched/on-pending.ts). */
    on_pending: spec.on_pending,
    /** Other `job_desc_msg` members, passed through unchanged. */
    slurm: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('other job_desc_msg members, passed through unchanged'),
    /** Ask for a summary when the step ends (overrides the pipeline's setting). */
    summarize: z.boolean().optional(),
  })
  .strict()
  .superRefine((step, ctx) => {
    if ((step.script === undefined) === (step.script_file === undefined)) {
      ctx.addIssue({ code: 'custom', message: 'give exactly one of script and script_file', path: ['script'] });
    }
    // A step without a partition of its own is checked against the defaults' below.
    for (const issue of onPendingIssues(step)) ctx.addIssue({ code: 'custom', ...issue });
  });

const scheduleSchema = z
  .object({
    /** Five fields (minute hour day month weekday) or six (seconds first). */
    cron: z
      .string()
      .superRefine((text, ctx) => {
        const fields = text.trim().split(/\s+/).length;
        if (fields !== 5 && fields !== 6) {
          ctx.addIssue({ code: 'custom', message: `a cron expression has 5 or 6 fields, this one has ${fields}` });
          return;
        }
        try {
          CronExpressionParser.parse(text);
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: `invalid cron expression: ${(error as Error).message}` });
        }
      })
      .describe('five fields (minute hour day month weekday) or six (seconds first)'),
    /** An IANA time zone the cron expression is read in. */
    timezone: z
      .string()
      .default('UTC')
      .refine(isTimeZone, { message: 'not a time zone (use an IANA name such as Europe/Berlin or UTC)' })
      .describe('IANA time zone the cron expression is read in'),
    /** A tick while the last run is active: skip it, queue it behind, or allow both. */
    overlap: z
      .enum(['skip', 'queue', 'allow'])
      .default('skip')
      .describe('a tick while the last run is active: skip it, queue it behind, or allow both'),
    /** Ticks missed while schedflow was down: none, the latest one, or all of them (up to catchup_limit). */
    catchup: z
      .enum(['none', 'latest', 'all'])
      .default('none')
      .describe('ticks missed while schedflow was down: none, the latest one, or all (up to catchup_limit)'),
    catchup_limit: z.number().int().min(1).max(1000).default(10),
    /** false pauses the schedule without deleting the file. */
    enabled: z.boolean().default(true).describe('false pauses the schedule without deleting the file'),
  })
  .strict();

/** Which ends of a run start the pipeline, each kind naming the pipelines whose runs it follows. */
export const RUN_ENDS = ['succeeded', 'failed', 'finished'] as const;
export type RunEnd = (typeof RUN_ENDS)[number];

const upstreamList = z.array(nameSchema).min(1).optional();

const onSchema = z
  .object({
    succeeded: upstreamList.describe('pipelines whose runs, when they succeed, start a run of this one'),
    failed: upstreamList.describe('pipelines whose runs, when they fail, start a run of this one'),
    finished: upstreamList.describe(
      'pipelines whose runs, when they end in any way (succeeded, failed or cancelled), start a run of this one',
    ),
  })
  .strict()
  .refine((on) => RUN_ENDS.some((end) => on[end] !== undefined), {
    message: 'name the upstream pipelines under succeeded, failed or finished',
  });

export const pipelineFileSchema = z
  .object({
    /** Default: the file name without extension. */
    name: nameSchema.optional(),
    description: z.string().optional(),
    /** Whose it is: its runs and their steps belong to this owner (src/access/principal.ts). */
    owner: z
      .string()
      .regex(OWNER_NAME, 'letters, digits, and _ . - (not first), up to 64')
      .default(DEFAULT_OWNER)
      .describe(
        'whose pipeline it is: its runs and their steps belong to this owner; tokens of this owner trigger, pause and read it (default: "default")',
      ),
    /** Other owners whose tokens may trigger, pause and read it too. */
    allow: z
      .array(z.string().regex(OWNER_NAME, 'letters, digits, and _ . - (not first), up to 64'))
      .default([])
      .describe("other owners whose tokens may trigger, pause and read this pipeline (runs stay the owner's)"),
    schedule: scheduleSchema.optional(),
    /**
     * Runs of other pipelines whose end starts a run of this one, one per upstream end; their
     * values are `${upstream.…}` in its steps (src/pipelines/upstream-runs.ts).
     */
    on: onSchema
      .optional()
      .describe(
        'start a run of this pipeline when a run of another ends: { succeeded: [a], failed: [b], finished: [c] }; the upstream run is ${upstream.run_id}, ${upstream.pipeline}, ${upstream.state} and its outputs ${upstream.outputs.<step>.<name>}',
      ),
    /**
     * Parameters, `${params.NAME}` in steps (the value as is) or `${params.NAME:q}` (one
     * single-quoted shell word, for scripts), with a default; null makes one required at trigger time.
     */
    params: z
      .record(
        z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'letters, digits and _'),
        z.union([z.string(), z.number(), z.null()]),
      )
      .default({})
      .describe(
        'run parameters with their defaults (null: required at trigger time); in steps ${params.NAME} pastes the value as is, ${params.NAME:q} as one single-quoted shell word: use :q in scripts',
      ),
    defaults: z
      .object({
        /** The scheduler profile (config/profiles/<name>.yaml); default: the daemon's first profile. */
        profile: z.string().min(1).optional(),
        partition: spec.partition,
        account: spec.account,
        time_limit: spec.time_limit,
        environment: stepEnvironment,
        current_working_directory: spec.current_working_directory,
      })
      .strict()
      .default({}),
    deadlines: deadlinesSchema.optional(),
    /** Signed POST when a run ends or misses a deadline. */
    webhook: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe('signed POST when a run ends or misses a deadline'),
    summarize: z.boolean().optional(),
    steps: z
      .record(nameSchema, stepSchema)
      .refine((steps) => Object.keys(steps).length > 0, { message: 'a pipeline needs at least one step' }),
  })
  .strict()
  .superRefine((file, ctx) => {
    // A step without a partition of its own goes to the defaults': not a place to move it to either.
    const partition = file.defaults.partition;
    if (partition === undefined) return;
    for (const [name, step] of Object.entries(file.steps)) {
      if (step.partition !== undefined) continue;
      for (const issue of onPendingIssues({ partition, on_pending: step.on_pending })) {
        ctx.addIssue({ code: 'custom', path: ['steps', name, ...issue.path], message: issue.message });
      }
    }
  });

export type PipelineFile = z.output<typeof pipelineFileSchema>;

/** A pipeline file that passed every check, ready to plan runs from. */
export interface LoadedPipeline {
  name: string;
  file: string;
  def: PipelineFile;
  /** The scheduler profile its steps go to. */
  profile: string;
  /** Steps in an order where every step comes after the steps it needs. */
  order: string[];
  needs: Record<string, StepNeed[]>;
  /** Of the file's text: a reload that changes nothing is not a change. */
  hash: string;
  /** The `${upstream.outputs.<step>.<name>}` its steps use, each once (checked against the upstream pipelines with the folder). */
  upstreamRefs: readonly { step: string; name: string }[];
}
export type PipelineStep = PipelineFile['steps'][string];
export type StepDeadlines = z.output<typeof deadlinesSchema>;

function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/** The JSON Schema editors use to complete and check pipeline files (input shape). */
export function pipelineJsonSchema(): Record<string, unknown> {
  return {
    ...z.toJSONSchema(pipelineFileSchema, { io: 'input', unrepresentable: 'any' }),
    $id: 'https://schedflow.dev/schemas/pipeline.schema.json',
    title: 'schedflow pipeline',
  };
}
