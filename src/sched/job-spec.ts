import { z } from 'zod';
import { closestName } from '../lib/closest-name.js';
import { ArraySyntaxError, parseArrayExpression } from './job-array.js';
import { onPendingIssues, onPendingSchema } from './on-pending.js';
import { jobDescFields, validateAgainstSpec } from './spec-validator.js';
import { LATEST_VERSION, SUPPORTED_VERSIONS } from './versions.js';

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

/**
 * Largest values Slurm can store: time limits and counts are 32-bit with NO_VAL (0xfffffffe) and
 * INFINITE above; memory is 64-bit MB, of which JSON numbers here carry 2^53 exactly.
 */
const MAX_UINT32_VALUE = 0xfffffffd;
const MAX_MEMORY_MB = Number.MAX_SAFE_INTEGER;

/**
 * slurmrestd's own form of a number that may be unset or unlimited, `{set, infinite, number}`, as
 * its job_desc_msg takes it, so a body written for slurmrestd is taken as it is.
 */
const noValInput = z.strictObject({
  set: z.boolean().optional(),
  infinite: z.boolean().optional(),
  number: z.number().int().nonnegative().optional(),
});

function fromNoVal(value: z.infer<typeof noValInput>, what: string): number | string {
  if (value.infinite) {
    if (what === 'minutes') return 'UNLIMITED';
    throw new Error(`{"infinite": true}: there is no unlimited ${what}; give a number of MB or leave it out`);
  }
  if (value.set === false || value.number === undefined) {
    throw new Error(`{"set": false} leaves it unset: leave the member out instead`);
  }
  // As a plain number must be.
  if (value.number === 0) throw new Error('must be more than 0');
  return value.number;
}

/** A number, or a string in Slurm's notation that `parse` turns into one (its error becomes the issue). */
function slurmNotation(parse: (value: number | string) => number | 'infinite', max: number, what: string) {
  return z.union([z.number().int().positive(), z.string(), noValInput]).transform((given, ctx) => {
    try {
      const value = typeof given === 'object' ? fromNoVal(given, what) : given;
      const parsed = parse(value);
      if (parsed !== 'infinite' && parsed > max) throw new Error(`"${value}" is more ${what} than Slurm can take`);
      return parsed;
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  });
}

const timeLimitSchema = slurmNotation(parseTimeLimit, MAX_UINT32_VALUE, 'minutes');
const memorySchema = slurmNotation(parseMemoryMb, MAX_MEMORY_MB, 'memory');
const count = z.number().int().positive().max(MAX_UINT32_VALUE);

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

/** The spec's own fields and its pass-through members, before the checks that need them all. */
const jobSpecObject = z
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
    tasks: count.optional(),
    cpus_per_task: count.optional(),
    memory_per_node: memorySchema.optional(),
    /** Minutes, or a Slurm time string. */
    time_limit: timeLimitSchema.optional(),
    dependency: z.string().optional(),
    /**
     * Slurm's array expression (`0-99%10`): its syntax checked here, without listing its indexes;
     * the profile's `maxArraySize` at the door (src/requests/door.ts), where the profile is known.
     */
    array: z
      .string()
      .superRefine((value, ctx) => {
        try {
          parseArrayExpression(value);
        } catch (error) {
          if (!(error instanceof ArraySyntaxError)) throw error;
          ctx.addIssue({ code: 'custom', message: error.message });
        }
      })
      .optional(),
    comment: z.string().optional(),
    standard_output: z.string().optional(),
    standard_error: z.string().optional(),
    /** schedflow's, not Slurm's: move the job on when it waits too long (src/sched/on-pending.ts). */
    on_pending: onPendingSchema.optional(),
  })
  // Other job_desc_msg members pass through, checked here as far as no profile is needed: the
  // member must exist in some data parser, and its value must be one the newest would take.
  .catchall(z.unknown());

// Also beside other mistakes, so that one answer names them all.
const passThroughWhen = { when: ({ value }: { value: unknown }) => typeof value === 'object' && value !== null };

export const jobSpecSchema = jobSpecObject.superRefine(checkPassThrough, passThroughWhen).superRefine((spec, ctx) => {
  for (const issue of onPendingIssues(spec)) ctx.addIssue({ code: 'custom', ...issue });
});

/** Members to set on top of another spec (the API's `spec` beside an `sbatch` script): any of a spec's, none required. */
export const jobSpecOverridesSchema = jobSpecObject.partial().superRefine(checkPassThrough, passThroughWhen);

export type JobSpecInput = z.input<typeof jobSpecSchema>;
export type JobSpec = z.output<typeof jobSpecSchema>;

