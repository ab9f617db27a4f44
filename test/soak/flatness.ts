/**
 * When a figure counts as flat after warm-up. The run's samples are cut in thirds by time:
 * the first is warm-up (caches fill, retention's first periods pass, nothing judged); the
 * figure is flat when the largest value of the last third is at most the largest of the middle
 * third plus a tolerance (`relative` of it and `absolute` on top). Maxima, not means: a leak
 * shows in the peaks that each fault, prune or checkpoint leaves behind, and a sawtooth
 * (garbage collection, WAL checkpoints) whose peaks stay put is flat. The least-squares slope
 * of the judged thirds is given beside it, per hour, to read how fast a figure grows.
 */
export interface FlatRule {
  relative: number;
  absolute: number;
}

export interface Point {
  at: number;
  value: number;
}

export interface FlatVerdict {
  /** Undefined when there were too few samples to judge. */
  flat: boolean | undefined;
  middleMax?: number;
  lastMax?: number;
  /** The largest `lastMax` that is still flat. */
  limit?: number;
  /** Least-squares slope of the middle and last thirds, per hour. */
  slopePerHour?: number;
}

/** At least this many samples in each judged third. */
const MIN_POINTS = 3;

export function judgeFlat(
  points: readonly Point[],
  rule: FlatRule,
  span?: { start: number; end: number },
): FlatVerdict {
  if (points.length === 0) return { flat: undefined };
  const start = span?.start ?? Math.min(...points.map((p) => p.at));
  const end = span?.end ?? Math.max(...points.map((p) => p.at));
  const third = (end - start) / 3;
  const middle = points.filter((p) => p.at >= start + third && p.at < start + 2 * third);
  const last = points.filter((p) => p.at >= start + 2 * third && p.at <= end);
  if (middle.length < MIN_POINTS || last.length < MIN_POINTS) return { flat: undefined };
  const middleMax = Math.max(...middle.map((p) => p.value));
  const lastMax = Math.max(...last.map((p) => p.value));
  const limit = middleMax * (1 + rule.relative) + rule.absolute;
  return { flat: lastMax <= limit, middleMax, lastMax, limit, slopePerHour: slope([...middle, ...last]) * 3_600_000 };
}

/** Least-squares slope of value over time (per ms). */
export function slope(points: readonly Point[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const meanT = points.reduce((s, p) => s + p.at, 0) / n;
  const meanV = points.reduce((s, p) => s + p.value, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.at - meanT) * (p.value - meanV);
    den += (p.at - meanT) ** 2;
  }
  return den === 0 ? 0 : num / den;
}
