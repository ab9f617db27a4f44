/**
 * Slurm's filename patterns for a batch job's output (`--output`, `--error`), expanded as
 * slurmstepd and slurmrestd's `stdout_expanded` do (Slurm 25.11 `expand_stdio_fields`,
 * src/common/print_fields.c). Only for schedulers that do not report the expanded paths: a
 * path the scheduler reports is always preferred.
 */

/** Slurm's NO_VAL: `%a` of a job that is not an array task expands to it. */
const NO_VAL = 4_294_967_294;
/** Slurm caps zero-padding at 10 digits (`%12j` pads to 10). */
const MAX_PADDING = 10;

/** What a pattern may name. A member left null (or absent) is not known (yet). */
export interface OutputPatternJob {
  jobId: number;
  name: string;
  /** The job's user (`%u`). */
  user?: string | null;
  /** The first node of the job (`%N`): known once it has started. */
  node?: string | null;
  /** Array master job id and task index (`%A`, `%a`, `%b`); absent for a job that is not an array task. */
  arrayJobId?: number | null;
  arrayTaskId?: number | null;
  /** How often the job was requeued (`%r`); 0 until then. */
  restartCount?: number;
}

/**
 * Expands one pattern for the batch step: `%%`, `%A`, `%a`, `%b`, `%J`, `%j`, `%N`, `%n`, `%r`,
 * `%s`, `%t`, `%u`, `%x`, with zero-padding (`%4a`) on the numeric ones. A letter Slurm does
 * not know stays as written (`%q`), and a backslash anywhere turns expansion off (the
 * backslashes go). Null when the pattern uses a field not known yet (`%N` before the job
 * starts, `%u` without a user, `%S`, which only slurmdbd knows).
 */
export function expandOutputPattern(pattern: string, job: OutputPatternJob): string | null {
  if (pattern.includes('\\')) return pattern.replaceAll('\\', '');
  let out = '';
  let unknown = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c !== '%') {
      out += c;
      continue;
    }
    // A lone % at the end is dropped, as Slurm does.
    if (i + 1 >= pattern.length) break;
    const digits = /^\d+/.exec(pattern.slice(i + 1))?.[0] ?? '';
    const key = pattern[i + 1 + digits.length];
    if (key === '%' && digits === '') {
      out += '%';
      i += 1;
      continue;
    }
    const padding = Math.min(Number(digits || '0'), MAX_PADDING);
    const value = key === undefined ? undefined : fieldOf(key, job);
    if (value === undefined) {
      // Not a field: Slurm writes it as it was (the % and any digits too).
      out += `%${digits}${key ?? ''}`;
    } else if (value === null) {
      unknown = true;
    } else {
      out += typeof value === 'number' ? String(value).padStart(padding, '0') : value;
    }
    i += digits.length + 1;
  }
  return unknown ? null : out;
}

/** A field's value: a number is zero-padded; null when not known; undefined when not a field. */
function fieldOf(key: string, job: OutputPatternJob): number | string | null | undefined {
  const isTask = job.arrayTaskId !== null && job.arrayTaskId !== undefined;
  switch (key) {
    case 'A':
      return isTask && job.arrayJobId ? job.arrayJobId : job.jobId;
    case 'a':
      return isTask ? (job.arrayTaskId as number) : NO_VAL;
    case 'b':
      return (isTask ? (job.arrayTaskId as number) : NO_VAL) % 10;
    // The batch step: %J is the job id alone, %s says "batch", and it is node 0, task 0.
    case 'J':
    case 'j':
      return job.jobId;
    case 's':
      return 'batch';
    case 'n':
    case 't':
      return 0;
    case 'r':
      return job.restartCount ?? 0;
    case 'N':
      return job.node || null;
    case 'u':
      return job.user || null;
    case 'x':
      return job.name;
    case 'S':
      return null;
    default:
      return undefined;
  }
}

/** The job spec's members that decide where its output goes (slurmrestd's job_desc_msg names). */
export interface OutputSpec {
  standard_output?: unknown;
  standard_error?: unknown;
  current_working_directory?: unknown;
}

export interface OutputPaths {
  /** Absolute path of the stdout file; null when the pattern needs a field not known yet. */
  stdout: string | null;
  /** Absolute path of the stderr file: the stdout file when the spec names none, as Slurm does. */
  stderr: string | null;
}

/**
 * Where a batch job's stdout and stderr go: the spec's patterns, or Slurm's default
 * (`slurm-%j.out`, an array task's `slurm-%A_%a.out`), expanded and resolved against its
 * working directory (the spec's, or `defaultCwd` where the scheduler puts a job that names
 * none). Relative paths stay relative when neither is known.
 */
export function outputPathsOf(spec: OutputSpec, job: OutputPatternJob, defaultCwd: string | null): OutputPaths {
  const cwd =
    typeof spec.current_working_directory === 'string' && spec.current_working_directory !== ''
      ? spec.current_working_directory
      : defaultCwd;
  const isTask = job.arrayTaskId !== null && job.arrayTaskId !== undefined;
  const stdoutPattern =
    typeof spec.standard_output === 'string' && spec.standard_output !== ''
      ? spec.standard_output
      : isTask
        ? 'slurm-%A_%a.out'
        : 'slurm-%j.out';
  const resolve = (pattern: string): string | null => {
    const expanded = expandOutputPattern(pattern, job);
    if (expanded === null) return null;
    // Slurm prefixes the working directory as it is, without normalising the result.
    if (expanded.startsWith('/') || cwd === null) return expanded;
    return cwd.endsWith('/') ? `${cwd}${expanded}` : `${cwd}/${expanded}`;
  };
  const stdout = resolve(stdoutPattern);
  const stderr =
    typeof spec.standard_error === 'string' && spec.standard_error !== '' ? resolve(spec.standard_error) : stdout;
  return { stdout, stderr };
}
