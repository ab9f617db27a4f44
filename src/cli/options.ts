import { InvalidArgumentError } from 'commander';

/** Commander parser for numeric flags: a clear message instead of NaN. */
export function parseNumber(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`"${value}" is not a number`);
  return n;
}
