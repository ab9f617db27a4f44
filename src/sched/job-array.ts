/**
 * Slurm's job array expression (`sbatch --array`, `job_desc_msg.array`): indexes as single
 * numbers, ranges and stepped ranges separated by commas, and an optional `%N` throttle (at
 * most N tasks running at once): `0-99%10`, `1,3,5-9`, `0-15:4`.
 *
 * The expression comes from users (the API, job files, pipeline steps, `retry-tasks`), so it is
 * read in two steps that each cost a bounded amount (issue 30): {@link parseArrayExpression}
 * reads the text once into ranges, never listing an index, in time linear in its length; the
 * indexes themselves are listed only once the largest is known to be within a limit, and
 * listing them costs at most the limit times a small factor, however the ranges overlap
 * ({@link indexesOf}). `0-4000000` repeated over a megabyte listed 4 million indexes per
 * repetition before.
 */

/**
 * The largest `MaxArraySize` slurm.conf accepts (slurm.conf(5): at most 4000001): no expression
 * is read past it. A cluster's own limit is the profile's `maxArraySize`.
 */
export const MAX_ARRAY_SIZE_LIMIT = 4_000_001;

/** slurm.conf's default `MaxArraySize`: indexes 0 to 1000. */
export const DEFAULT_MAX_ARRAY_SIZE = 1001;

/**
 * The longest expression read (characters). Listing every index of the largest array Slurm's
 * default allows one by one takes under 4,000 characters; one in the megabytes is not a job.
 */
export const MAX_ARRAY_EXPRESSION_CHARS = 65_536;

export interface JobArray {
  /** The task indexes, ascending, each once. */
  indexes: number[];
  /** At most this many tasks run at once (`%N`); null without a throttle. */
  throttle: number | null;
}

/** `start`, `start + step`, … up to `last` (`last` is reached: the range's end rounded down to a step). */
export interface IndexRange {
  start: number;
  last: number;
  step: number;
}

/** An expression read, its indexes not listed. */
export interface ArrayExpression {
  ranges: readonly IndexRange[];
  /** At most this many tasks run at once (`%N`); null without a throttle. */
  throttle: number | null;
  /** The largest index it names: what Slurm's MaxArraySize bounds. */
  maxIndex: number;
}

/** An expression Slurm would refuse; the message says what to write instead. */
export class ArraySyntaxError extends Error {
  override name = 'ArraySyntaxError';
}

