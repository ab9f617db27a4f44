import { InvalidJobSpecError } from '../errors.js';
import { closestName } from '../lib/closest-name.js';
import { type JobSpec, jobSpecSchema } from './job-spec.js';
import { OptionValueError, SBATCH_OPTIONS, type SbatchOption } from './sbatch-options.js';

/**
 * A job script with `#SBATCH` lines, read as sbatch reads it (Slurm 25.11, src/sbatch/opt.c
 * `_opt_batch_script` and `get_argument`), into a job spec in slurmrestd's names: what a Slurm user
 * already has becomes a job file as it is. The spec is then checked as any spec is, and every
 * problem names the line and the sbatch option it came from.
 */

export interface SbatchProblem {
  /** 1-based line of the script; null for a problem of the spec's overrides. */
  line: number | null;
  /** The option as written (`--time`, `-t`), or the spec member of an override. */
  option: string | null;
  message: string;
}

/** A script whose `#SBATCH` lines (or the spec they make) are refused: every problem, each with its line. */
export class SbatchScriptError extends InvalidJobSpecError {
  constructor(readonly problems: readonly SbatchProblem[]) {
    super(problems.map((problem) => describeProblem(problem)).join('\n'));
  }
}

/** `line 3: --tme: unknown …`, or with a file name before it: `job.sh:3: --tme: unknown …`. */
export function describeProblem(problem: SbatchProblem, file?: string): string {
  const where =
    problem.line === null ? (file ? `${file}: ` : '') : file ? `${file}:${problem.line}: ` : `line ${problem.line}: `;
  return `${where}${problem.option ? `${problem.option}: ` : ''}${problem.message}`;
}

/** sbatch's magic words; `#SLURM` is the old one it still reads (with a warning). */
const MAGIC = /^#(?:SBATCH|SLURM)/;

/** A text to read as a job script rather than as YAML or JSON: it starts with `#!` or carries `#SBATCH` lines. */
export function looksLikeSbatchScript(text: string): boolean {
  return text.startsWith('#!') || /^#SBATCH/m.test(text);
}

interface Token {
  line: number;
  text: string;
}

/**
 * The words of the `#SBATCH` lines, in order. Like sbatch: a directive starts at the first column;
 * reading stops at the first line that is not blank and not a comment (the `#!` line is one); a word
 * may be quoted ('…' or "…") or escape a space with `\`; an unquoted `#` starts a comment.
 */
