/**
 * Slurm's job array expression (`sbatch --array`, `job_desc_msg.array`): indexes as single
 * numbers, ranges and stepped ranges separated by commas, and an optional `%N` throttle (at
 * most N tasks running at once): `0-99%10`, `1,3,5-9`, `0-15:4`.
 */

/**
 * The largest `MaxArraySize` slurm.conf accepts (slurm.conf(5): at most 4000001); a cluster's
 * own limit (1001 by default) is enforced by its slurmctld, which alone knows it.
 */
export const MAX_ARRAY_SIZE_LIMIT = 4_000_001;

/** slurm.conf's default `MaxArraySize`: indexes 0 to 1000. */
export const DEFAULT_MAX_ARRAY_SIZE = 1001;

export interface JobArray {
  /** The task indexes, ascending, each once. */
  indexes: number[];
  /** At most this many tasks run at once (`%N`); null without a throttle. */
  throttle: number | null;
}

/** An expression Slurm would refuse; the message says what to write instead. */
export class ArraySyntaxError extends Error {
  override name = 'ArraySyntaxError';
}

/**
 * Parses an array expression as slurmctld does (`_parse_array_tok` and its bitmap): indexes
 * must be below `maxArraySize`, a range's end not below its start, a step at least 1.
 */
export function parseJobArray(expression: string, maxArraySize = MAX_ARRAY_SIZE_LIMIT): JobArray {
  const text = expression.trim();
  if (text === '') throw new ArraySyntaxError('the array expression is empty: write indexes such as "0-99%10"');
  const [list = '', throttleText, ...extra] = text.split('%');
  if (extra.length > 0) throw new ArraySyntaxError(`"${expression}" has more than one "%" throttle`);
  let throttle: number | null = null;
  if (throttleText !== undefined) {
    if (!/^\d+$/.test(throttleText)) {
      throw new ArraySyntaxError(`"%${throttleText}" is not a throttle: write % and a number of tasks, e.g. "0-99%10"`);
    }
    throttle = Number(throttleText);
    if (throttle < 1) throw new ArraySyntaxError('a throttle of %0 would run no task: write %1 or more');
  }
  const indexes = new Set<number>();
  for (const token of list.split(',')) {
    const match = /^(\d+)(?:-(\d+)(?::(\d+))?)?$/.exec(token.trim());
    if (!match) {
      throw new ArraySyntaxError(
        `"${token}" in "${expression}" is not an index or range: write N, N-M or N-M:step, separated by commas`,
      );
    }
    const start = Number(match[1]);
    const end = match[2] === undefined ? start : Number(match[2]);
    const step = match[3] === undefined ? 1 : Number(match[3]);
    if (end < start) throw new ArraySyntaxError(`the range "${token}" ends before it starts`);
    if (step < 1) throw new ArraySyntaxError(`the step of "${token}" must be at least 1`);
    if (end >= maxArraySize) {
      throw new ArraySyntaxError(
        `index ${end} is over the cluster's limit: array indexes go from 0 to ${maxArraySize - 1} (MaxArraySize ${maxArraySize})`,
      );
    }
    for (let index = start; index <= end; index += step) indexes.add(index);
  }
  return { indexes: [...indexes].sort((a, b) => a - b), throttle };
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
