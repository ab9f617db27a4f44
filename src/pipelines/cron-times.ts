import { CronExpressionParser } from 'cron-parser';

/** Fire times of a cron expression read in a time zone (cron-parser; the same reading BullMQ uses). */

export function nextFireTimes(cron: string, timezone: string, from: number, count: number): number[] {
  const expression = CronExpressionParser.parse(cron, { tz: timezone, currentDate: new Date(from) });
  return Array.from({ length: count }, () => expression.next().getTime());
}

export function nextFireAfter(cron: string, timezone: string, after: number): number {
  return nextFireTimes(cron, timezone, after, 1)[0] as number;
}

/** Fire times in (after, until], oldest first, at most the last `limit` of them; `total` counts them all. */
export function missedFireTimes(
  cron: string,
  timezone: string,
  after: number,
  until: number,
  limit: number,
): { times: number[]; total: number } {
  const expression = CronExpressionParser.parse(cron, {
    tz: timezone,
    currentDate: new Date(after),
    endDate: new Date(until + 1),
  });
  const times: number[] = [];
  let total = 0;
  while (expression.hasNext()) {
    const t = expression.next().getTime();
    if (t > until) break;
    total++;
    times.push(t);
    if (times.length > limit) times.shift();
  }
  return { times, total };
}
