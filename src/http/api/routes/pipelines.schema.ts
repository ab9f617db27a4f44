import { z } from 'zod';
import { named, pathName, time } from '../shared-schemas.js';

/** Schemas of the pipeline routes (pipelines.ts). */

export const pipelineSchema = named(
  'Pipeline',
  z.object({
    name: z.string(),
    file: z.string(),
    description: z.string().nullable(),
    owner: z
      .string()
      .describe(
        "whose pipeline it is (its file's `owner:`, `default` when it names none; empty for a file that never loaded): its runs are this owner's",
      ),
    allow: z
      .array(z.string())
      .describe("other owners who may read, trigger and pause it and read its runs (its file's `allow:`)"),
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
    on: z
      .array(z.object({ end: z.enum(['succeeded', 'failed', 'finished']), pipeline: z.string() }))
      .describe(
        "the ends of other pipelines' runs that start a run of it (its file's `on:`; `finished`: any end); empty when none do",
      ),
    params: z.record(z.string(), z.string().nullable()).describe('parameters and their defaults (null: required)'),
    error: z.string().nullable().describe("the file's current problem; the version loaded before keeps running"),
    links: z.object({ runs: z.string(), trigger: z.string() }),
  }),
);

export const pipelineNameParams = z.strictObject({ name: pathName });

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
      .describe(
        "POSTed, signed, when the run ends; never to the daemon's own host or network unless the operator allows the host (as for jobs)",
      ),
  }),
  undefined,
  {
    params: {
      summary: 'parameter values, and a webhook when the run ends',
      value: { params: { sample: 'S-0042', threads: 8 }, webhook_url: 'https://lims.example.org/hooks/schedflow' },
    },
    defaults: { summary: "the pipeline's own parameter values", value: {} },
  },
);
