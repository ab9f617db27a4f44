import { InvalidArgumentError } from 'commander';
import { parseDuration } from '../lib/duration.js';

/** `--param name=value`, repeatable: the run parameters of `validate --render` and `runs trigger`. */
export function collectParam(value: string, previous: Record<string, string>): Record<string, string> {
  const at = value.indexOf('=');
  if (at <= 0) throw new InvalidArgumentError(`"${value}": expected name=value`);
  return { ...previous, [value.slice(0, at)]: value.slice(at + 1) };
}

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

/** `--since 2h`, `--since 1h30m`, `--since 2026-11-01`, `--since 1795300000`: Unix seconds. */
export function parseSince(value: string, nowMs = Date.now()): number {
  const text = value.trim();
  if (/^\d{9,}$/.test(text)) return Number(text);
  // A duration back from now, in the units every duration of schedflow takes (src/lib/duration.ts).
  if (/^(\d+\s*[smhdw]\s*)+$/.test(text)) {
    try {
      return Math.floor(nowMs / 1000) - parseDuration(text);
    } catch (error) {
      throw new InvalidArgumentError((error as Error).message);
    }
  }
  const at = Date.parse(value);
  if (Number.isNaN(at)) {
    throw new InvalidArgumentError(
      `"${value}" is not a time (use 2h, 3d, 2026-11-01, 2026-11-01T08:00 or Unix seconds)`,
    );
  }
  return Math.floor(at / 1000);
}
