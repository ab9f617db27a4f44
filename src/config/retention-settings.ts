import { z } from 'zod';
import { parseDuration } from '../lib/duration.js';

/**
 * A retention as a user writes it: a duration (`90d`, `12h`, `10m`, `1w`, seconds alone), or
 * `0`/`off`/`forever` to keep the rows for ever. Read as milliseconds, 0 for ever. A number (a
 * setting given by code, as the setting's name says) is milliseconds already.
 */
export function parseRetention(value: string | number): number {
  if (typeof value === 'number') return Math.round(value);
  const text = value.trim().toLowerCase();
  if (text === '0' || text === 'off' || text === 'forever' || text === 'never') return 0;
  return parseDuration(text) * 1000;
}

/** The schema of one retention setting, `defaultText` as the table of settings shows it. */
export function retentionSchema(defaultText: string, description: string) {
  return z
    .union([z.string(), z.number().min(0)])
    .default(defaultText)
    .transform((value, ctx) => {
      try {
        return parseRetention(value);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: `${(error as Error).message}, or off to keep for ever` });
        return z.NEVER;
      }
    })
    .meta({ description, defaultText });
}
