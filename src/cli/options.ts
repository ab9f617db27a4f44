import { InvalidArgumentError } from 'commander';

/** Commander parser for numeric flags: a clear message instead of NaN. */
export function parseNumber(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`"${value}" is not a number`);
  return n;
}

/** Commander parser for whole-number flags. */
export function parseInteger(value: string): number {
  const n = parseNumber(value);
  if (!Number.isInteger(n)) throw new InvalidArgumentError(`"${value}" is not a whole number`);
  return n;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
