import { BeginTimeError, parseBeginTime } from './begin-time.js';
import { noValOf } from './codecs/common.js';
import { parseMemoryMb } from './job-spec.js';

/**
 * The sbatch options a job script's `#SBATCH` lines may carry, and the slurmrestd `job_desc_msg`
 * members each becomes: what sbatch itself puts in the job it sends (its `slurm_opt_create_job_desc`
 * and `_fill_job_desc_from_opts`, Slurm 25.11), so a script gives the same job through schedflow as
 * through sbatch (test/slurm/sbatch-scripts.test.ts compares the two on a real cluster). Values are
 * handed to the job spec as written where the spec reads Slurm's notation itself (`--time`,
 * `--mem`, `--array`), so the spec's checks and messages are the ones every spec gets.
 */

/** A value an option refuses; the reader adds the line and the option. */
export class OptionValueError extends Error {}

export interface SbatchOption {
  long: string;
  short?: string;
  /** As sbatch's getopt table: an optional value is only ever `--long=value`. */
  arg: 'required' | 'optional' | 'none';
  /** The spec members the option sets (replacing what an earlier one set, as a later option wins in sbatch). */
  apply(value: string | undefined, context: OptionContext): Record<string, unknown>;
}

export interface OptionContext {
  /** For `--begin` relative times. */
  now: Date;
}

const text =
  (member: string) =>
  (value: string | undefined): Record<string, unknown> => ({ [member]: value ?? '' });

function wholeNumber(value: string | undefined, what: string): number {
  if (value === undefined || !/^\d+$/.test(value)) throw new OptionValueError(`expects ${what}, got "${value ?? ''}"`);
  return Number(value);
}

const count = (member: string, what: string) => (value: string | undefined) => ({
  [member]: wholeNumber(value, what),
});

/** sbatch's `--mail-type` words and slurmrestd's `mail_type` flags, which differ for a few. */
const MAIL_TYPES: Record<string, readonly string[]> = {
  BEGIN: ['BEGIN'],
  END: ['END'],
  FAIL: ['FAIL'],
  REQUEUE: ['REQUEUE'],
  STAGE_OUT: ['STAGE_OUT'],
  ARRAY_TASKS: ['ARRAY_TASKS'],
  INVALID_DEPEND: ['INVALID_DEPENDENCY'],
  TIME_LIMIT: ['TIME=100%'],
  TIME_LIMIT_90: ['TIME=90%'],
  TIME_LIMIT_80: ['TIME=80%'],
  TIME_LIMIT_50: ['TIME=50%'],
  // As parse_mail_type (src/common/proc_args.c) spells out ALL.
  ALL: ['INVALID_DEPENDENCY', 'BEGIN', 'END', 'FAIL', 'REQUEUE', 'STAGE_OUT'],
};

function mailTypes(value: string | undefined): Record<string, unknown> {
  const flags = new Set<string>();
  for (const word of (value ?? '').split(',')) {
    const name = word.trim().toUpperCase();
    // NONE ends the list and clears it, as in sbatch.
    if (name === 'NONE') return { mail_type: [] };
    const mapped = MAIL_TYPES[name];
    if (!mapped) {
      throw new OptionValueError(`"${word}" is not a mail type (${[...Object.keys(MAIL_TYPES), 'NONE'].join(', ')})`);
    }
    for (const flag of mapped) flags.add(flag);
  }
  return { mail_type: [...flags] };
}

/** `--exclusive[=user|mcs|topo]` and `--oversubscribe`: slurmrestd's `shared`. */
function shared(value: string | undefined): Record<string, unknown> {
  const mode = (value ?? 'exclusive').toLowerCase();
  const members: Record<string, string> = {
    exclusive: 'none',
    oversubscribe: 'oversubscribe',
    user: 'user',
    mcs: 'mcs',
    topo: 'topo',
  };
  const member = members[mode];
  if (!member) throw new OptionValueError(`"${value}" is not an --exclusive mode (user, mcs, topo)`);
  return { shared: [member] };
}

/**
 * `--gres=gpu:2,nic:1`: sbatch sends it as `tres_per_node`, each entry with the `gres/` type
 * before it (gres_prepend_tres_type); `none` asks for no GRES and sends nothing.
 */
function gres(value: string | undefined): Record<string, unknown> {
  const list = value ?? '';
  if (list.toLowerCase() === 'none') return {};
  const entries = list.split(',').map((entry) => entry.trim());
  if (entries.some((entry) => entry === '')) throw new OptionValueError(`"${list}" has an empty GRES entry`);
  return { tres_per_node: entries.map((entry) => (entry.startsWith('gres/') ? entry : `gres/${entry}`)).join(',') };
}

/**
 * `--export`: sbatch copies the caller's environment for ALL and a name without a value, which a
 * job spec cannot (the daemon has no caller's environment worth passing on): variables with values
 * become the spec's `environment`; ALL and NONE add nothing; a bare name is refused rather than
 * dropped, as sbatch would drop a name its caller has not set.
 */
function exportList(value: string | undefined): Record<string, unknown> {
  const environment: string[] = [];
  for (const entry of splitQuoted(value ?? '')) {
    if (/^(ALL|NONE|NIL)$/i.test(entry)) continue;
    const at = entry.indexOf('=');
    if (at <= 0) {
      throw new OptionValueError(
        `"${entry}" names a variable without a value: schedflow has no caller's environment to copy it from; write ${entry}=value`,
      );
    }
    const name = entry.slice(0, at);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new OptionValueError(`"${name}" is not a variable name`);
    environment.push(`${name}=${unquote(entry.slice(at + 1))}`);
  }
  return { environment };
}