/** The fields the spec itself defines; anything else is a pass-through `job_desc_msg` member. */
export const KNOWN_SPEC_FIELDS: ReadonlySet<string> = new Set(Object.keys(jobSpecSchema.shape));

let anyVersionFields: ReadonlySet<string> | undefined;
/** Members of `job_desc_msg` in any supported data parser. */
function passThroughFields(): ReadonlySet<string> {
  anyVersionFields ??= new Set(SUPPORTED_VERSIONS.flatMap((version) => [...jobDescFields(version)]));
  return anyVersionFields;
}

/**
 * Compiles now what the first spec with members passed through to Slurm needs (ajv and the
 * scheduler's job_desc_msg schema): about 300 ms of CPU that a daemon spends at its start rather
 * than inside the API request or the submission that brings such a spec (2.5 s on a loaded
 * machine, api-fuzz.test), holding everything else up meanwhile.
 */
export function preparePassThroughCheck(): void {
  validateAgainstSpec(LATEST_VERSION, 'job_desc_msg', {});
}

function checkPassThrough(spec: Record<string, unknown>, ctx: z.RefinementCtx): void {
  const members: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(spec)) {
    if (KNOWN_SPEC_FIELDS.has(key)) continue;
    if (key === 'job' || key === 'jobs') {
      ctx.addIssue({ code: 'custom', path: [key], message: wrapperMessage(key) });
    } else if (!passThroughFields().has(key)) {
      const near = closestName(key, [...KNOWN_SPEC_FIELDS, ...passThroughFields()]);
      const hint = near ? `; did you mean "${near}"?` : '';
      ctx.addIssue({ code: 'custom', path: [key], message: `unknown member "${key}"${hint}` });
    } else if (jobDescFields(LATEST_VERSION).has(key)) {
      members[key] = value;
    }
  }
  if (Object.keys(members).length === 0) return;
  for (const error of passThroughErrors(members)) {
    // `/cpu_binding: must be string` → path ["cpu_binding"], the schema's words.
    const [pointer = '', message = error] = error.split(/: (.*)/s);
    ctx.addIssue({ code: 'custom', path: pointer.split('/').filter(Boolean), message });
  }
}

/**
 * The schema's complaints about pass-through members, remembered for the members last seen: a
 * spec is checked at the door and again when it is submitted, and a service's requests mostly
 * pass the same members; ajv's check of them was most of what parsing such a spec cost.
 */
function passThroughErrors(members: Record<string, unknown>): readonly string[] {
  const key = memoKeyOf(members);
  let errors = key === null ? undefined : passThroughChecked.get(key);
  if (errors === undefined) {
    errors = validateAgainstSpec(LATEST_VERSION, 'job_desc_msg', members).errors;
    if (key === null) return errors;
    if (passThroughChecked.size >= PASS_THROUGH_REMEMBERED) passThroughChecked.clear();
    passThroughChecked.set(key, errors);
  }
  return errors;
}

/**
 * The members as JSON when that text stands for them alone; null otherwise, and they are checked
 * afresh: JSON writes NaN and ±Infinity as null (which the check reads as absent, unlike them), a
 * value with toJSON as what it returns, and cannot write a BigInt or a loop (a pipeline file's
 * `.nan`, a spec built in code). Long ones are not kept either.
 */
function memoKeyOf(members: Record<string, unknown>): string | null {
  let plain = true;
  try {
    const key = JSON.stringify(members, function (this: Record<string, unknown>, name: string, value: unknown) {
      const original = this[name];
      if (typeof original === 'number' && !Number.isFinite(original)) plain = false;
      else if (typeof original === 'object' && original !== null && 'toJSON' in original) plain = false;
      return value;
    });
    return plain && key.length <= PASS_THROUGH_KEY_MAX ? key : null;
  } catch {
    return null;
  }
}
const passThroughChecked = new Map<string, readonly string[]>();
/** Sets of members remembered, each at most so long as JSON: past it the memory starts again, so it stays under 1 MiB. */
const PASS_THROUGH_REMEMBERED = 256;
const PASS_THROUGH_KEY_MAX = 4096;

/** A slurmrestd submit body (`{"job": {…}}`) where a spec was expected, where it is not unwrapped. */
function wrapperMessage(key: 'job' | 'jobs'): string {
  return key === 'job'
    ? `"job" is slurmrestd's submit body around a job: write its members (name, script, time_limit, …) at the top of the spec instead`
    : `"jobs" is slurmrestd's heterogeneous job: write one job's members at the top of the spec (schedflow submits one job per request)`;
}

/** When a spec has no environment, a job still needs a PATH (sbatch would copy the caller's). */
export const DEFAULT_ENVIRONMENT = ['PATH=/usr/local/bin:/usr/bin:/bin'];
