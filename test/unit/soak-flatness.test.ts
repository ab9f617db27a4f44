import { describe, expect, it } from 'vitest';
import { judgeFlat, type Point, slope } from '../soak/flatness.js';

const MIN = 60_000;

/** One point a minute for `minutes`, valued by `f(minute)`. */
const series = (minutes: number, f: (m: number) => number): Point[] =>
  Array.from({ length: minutes }, (_, m) => ({ at: m * MIN, value: f(m) }));

describe('the soak judges a figure flat after warm-up', () => {
  const rule = { relative: 0.1, absolute: 0 };

  it('a figure that grows in warm-up and then holds is flat', () => {
    const v = judgeFlat(
      series(60, (m) => Math.min(m, 15) * 10),
      rule,
    );
    expect(v.flat).toBe(true);
    expect(v.middleMax).toBe(150);
    expect(v.lastMax).toBe(150);
  });

  it('a sawtooth whose peaks stay put is flat', () => {
    expect(
      judgeFlat(
        series(60, (m) => 100 + (m % 7) * 10),
        rule,
      ).flat,
    ).toBe(true);
  });

  it('a steady leak is not flat, and its slope says how fast', () => {
    const v = judgeFlat(
      series(60, (m) => 1000 + m * 20),
      rule,
    );
    expect(v.flat).toBe(false);
    expect(v.lastMax).toBe(1000 + 59 * 20);
    expect(v.slopePerHour).toBeCloseTo(20 * 60, 5);
  });

  it('the absolute tolerance lets small figures move by a little', () => {
    const fds = series(60, (m) => (m < 40 ? 30 : 34));
    expect(judgeFlat(fds, { relative: 0, absolute: 2 }).flat).toBe(false);
    expect(judgeFlat(fds, { relative: 0, absolute: 4 }).flat).toBe(true);
  });

  it('too few samples in a third are not judged', () => {
    expect(
      judgeFlat(
        series(6, () => 1),
        rule,
      ).flat,
    ).toBeUndefined();
    expect(judgeFlat([], rule).flat).toBeUndefined();
  });

  it('the thirds come from the given span, not from where samples happen to be', () => {
    // Samples only in the first half of a 60-minute span: the last third has none.
    expect(
      judgeFlat(
        series(30, () => 1),
        rule,
        { start: 0, end: 60 * MIN },
      ).flat,
    ).toBeUndefined();
  });

  it('slope is the least-squares one', () => {
    expect(
      slope([
        { at: 0, value: 1 },
        { at: 2, value: 5 },
        { at: 4, value: 9 },
      ]),
    ).toBeCloseTo(2, 10);
    expect(slope([{ at: 0, value: 3 }])).toBe(0);
  });
});
