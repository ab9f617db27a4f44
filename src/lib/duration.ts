import { z } from 'zod';

/** `90` (seconds), `90s`, `30m`, `2h`, `1d`, `1h30m`: a duration in seconds. */
export function parseDuration(value: number | string): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value <= 0) throw new Error(`${value} is not a positive number of seconds`);
    return value;
  }
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const units: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };
  let total = 0;
  let rest = text;
  while (rest.length > 0) {
    const match = /^(\d+)\s*([smhdw])\s*/.exec(rest);
    if (!match) throw new Error(`"${value}" is not a duration (e.g. 90s, 30m, 2h, 1d, 1h30m)`);
    total += Number(match[1]) * (units[match[2] as string] ?? 0);
    rest = rest.slice(match[0].length);
  }
  if (total <= 0) throw new Error(`"${value}" is not a positive duration`);
  return total;
}

/** A duration where it enters (pipeline files, retry policies): seconds, or `90s`, `30m`, `2h`, `1d`, `1h30m`. */
export const durationSchema = z
  .union([z.number().positive(), z.string()])
  .transform((value, ctx) => {
    try {
      return parseDuration(value);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  })
  .meta({ description: 'seconds, or 90s, 30m, 2h, 1d, 1h30m' });

/** Seconds as a person writes a duration, the way parseDuration reads it: `30m`, `1h30m`, `5s`. */
export function formatDuration(totalSec: number): string {
  let rest = Math.max(0, Math.round(totalSec));
  if (rest === 0) return '0s';
  const parts: string[] = [];
  for (const [unit, sec] of [
    ['d', 86_400],
    ['h', 3600],
    ['m', 60],
    ['s', 1],
  ] as const) {
    if (rest >= sec) {
      parts.push(`${Math.floor(rest / sec)}${unit}`);
      rest %= sec;
    }
  }
  return parts.join('');
}