/** Splits at commas outside quotes (sbatch's find_quote_token), so `A="x,y"` stays one entry. */
function splitQuoted(list: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quote: string | undefined;
  for (const char of list) {
    if (quote) {
      if (char === quote) quote = undefined;
      current += char;
    } else if (char === '"' || char === "'") {
      quote = char;
      current += char;
    } else if (char === ',') {
      parts.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  parts.push(current);
  return parts.map((part) => part.trim()).filter((part) => part !== '');
}

function unquote(value: string): string {
  const first = value[0];
  return (first === '"' || first === "'") && value.endsWith(first) && value.length >= 2 ? value.slice(1, -1) : value;
}

/** `-N 2`, `-N 1-4`, `-N 1,2,4`, `-N 2-8:2`: slurmrestd's `nodes` reads sbatch's syntax itself. */
function nodes(value: string | undefined): Record<string, unknown> {
  if (!value || !/^\d+(?:-\d+)?(?::\d+)?(?:,\d+)*$/.test(value)) {
    throw new OptionValueError(`"${value ?? ''}" is not a node count (N, MIN-MAX, MIN-MAX:STEP or a list N,M,…)`);
  }
  return { nodes: value };
}

/** NICE_OFFSET - 3 (slurm.h): the largest adjustment sbatch takes. */
const MAX_NICE = 0x7ffffffd;

function nice(value: string | undefined): Record<string, unknown> {
  if (value === undefined) return { nice: 100 };
  if (!/^[+-]?\d+$/.test(value)) throw new OptionValueError(`expects a whole number, got "${value}"`);
  const adjustment = Number(value);
  if (Math.abs(adjustment) > MAX_NICE) throw new OptionValueError(`"${value}" is out of range (±${MAX_NICE})`);
  return { nice: adjustment };
}

function begin(value: string | undefined, context: OptionContext): Record<string, unknown> {
  try {
    return { begin_time: noValOf(parseBeginTime(value ?? '', context.now)) };
  } catch (error) {
    if (error instanceof BeginTimeError) throw new OptionValueError(error.message);
    throw error;
  }
}

/** A pass-through member: slurmrestd's `{set, infinite, number}` form, in MB. */
function memoryPerCpu(value: string | undefined): Record<string, unknown> {
  try {
    return { memory_per_cpu: noValOf(parseMemoryMb(value ?? '')) };
  } catch (error) {
    throw new OptionValueError((error as Error).message);
  }
}

function openMode(value: string | undefined): Record<string, unknown> {
  const mode = (value ?? '').toLowerCase();
  if (mode !== 'append' && mode !== 'truncate') throw new OptionValueError(`"${value}" is not append or truncate`);
  return { open_mode: [mode.toUpperCase()] };
}

function requeue(value: string | undefined): Record<string, unknown> {
  // `--requeue=expedite` sets a job flag slurmrestd has no member for.
  if (value !== undefined) throw new OptionValueError(`"${value}": only a plain --requeue is taken`);
  return { requeue: true };
}

export const SBATCH_OPTIONS: readonly SbatchOption[] = [
  { long: 'job-name', short: 'J', arg: 'required', apply: text('name') },
  { long: 'partition', short: 'p', arg: 'required', apply: text('partition') },
  { long: 'account', short: 'A', arg: 'required', apply: text('account') },
  { long: 'qos', short: 'q', arg: 'required', apply: text('qos') },
  // Slurm's time notation, read by the spec's time_limit.
  { long: 'time', short: 't', arg: 'required', apply: text('time_limit') },
  { long: 'nodes', short: 'N', arg: 'required', apply: nodes },
  { long: 'ntasks', short: 'n', arg: 'required', apply: count('tasks', 'a number of tasks') },
  { long: 'ntasks-per-node', arg: 'required', apply: count('tasks_per_node', 'a number of tasks') },
  { long: 'cpus-per-task', short: 'c', arg: 'required', apply: count('cpus_per_task', 'a number of CPUs') },
  // K/M/G/T as sbatch takes them, read by the spec's memory_per_node.
  { long: 'mem', arg: 'required', apply: text('memory_per_node') },
  { long: 'mem-per-cpu', arg: 'required', apply: memoryPerCpu },
  { long: 'output', short: 'o', arg: 'required', apply: text('standard_output') },
  { long: 'error', short: 'e', arg: 'required', apply: text('standard_error') },
  { long: 'input', short: 'i', arg: 'required', apply: text('standard_input') },
  { long: 'chdir', short: 'D', arg: 'required', apply: text('current_working_directory') },
  { long: 'array', short: 'a', arg: 'required', apply: text('array') },
  { long: 'gres', arg: 'required', apply: gres },
  { long: 'constraint', short: 'C', arg: 'required', apply: text('constraints') },
  { long: 'exclusive', arg: 'optional', apply: shared },
  { long: 'oversubscribe', short: 's', arg: 'none', apply: () => shared('oversubscribe') },
  { long: 'export', arg: 'required', apply: exportList },
  { long: 'mail-type', arg: 'required', apply: mailTypes },
  { long: 'mail-user', arg: 'required', apply: text('mail_user') },
  { long: 'dependency', short: 'd', arg: 'required', apply: text('dependency') },
  { long: 'begin', short: 'b', arg: 'required', apply: begin },
  { long: 'nice', arg: 'optional', apply: nice },
  { long: 'requeue', arg: 'optional', apply: requeue },
  { long: 'no-requeue', arg: 'none', apply: () => ({ requeue: false }) },
  { long: 'hold', short: 'H', arg: 'none', apply: () => ({ hold: true }) },
  { long: 'comment', arg: 'required', apply: text('comment') },
  { long: 'reservation', arg: 'required', apply: text('reservation') },
  { long: 'licenses', short: 'L', arg: 'required', apply: text('licenses') },
  { long: 'open-mode', arg: 'required', apply: openMode },
];