/** A user's text in a message, cut short: an error must not echo a megabyte back. */
function quoted(text: string): string {
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

/** A number as written, cut short: `1e+25` says less than its first digits. */
function digits(text: string): string {
  return text.length > 20 ? `${text.slice(0, 20)}…` : text;
}

const TOKEN = /^(\d+)(?:-(\d+)(?::(\d+))?)?$/;

/**
 * Reads an array expression as slurmctld does (`_parse_array_tok`): indexes must be below
 * `maxArraySize`, a range's end not below its start, a step at least 1. Lists no index: its
 * cost is linear in the text (each token is matched by an anchored pattern without nested
 * repetition), whatever the ranges name.
 */
export function parseArrayExpression(expression: string, maxArraySize = MAX_ARRAY_SIZE_LIMIT): ArrayExpression {
  if (expression.length > MAX_ARRAY_EXPRESSION_CHARS) {
    throw new ArraySyntaxError(
      `the array expression is ${expression.length} characters long, over ${MAX_ARRAY_EXPRESSION_CHARS}: write ranges such as "0-999" rather than every index`,
    );
  }
  const text = expression.trim();
  if (text === '') throw new ArraySyntaxError('the array expression is empty: write indexes such as "0-99%10"');
  const [list = '', throttleText, ...extra] = text.split('%');
  if (extra.length > 0) throw new ArraySyntaxError(`${quoted(expression)} has more than one "%" throttle`);
  let throttle: number | null = null;
  if (throttleText !== undefined) {
    if (!/^\d+$/.test(throttleText)) {
      throw new ArraySyntaxError(
        `"%${throttleText.slice(0, 20)}" is not a throttle: write % and a number of tasks, e.g. "0-99%10"`,
      );
    }
    throttle = Number(throttleText);
    if (throttle < 1) throw new ArraySyntaxError('a throttle of %0 would run no task: write %1 or more');
  }
  const ranges: IndexRange[] = [];
  let maxIndex = 0;
  for (const token of list.split(',')) {
    const match = TOKEN.exec(token.trim());
    if (!match) {
      throw new ArraySyntaxError(
        `${quoted(token)} in ${quoted(expression)} is not an index or range: write N, N-M or N-M:step, separated by commas`,
      );
    }
    const start = Number(match[1]);
    const end = match[2] === undefined ? start : Number(match[2]);
    const step = match[3] === undefined ? 1 : Number(match[3]);
    if (end < start) throw new ArraySyntaxError(`the range ${quoted(token)} ends before it starts`);
    if (step < 1) throw new ArraySyntaxError(`the step of ${quoted(token)} must be at least 1`);
    if (end >= maxArraySize) {
      throw new ArraySyntaxError(
        `index ${digits(match[2] ?? match[1] ?? '')} is over the cluster's limit: array indexes go from 0 to ${maxArraySize - 1} (MaxArraySize ${maxArraySize})`,
      );
    }
    const last = start + Math.floor((end - start) / step) * step;
    ranges.push({ start, last, step });
    maxIndex = Math.max(maxIndex, last);
  }
  return { ranges, throttle, maxIndex };
}

/**
 * Which indexes the ranges name, as a bitmap over 0..maxIndex. Ranges of one step are laid on
 * the bitmap one by one while that costs less than a sweep of it, and otherwise as a difference
 * array swept once along that step: the work is at most the bitmap's size per step in use
 * (a step s names at most maxIndex/s indexes, so m distinct steps cost maxIndex·ln m), never
 * the sum of overlapping ranges' lengths.
 */
function bitmapOf(expression: ArrayExpression): Uint8Array {
  const size = expression.maxIndex + 1;
  const marks = new Uint8Array(size);
  const byStep = new Map<number, IndexRange[]>();
  for (const range of expression.ranges) {
    const same = byStep.get(range.step);
    if (same) same.push(range);
    else byStep.set(range.step, [range]);
  }
  let counts: Int32Array | undefined;
  for (const [step, ranges] of byStep) {
    let naive = 0;
    for (const range of ranges) naive += (range.last - range.start) / step + 1;
    if (naive <= size) {
      for (const range of ranges) for (let i = range.start; i <= range.last; i += step) marks[i] = 1;
      continue;
    }
    counts ??= new Int32Array(size + 1);
    counts.fill(0);
    for (const range of ranges) {
      (counts[range.start] as number)++;
      const after = range.last + step;
      if (after <= size) (counts[after] as number)--;
    }
    for (let i = 0; i < size; i++) {
      if (i >= step) (counts[i] as number) += counts[i - step] as number;
      if ((counts[i] as number) > 0) marks[i] = 1;
    }
  }
  return marks;
}

/** The indexes an expression names, ascending, each once: at most `maxIndex + 1` of them. */
export function indexesOf(expression: ArrayExpression): number[] {
  const marks = bitmapOf(expression);
  const indexes: number[] = [];
  for (let i = 0; i < marks.length; i++) if (marks[i] === 1) indexes.push(i);
  return indexes;
}

/** Whether an expression names `index`, without listing its indexes. */
export function namesIndex(expression: ArrayExpression, index: number): boolean {
  return expression.ranges.some(
    (range) => index >= range.start && index <= range.last && (index - range.start) % range.step === 0,
  );
}

/** How many tasks an expression makes, without listing them. */
export function taskCountOf(expression: ArrayExpression): number {
  let count = 0;
  for (const mark of bitmapOf(expression)) count += mark;
  return count;
}

/**
 * Parses an array expression and lists its indexes: `maxArraySize` bounds them (and so what
 * listing them costs) before any is listed.
 */
export function parseJobArray(expression: string, maxArraySize = MAX_ARRAY_SIZE_LIMIT): JobArray {
  const parsed = parseArrayExpression(expression, maxArraySize);
  return { indexes: indexesOf(parsed), throttle: parsed.throttle };
}

/** Indexes written compactly, as Slurm's `array_task_string` does: `0-3,7,9-11`. */
export function formatIndexes(indexes: Iterable<number>): string {
  const sorted = [...new Set(indexes)].sort((a, b) => a - b);
  const parts: string[] = [];
  let i = 0;
  while (i < sorted.length) {
    const start = sorted[i] as number;
    let end = start;
    while (sorted[i + 1] === end + 1) {
      end++;
      i++;
    }
    parts.push(end === start ? String(start) : `${start}-${end}`);
    i++;
  }
  return parts.join(',');
}

/** The expression for a set of indexes and a throttle: `3,7%2`. */
export function formatJobArray(array: JobArray): string {
  return `${formatIndexes(array.indexes)}${array.throttle === null ? '' : `%${array.throttle}`}`;
}
