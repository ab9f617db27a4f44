/**
 * Slurm's time strings for `--begin` (its `parse_time`, src/common/parse_time.c), turned into a
 * Unix time here because slurmrestd's `begin_time` takes a number. Read in the local time zone of
 * the process that reads them, as sbatch reads them in its caller's.
 *
 * Forms: `now[+|-count[seconds|minutes|hours|days|weeks]]` (seconds by default), `today`,
 * `tomorrow`, `midnight`, `noon`, `elevenses`, `fika`, `teatime`, `HH:MM[:SS]`,
 * `YYYY-MM-DD[THH:MM[:SS]]`, `MM/DD[/YY][-HH:MM[:SS]]`, `uts<seconds>`, and combinations of a day
 * and a time of day (`tomorrow noon`, `2030-01-01T08:00`).
 */

export class BeginTimeError extends Error {}

const UNIT_SECONDS: Record<string, number> = { second: 1, minute: 60, hour: 3600, day: 86_400, week: 604_800 };

const NAMED_HOURS: Record<string, number> = { midnight: 0, noon: 12, elevenses: 11, fika: 15, teatime: 16 };

const FORMS =
  'now[+count[seconds|minutes|hours|days|weeks]], today, tomorrow, midnight, noon, HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]] or MM/DD[/YY]';

interface Day {
  year: number;
  month: number;
  day: number;
}
interface Clock {
  hour: number;
  minute: number;
  second: number;
}
/** What one part of the string says; null when it is not a time after all. */
type Part = { date?: Day; time?: Clock; yearGiven?: boolean } | null;

const dayOf = (d: Date): Day => ({ year: d.getFullYear(), month: d.getMonth(), day: d.getDate() });

/** The parts a time string is made of, each with how to read it. */
const PARTS: readonly [RegExp, (match: RegExpExecArray, now: Date) => Part][] = [
  [
    /^now\s*(?:([+-])\s*(\d+)\s*([a-z]*))?/i,
    ([, sign, count, unit], now) => {
      // seconds by default; a unit in the singular or the plural
      const factor = unit ? UNIT_SECONDS[unit.toLowerCase().replace(/s$/, '')] : 1;
      if (factor === undefined) return null;
      const later = new Date(now.getTime() + (sign === '-' ? -1 : 1) * Number(count ?? 0) * factor * 1000);
      return {
        date: dayOf(later),
        time: { hour: later.getHours(), minute: later.getMinutes(), second: later.getSeconds() },
      };
    },
  ],
  [
    /^(today|tomorrow)/i,
    ([, word], now) => ({
      date: dayOf(new Date(now.getTime() + (word?.toLowerCase() === 'tomorrow' ? 86_400_000 : 0))),
    }),
  ],
  [
    /^(midnight|noon|elevenses|fika|teatime)/i,
    ([, word]) => ({ time: { hour: NAMED_HOURS[word?.toLowerCase() ?? ''] ?? 0, minute: 0, second: 0 } }),
  ],
  [
    /^(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s*([ap]m))?/i,
    ([, h, m, sec, ampm]) => {
      let hour = Number(h);
      const meridiem = ampm?.toLowerCase();
      if (meridiem && (hour < 1 || hour > 12)) return null;
      if (meridiem === 'pm' && hour < 12) hour += 12;
      if (meridiem === 'am' && hour === 12) hour = 0;
      const time = { hour, minute: Number(m), second: Number(sec ?? 0) };
      return hour > 23 || time.minute > 59 || time.second > 59 ? null : { time };
    },
  ],
  [/^(\d{4})-(\d{2})-(\d{2})/, ([, y, m, d]) => ({ date: { year: Number(y), month: Number(m) - 1, day: Number(d) } })],
  [
    // MM/DD[/YY], MM.DD[.YY], MMDD[YY]: a two-digit year is 20YY.
    /^(\d{2})[/.]?(\d{2})(?:[/.]?(\d{2}))?/,
    ([, m, d, y], now) => ({
      date: { year: y === undefined ? now.getFullYear() : 2000 + Number(y), month: Number(m) - 1, day: Number(d) },
      yearGiven: y !== undefined,
    }),
  ],
];

/** The Unix time (seconds) `text` names, seen from `now`. */
export function parseBeginTime(text: string, now: Date = new Date()): number {
  const input = text.trim();
  const fail = (): never => {
    throw new BeginTimeError(`"${text}" is not a Slurm time (${FORMS})`);
  };
  const uts = /^uts(\d+)$/i.exec(input);
  if (uts) {
    const seconds = Number(uts[1]);
    if (seconds < 1_000_000) fail();
    return seconds;
  }
  let date: Day | undefined;
  let time: Clock | undefined;
  let yearGiven = true;
  let rest = input;
  while (rest.length > 0) {
    // Slurm skips blanks, '-' and 'T' between the parts.
    const skip = /^[\s\-T]+/.exec(rest);
    if (skip) {
      rest = rest.slice(skip[0].length);
      continue;
    }
    const part = PARTS.find(([pattern]) => pattern.test(rest));
    const match = part?.[0].exec(rest);
    if (!part || !match) return fail();
    const read = part[1](match, now);
    if (read === null) fail();
    if (read?.date) date = read.date;
    if (read?.time) time = read.time;
    if (read?.yearGiven === false) yearGiven = false;
    rest = rest.slice(match[0].length);
  }
  if (!date && !time) fail();
  if (date && (date.month < 0 || date.month > 11 || date.day < 1 || date.day > 31)) fail();
  const at = (d: NonNullable<typeof date>, t: { hour: number; minute: number; second: number }) =>
    new Date(d.year, d.month, d.day, t.hour, t.minute, t.second);
  let result: Date;
  if (!date) {
    // A time of day alone is its next occurrence: today, or tomorrow once it has passed.
    const clock = time ?? { hour: 0, minute: 0, second: 0 };
    result = at({ year: now.getFullYear(), month: now.getMonth(), day: now.getDate() }, clock);
    if (result.getTime() <= now.getTime()) result = new Date(result.getTime() + 86_400_000);
    result = at({ year: result.getFullYear(), month: result.getMonth(), day: result.getDate() }, clock);
  } else {
    result = at(date, time ?? { hour: 0, minute: 0, second: 0 });
    // A day without a year that has passed this year is next year's (as Slurm reads MM/DD).
    if (!yearGiven && result.getTime() < now.getTime() - 86_400_000) {
      result = at({ ...date, year: date.year + 1 }, time ?? { hour: 0, minute: 0, second: 0 });
    }
  }
  return Math.floor(result.getTime() / 1000);
}
