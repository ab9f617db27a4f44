import { z } from 'zod';
import { RUN_STATES, RUN_TRANSITION_SOURCES, RUN_TRIGGERS } from '../../../db/schema.js';
import { cursorQuery, limitQuery, listOf, named, time, webhookUrlOutput } from '../shared-schemas.js';
import { jobSchema } from './jobs.schema.js';
import { summarySchema } from './summaries.schema.js';

/** Schemas of the pipeline run routes (runs.ts). */

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
    trigger: z
      .enum(RUN_TRIGGERS)
      .describe(
        "how the run was started: `schedule` (a cron tick), `catchup` (a missed tick made up after a stop), `api`, `ui` (the web UI), `cli` (`schedflow runs trigger`) or `upstream` (the end of a run of a pipeline its file's `on:` names)",
      ),
    owner: z
      .string()
      .describe(
        "whose run it is: its pipeline's `owner:` (`default` when it names none, and for runs recorded before owners existed). Its owner, the owners its pipeline's `allow:` names, admins and auditors see it",
      ),
    actor: z
      .string()
      .nullable()
      .describe(
        'who started it: `token:<name>`, `ui:<user>`, `cli:<unix user>`, `schedule:<pipeline>`, `upstream:<pipeline>`; null for runs recorded before actors were',
      ),
    triggered_by: z
      .string()
      .nullable()
      .describe(
        'who started it (`API token "ci"`, `web UI (admin)`, `CLI (alice, pid 4242)`); null for the schedule\'s runs and for runs made before schedflow recorded it',
      ),
    scheduled_for: time.nullable(),
    upstream: z
      .object({
        run_id: z.string(),
        attempt: z.number().int().describe("the upstream run's attempt whose end started this run"),
        links: z.object({ self: z.string() }),
      })
      .nullable()
      .describe('the run whose end started this one (`trigger: upstream`); null for other runs'),
    params: z.record(z.string(), z.string()),
    state: z.enum(RUN_STATES),
    attempt: z
      .number()
      .int()
      .describe('1, and one more each time the run was resumed (`POST /api/v1/runs/{id}/resume`)'),
    detail: z.string().nullable(),
    webhook_url: webhookUrlOutput,
    created_at: time,
    started_at: time.nullable(),
    ended_at: time.nullable(),
    updated_at: time,
    cancel: z
      .object({ requested_at: time, by: z.string().nullable() })
      .nullable()
      .describe('when a cancel was asked for, and by whom; null when none was'),
    links: z.object({ self: z.string(), jobs: z.string() }),
  }),
  'A run of a pipeline',
);

export const runTransitionSchema = z.object({
  from: z.enum(RUN_STATES).nullable().describe('null: the run was made'),
  to: z.enum(RUN_STATES),
  at: time,
  source: z
    .enum(RUN_TRANSITION_SOURCES)
    .describe(
      'how it was started (its trigger) when made; `pipeline` for the engine (started, ended); `api`, `cli` or `ui` for a cancel or a resume',
    ),
  detail: z.string().nullable(),
});

export const runDetailSchema = named(
  'RunDetail',
  runSchema.extend({
    definition: z
      .unknown()
      .describe(
        "the steps as resolved when the run was made; each step spec's secret-looking environment values masked, as in a job's spec",
      ),
    outputs: z
      .record(z.string(), z.record(z.string(), z.string()))
      .describe(
        "the steps' outputs (name=value lines each wrote to $SCHEDFLOW_OUTPUTS), step → name → value, of each step's newest attempt; steps without any are left out",
      ),
    steps: z.array(jobSchema).describe('every request of the run, all attempts, in step then attempt order'),
    summary: summarySchema.nullable().describe('one across its steps; null until it has ended, or when off'),
    transitions: z
      .array(runTransitionSchema)
      .describe('its state changes, oldest first (none for runs made before schedflow recorded them)'),
  }),
);

export const runCancelAnswerSchema = named(
  'RunCancel',
  z.object({
    id: z.string(),
    state: z.enum(RUN_STATES),
    message: z.string(),
    cancel: z.object({ requested_at: time, by: z.string().nullable() }).nullable(),
    steps: z
      .array(
        z.object({
          step: z.string(),
          request_id: z.string(),
          outcome: z.enum(['withdrawn', 'cancel_sent', 'submitting', 'error']),
          detail: z.string().nullable(),
        }),
      )
      .describe('what this call did to each step that had not ended'),
    links: z.object({ self: z.string() }),
  }),
  'What a cancel of a run did',
);

/** What a hold or release did to one step of a run. */
const stepControlSchema = z.object({
  step: z.string(),
  request_id: z.string(),
  outcome: z
    .enum(['held', 'released', 'unchanged', 'running', 'submitting', 'refused', 'error'])
    .describe(
      '`running`: left as it is; `submitting`: being submitted right now, ask again; `refused`: Slurm refused (its words in `detail`); `error`: the scheduler did not answer',
    ),
  detail: z.string().nullable(),
});

export const runControlAnswerSchema = named(
  'RunControl',
  z.object({
    id: z.string(),
    state: z.enum(RUN_STATES),
    message: z.string(),
    steps: z.array(stepControlSchema).describe('what this call did to each step not ended'),
    links: z.object({ self: z.string() }),
  }),
  'What a hold or release of a run did',
);

export const pipelineControlAnswerSchema = named(
  'PipelineControl',
  z.object({
    pipeline: z.string(),
    message: z.string(),
    runs: z.array(runControlAnswerSchema),
  }),
  "What a hold or release of a pipeline's active runs did",
);

export const runResumeBody = named(
  'ResumeRun',
  z.strictObject({
    params: z
      .record(z.string(), z.union([z.string(), z.number(), z.boolean()]).transform(String))
      .optional()
      .describe(
        "parameters to change for the steps run again (the steps are rendered again from the pipeline file as loaded now); absent: the run's own",
      ),
  }),
  undefined,
  {
    same: { summary: "the run's own parameters", value: {} },
    params: { summary: 'one parameter changed', value: { params: { threads: 16 } } },
  },
);

export const runResumeAnswerSchema = named(
  'RunResume',
  z.object({
    id: z.string(),
    state: z.enum(RUN_STATES),
    attempt: z.number().int().describe('the attempt this resume began'),
    message: z.string(),
    kept: z.array(z.string()).describe('steps that had completed: their jobs and results are kept, not run again'),
    steps: z
      .array(z.object({ step: z.string(), request_id: z.string() }))
      .describe('steps made again in this attempt, each a new request of the run'),
    links: z.object({ self: z.string() }),
  }),
  'What a resume of a run did',
);
