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
  let date: { year: number; month: number; day: number } | undefined;
  let time: { hour: number; minute: number; second: number } | undefined;
  let yearGiven = true;
  let rest = input;
  while (rest.length > 0) {
    // Slurm skips blanks, '-' and 'T' between the parts.
    const skip = /^[\s\-T]+/.exec(rest);
    if (skip) {
      rest = rest.slice(skip[0].length);
      continue;
    }
    let match: RegExpExecArray | null;
    if ((match = /^now\s*(?:([+-])\s*(\d+)\s*([a-z]*))?/i.exec(rest))) {
      const [, sign, count, unit] = match;
      let delta = 0;
      if (sign) {
        // seconds by default; a unit in the singular or the plural
        const factor = unit ? UNIT_SECONDS[unit.toLowerCase().replace(/s$/, '')] : 1;
        if (factor === undefined) fail();
        delta = (sign === '-' ? -1 : 1) * Number(count) * (factor ?? 1);
      }
      const later = new Date(now.getTime() + delta * 1000);
      date = { year: later.getFullYear(), month: later.getMonth(), day: later.getDate() };
      time = { hour: later.getHours(), minute: later.getMinutes(), second: later.getSeconds() };
    } else if ((match = /^(today|tomorrow)/i.exec(rest))) {
      const day = new Date(now.getTime() + (match[1]?.toLowerCase() === 'tomorrow' ? 86_400_000 : 0));
      date = { year: day.getFullYear(), month: day.getMonth(), day: day.getDate() };
    } else if ((match = /^(midnight|noon|elevenses|fika|teatime)/i.exec(rest))) {
      time = { hour: NAMED_HOURS[match[1]?.toLowerCase() ?? ''] ?? 0, minute: 0, second: 0 };
    } else if ((match = /^(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s*([ap]m))?/i.exec(rest))) {
      let hour = Number(match[1]);
      const meridiem = match[4]?.toLowerCase();
      if (meridiem && (hour < 1 || hour > 12)) fail();
      if (meridiem === 'pm' && hour < 12) hour += 12;
      if (meridiem === 'am' && hour === 12) hour = 0;
      time = { hour, minute: Number(match[2]), second: Number(match[3] ?? 0) };
      if (hour > 23 || time.minute > 59 || time.second > 59) fail();
    } else if ((match = /^(\d{4})-(\d{2})-(\d{2})/.exec(rest))) {
      date = { year: Number(match[1]), month: Number(match[2]) - 1, day: Number(match[3]) };
    } else if ((match = /^(\d{2})[/.]?(\d{2})(?:[/.]?(\d{2}))?/.exec(rest))) {
      // MM/DD[/YY], MM.DD[.YY], MMDD[YY]: a two-digit year is 20YY.
      yearGiven = match[3] !== undefined;
      date = {
        year: yearGiven ? 2000 + Number(match[3]) : now.getFullYear(),
        month: Number(match[1]) - 1,
        day: Number(match[2]),
      };
    } else {
      fail();
    }
    rest = rest.slice(match?.[0].length ?? rest.length);
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
