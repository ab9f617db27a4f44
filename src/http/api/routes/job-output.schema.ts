import { z } from 'zod';
import { DEFAULT_TAIL_LINES, MAX_TAIL_LINES } from '../../../requests/job-output.js';
import { named, time } from '../shared-schemas.js';

/** Schemas of the job output route (job-output.ts). */

export const jobOutputQuery = z.strictObject({
  stream: z.enum(['stdout', 'stderr']).default('stdout').describe('which file: stdout (default) or stderr'),
  tail: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_TAIL_LINES)
    .default(DEFAULT_TAIL_LINES)
    .describe(
      `lines from the end, 1 to ${MAX_TAIL_LINES} (default ${DEFAULT_TAIL_LINES}); at most 1 MiB is read from the end whatever the lines`,
    ),
  task: z.coerce
    .number()
    .int()
    .min(0)
    .optional()
    .describe(
      "an array job's task index: each task writes its own file (`slurm-%A_%a.out` by default), so an array job's output is one task's; not for a single job",
    ),
});

export const jobOutputSchema = named(
  'JobOutput',
  z.object({
    id: z.string().describe('the request id'),
    job_id: z.number().int().describe("the Slurm job that wrote it: an array task's own job id"),
    task_id: z.number().int().nullable().describe('the array task whose file it is; null for a single job'),
    stream: z.enum(['stdout', 'stderr']),
    path: z.string().describe("the file read, as the scheduler reported it (or computed from the spec's pattern)"),
    host: z.string().describe("the daemon's host, where it was read"),
    same_file: z.boolean().describe('stderr asked for, and the job writes it to its stdout file (its spec names none)'),
    size_bytes: z.number().int().describe("the file's whole size"),
    modified_at: time,
    lines: z.number().int().describe('lines in `text`'),
    truncated: z.boolean().describe('earlier lines were left out'),
    text: z
      .string()
      .describe("the file's last lines; values of the job's own environment variables are masked, as on the UI"),
  }),
  "The end of a job's stdout or stderr",
);
