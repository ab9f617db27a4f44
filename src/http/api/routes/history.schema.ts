import { z } from 'zod';
import { REQUEST_STATES } from '../../../db/schema.js';
import { cursorQuery, limitQuery, named, time, timeInput } from '../shared-schemas.js';

/** Schemas of the accounting history route (history.ts). */

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
        state: z.enum(REQUEST_STATES).nullable().describe("the request's state (an array's: the whole array's)"),
        task_id: z
          .number()
          .int()
          .nullable()
          .describe("the array task this record is (under the task's own job id); null for a single job"),
        links: z.object({
          self: z.string(),
          output: z.string().optional().describe("an array task's: the end of its own output"),
        }),
      })
      .nullable()
      .describe("schedflow's request, for its own jobs"),
  }),
  "An accounting record (slurmdbd's view) beside schedflow's own",
);