function directiveWords(script: string, problems: SbatchProblem[]): Token[] {
  const words: Token[] = [];
  const lines = script.split('\n');
  for (const [index, line] of lines.entries()) {
    const number = index + 1;
    const magic = MAGIC.exec(line);
    if (!magic) {
      if (/^\s*(#|$)/.test(line)) continue;
      break;
    }
    if (line.endsWith('\r')) {
      // sbatch refuses such a script outright ("Batch script contains DOS line breaks").
      problems.push({
        line: number,
        option: null,
        message: 'DOS line breaks (\\r\\n): convert the script with dos2unix',
      });
      continue;
    }
    const rest = line.slice(magic[0].length);
    if (/^\s*(hetjob|packjob)(\s|$)/i.test(rest)) {
      problems.push({
        line: number,
        option: rest.trim().split(/\s/)[0] ?? null,
        message: 'a heterogeneous job: submit each component as its own job (with a dependency between them)',
      });
      continue;
    }
    const split = lineWords(rest);
    if ('unmatched' in split) {
      problems.push({ line: number, option: null, message: `unmatched ${split.unmatched}` });
      continue;
    }
    for (const text of split.words) words.push({ line: number, text });
  }
  return words;
}

function lineWords(rest: string): { words: string[] } | { unmatched: string } {
  const words: string[] = [];
  let word: string | undefined;
  let quote: string | undefined;
  for (let i = 0; i < rest.length; i++) {
    const char = rest[i] as string;
    if (quote) {
      if (char === quote) quote = undefined;
      else word += char;
      continue;
    }
    if (/\s/.test(char)) {
      if (word !== undefined) words.push(word);
      word = undefined;
      continue;
    }
    if (char === '#') break;
    word ??= '';
    if (char === '\\' && i + 1 < rest.length) {
      word += rest[++i];
    } else if (char === '"' || char === "'") {
      quote = char;
    } else {
      word += char;
    }
  }
  if (quote) return { unmatched: quote === '"' ? 'double quote (")' : "single quote (')" };
  if (word !== undefined) words.push(word);
  return { words };
}

interface Given {
  line: number;
  /** As written: `--time`, `-t`. */
  written: string;
  option: SbatchOption;
  value: string | undefined;
}

const BY_LONG = new Map(SBATCH_OPTIONS.map((option) => [option.long, option]));
const BY_SHORT = new Map(SBATCH_OPTIONS.flatMap((option) => (option.short ? [[option.short, option]] : [])));

function unknownOption(written: string): string {
  const long = written.startsWith('--');
  const near = long ? closestName(written.slice(2), [...BY_LONG.keys()]) : undefined;
  return `not an sbatch option schedflow reads from a script${near ? `; did you mean --${near}?` : ''} (the options it reads: docs/profiles.md#sbatch-scripts)`;
}

/** The options, as getopt_long reads sbatch's argument vector (which all directives together make). */
function options(words: readonly Token[], problems: SbatchProblem[]): Given[] {
  const given: Given[] = [];
  for (let i = 0; i < words.length; i++) {
    const { line, text } = words[i] as Token;
    // A required value may be the next word (`-t 10`, `--time 10`), as getopt takes it.
    const nextWord = (): string | undefined => {
      const next = words[i + 1];
      if (next === undefined) return undefined;
      i++;
      return next.text;
    };
    if (text.startsWith('--') && text.length > 2) {
      const at = text.indexOf('=');
      const written = at < 0 ? text : text.slice(0, at);
      const inline = at < 0 ? undefined : text.slice(at + 1);
      const option = BY_LONG.get(written.slice(2));
      if (!option) {
        problems.push({ line, option: written, message: unknownOption(written) });
        continue;
      }
      if (option.arg === 'none' && inline !== undefined) {
        problems.push({ line, option: written, message: 'takes no value' });
        continue;
      }
      const value = option.arg === 'required' && inline === undefined ? nextWord() : inline;
      if (option.arg === 'required' && value === undefined) {
        problems.push({ line, option: written, message: 'needs a value' });
        continue;
      }
      given.push({ line, written, option, value });
    } else if (text.startsWith('-') && text.length > 1 && text !== '--') {
      // A cluster of short options: `-H`, `-t10`, `-Ht 10`.
      for (let j = 1; j < text.length; j++) {
        const letter = text[j] as string;
        const written = `-${letter}`;
        const option = BY_SHORT.get(letter);
        if (!option) {
          problems.push({ line, option: written, message: unknownOption(written) });
          break;
        }
        if (option.arg === 'none') {
          given.push({ line, written, option, value: undefined });
          continue;
        }
        const value = j + 1 < text.length ? text.slice(j + 1) : nextWord();
        if (value === undefined) problems.push({ line, option: written, message: 'needs a value' });
        else given.push({ line, written, option, value });
        break;
      }
    } else {
      problems.push({ line, option: null, message: `"${text}" is not an option (sbatch: "Invalid directive")` });
    }
  }
  return given;
}

export interface SbatchSpecOptions {
  /** The job's name when no `--job-name` is given: sbatch names it after the script's file ("sbatch" when read from stdin). */
  defaultName: string;
  /** Spec members that take precedence over the script's (the API's `spec` beside `sbatch`). */
  overrides?: Record<string, unknown>;
  /** For `--begin` times relative to now. */
  now?: Date;
}

/** The spec members the script's directives set (before the spec's checks), with where each came from. */
export function sbatchMembers(
  script: string,
  options_: SbatchSpecOptions,
): {
  members: Record<string, unknown>;
  origin: Map<string, { line: number; option: string }>;
  problems: SbatchProblem[];
} {
  const problems: SbatchProblem[] = [];
  const members: Record<string, unknown> = { name: options_.defaultName, script };
  const origin = new Map<string, { line: number; option: string }>();
  const now = options_.now ?? new Date();
  for (const { line, written, option, value } of options(directiveWords(script, problems), problems)) {
    try {
      for (const [member, set] of Object.entries(option.apply(value, { now }))) {
        members[member] = set;
        origin.set(member, { line, option: written });
      }
    } catch (error) {
      if (!(error instanceof OptionValueError)) throw error;
      problems.push({ line, option: written, message: error.message });
    }
  }
  return { members, origin, problems };
}

/**
 * The job spec a script makes, checked as any spec is, with `overrides` on top; every problem
 * found at once, each with its line and option, in a {@link SbatchScriptError}.
 */
export function sbatchSpec(script: string, options_: SbatchSpecOptions): JobSpec {
  const { members, origin, problems } = sbatchMembers(script, options_);
  const overrides = options_.overrides ?? {};
  const merged = { ...members, ...overrides };
  // sbatch also asks for -c as a TRES per task (`TresPerTask=cpu=N`); slurmrestd does not derive it.
  if (typeof merged.cpus_per_task === 'number' && !('tres_per_task' in overrides)) {
    merged.tres_per_task = `cpu=${merged.cpus_per_task}`;
    const from = origin.get('cpus_per_task');
    if (from) origin.set('tres_per_task', from);
  }
  const parsed = jobSpecSchema.safeParse(merged);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const member = String(issue.path[0] ?? '');
      const from = member in overrides ? undefined : origin.get(member);
      const path = issue.path.join('.');
      if (from) problems.push({ line: from.line, option: from.option, message: issue.message });
      else if (member === 'script') problems.push({ line: 1, option: null, message: issue.message });
      else problems.push({ line: null, option: path ? `spec.${path}` : 'spec', message: issue.message });
    }
  }
  if (problems.length > 0 || !parsed.success) {
    throw new SbatchScriptError(
      problems.sort((a, b) => (a.line ?? Number.MAX_SAFE_INTEGER) - (b.line ?? Number.MAX_SAFE_INTEGER)),
    );
  }
  return parsed.data;
}
