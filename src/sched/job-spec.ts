import { z } from 'zod';

/**
 * The typed job spec: what a job file (YAML or JSON) holds and what the client
 * submits. Field names are slurmrestd's `job_desc_msg` names, so Slurm users
 * recognise them; a few take friendlier values (a map for `environment`,
 * `"4G"` for memory, `"1:30:00"` for a time limit). Any other `job_desc_msg`
 * member passes through unchanged.
 */

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Slurm time formats: minutes, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`, or UNLIMITED. */
export function parseTimeLimit(value: number | string): number | 'infinite' {
  if (typeof value === 'number') return value;
  const text = value.trim();
  if (/^(unlimited|infinite)$/i.test(text)) return 'infinite';
  if (/^\d+$/.test(text)) return Number(text);
  const match = /^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$/.exec(text);
  if (!match) throw new Error(`"${value}" is not a Slurm time (minutes, HH:MM:SS or D-HH:MM:SS)`);
  const [, days, a, b, c] = match;
  let seconds: number;
  if (days !== undefined) {
    // D-HH, D-HH:MM, D-HH:MM:SS
    seconds = Number(days) * 86_400 + Number(a) * 3600 + Number(b ?? 0) * 60 + Number(c ?? 0);
  } else if (c !== undefined) {
    seconds = Number(a) * 3600 + Number(b) * 60 + Number(c);
  } else {
    // MM:SS
    seconds = Number(a) * 60 + Number(b ?? 0);
  }
  // Slurm rounds a limit with seconds up to the next minute.
  return Math.ceil(seconds / 60);
}

/** Memory as Slurm writes it: a number of MB, or with a K/M/G/T suffix. */
export function parseMemoryMb(value: number | string): number {
  if (typeof value === 'number') return value;
  const match = /^(\d+(?:\.\d+)?)\s*([KMGT])?B?$/i.exec(value.trim());
  if (!match) throw new Error(`"${value}" is not a memory size (e.g. 512, 512M, 4G)`);
  const factor: Record<string, number> = { K: 1 / 1024, M: 1, G: 1024, T: 1024 * 1024 };
  return Math.ceil(Number(match[1]) * (factor[(match[2] ?? 'M').toUpperCase()] ?? 1));
}

/** A number, or a string in Slurm's notation that `parse` turns into one (its error becomes the issue). */
function slurmNotation<T>(parse: (value: number | string) => T) {
  return z.union([z.number().int().positive(), z.string()]).transform((value, ctx) => {
    try {
      return parse(value);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  });
}

const timeLimitSchema = slurmNotation(parseTimeLimit);
const memorySchema = slurmNotation(parseMemoryMb);

const environmentSchema = z
  .union([
    z.array(
      z.string().refine((entry) => ENV_NAME.test(entry.split('=')[0] ?? '') && entry.includes('='), {
        message: 'each entry must be NAME=value',
      }),
    ),
    z.record(
      z.string().regex(ENV_NAME, 'variable names are letters, digits and _'),
      z.union([z.string(), z.number(), z.boolean()]),
    ),
  ])
  .transform((env) => (Array.isArray(env) ? env : Object.entries(env).map(([name, value]) => `${name}=${value}`)));

export const jobSpecSchema = z
  .object({
    name: z.string().min(1),
    script: z
      .string()
      .min(1)
      .refine((s) => s.startsWith('#!'), {
        message: 'the script must start with an interpreter line such as #!/bin/bash',
      }),
    partition: z.string().min(1).optional(),
    account: z.string().min(1).optional(),
    environment: environmentSchema.optional(),
    current_working_directory: z.string().min(1).optional(),
    tasks: z.number().int().positive().optional(),
    cpus_per_task: z.number().int().positive().optional(),
    memory_per_node: memorySchema.optional(),
    /** Minutes, or a Slurm time string. */
    time_limit: timeLimitSchema.optional(),
    dependency: z.string().optional(),
    array: z.string().optional(),
    comment: z.string().optional(),
    standard_output: z.string().optional(),
    standard_error: z.string().optional(),
  })
  // Other job_desc_msg members pass through; the codec checks them against the version's schema.
  .catchall(z.unknown());

export type JobSpecInput = z.input<typeof jobSpecSchema>;
export type JobSpec = z.output<typeof jobSpecSchema>;

/** The fields the spec itself defines; anything else is a pass-through `job_desc_msg` member. */
export const KNOWN_SPEC_FIELDS: ReadonlySet<string> = new Set(Object.keys(jobSpecSchema.shape));

/** When a spec has no environment, a job still needs a PATH (sbatch would copy the caller's). */
export const DEFAULT_ENVIRONMENT = ['PATH=/usr/local/bin:/usr/bin:/bin'];
