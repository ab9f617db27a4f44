import { markdownTable } from '../chaos/table.js';
import type { FaultRecord } from './faults.js';
import { type FlatRule, type FlatVerdict, judgeFlat } from './flatness.js';
import { FIGURES, type Figure, type Sample } from './gauges.js';
import type { LedgerCounts } from './ledger.js';

/** One report row: an interval's figures (levels as last read, the event loop's worst block). */
export interface IntervalRow {
  label: string;
  samples: Sample[];
  ledger: LedgerCounts;
  faults: FaultRecord[];
  upstream429: number;
}

const MIB = 1024 * 1024;

/** How each figure is shown, and how much it may move after warm-up and still be flat (see flatness.ts). */
const FIGURE_INFO: Record<Figure, { label: string; show: (v: number) => string; rule: FlatRule }> = {
  rssBytes: { label: 'RSS MiB', show: (v) => (v / MIB).toFixed(0), rule: { relative: 0.1, absolute: 16 * MIB } },
  heapUsedBytes: { label: 'heap MiB', show: (v) => (v / MIB).toFixed(0), rule: { relative: 0.15, absolute: 8 * MIB } },
  fds: { label: 'fds', show: (v) => v.toFixed(0), rule: { relative: 0, absolute: 8 } },
  loopBlockMs: { label: 'loop max ms', show: (v) => v.toFixed(0), rule: { relative: 0.5, absolute: 50 } },
  redisKeys: { label: 'redis keys', show: (v) => v.toFixed(0), rule: { relative: 0.1, absolute: 100 } },
  redisUsedBytes: { label: 'redis MiB', show: (v) => (v / MIB).toFixed(1), rule: { relative: 0.1, absolute: 2 * MIB } },
  historyRows: { label: 'history rows', show: (v) => v.toFixed(0), rule: { relative: 0.1, absolute: 200 } },
  historyBytes: { label: 'history MiB', show: (v) => (v / MIB).toFixed(1), rule: { relative: 0.1, absolute: MIB } },
  walBytes: { label: 'WAL MiB', show: (v) => (v / MIB).toFixed(1), rule: { relative: 0.25, absolute: 4 * MIB } },
  pgConnections: { label: 'pg conns', show: (v) => v.toFixed(0), rule: { relative: 0, absolute: 2 } },
};

/** The event loop's figure is the worst block of the interval; the others, the last reading. */
function cell(samples: Sample[], figure: Figure): string {
  const values = samples.map((s) => s[figure]).filter((v): v is number => v !== undefined);
  if (values.length === 0) return '-';
  const value = figure === 'loopBlockMs' ? Math.max(...values) : (values.at(-1) as number);
  return FIGURE_INFO[figure].show(value);
}

export function renderIntervals(rows: IntervalRow[], figures: readonly Figure[]): string {
  const header = [
    'minute',
    'accepted',
    'ended',
    'open',
    ...figures.map((f) => FIGURE_INFO[f].label),
    'dup',
    'lost',
    'stuck',
    'faults',
  ];
  return markdownTable(
    header,
    rows.map((r) => [
      r.label,
      String(r.ledger.accepted),
      String(r.ledger.ended),
      String(r.ledger.open),
      ...figures.map((f) => cell(r.samples, f)),
      String(r.ledger.duplicates),
      String(r.ledger.lost),
      String(r.ledger.stuck),
      [...r.faults.map((f) => f.name + (f.error ? ' (went wrong)' : '')), r.upstream429 ? `${r.upstream429}×429` : '']
        .filter(Boolean)
        .join(', ') || '-',
    ]),
  );
}

export interface FigureVerdict {
  figure: Figure;
  verdict: FlatVerdict;
}

/** Every figure judged over the traffic's span (the drain after it is left out: it is quieter by design). */
export function judgeFigures(
  samples: Sample[],
  figures: readonly Figure[],
  span: { start: number; end: number },
): FigureVerdict[] {
  return figures.map((figure) => ({
    figure,
    verdict: judgeFlat(
      samples
        .filter((s) => s.at >= span.start && s.at <= span.end && s[figure] !== undefined)
        .map((s) => ({ at: s.at, value: s[figure] as number })),
      FIGURE_INFO[figure].rule,
      span,
    ),
  }));
}

export function renderVerdicts(verdicts: FigureVerdict[]): string {
  return markdownTable(
    ['figure', 'middle third max', 'last third max', 'flat up to', 'slope per hour', 'verdict'],
    verdicts.map(({ figure, verdict: v }) => {
      const info = FIGURE_INFO[figure];
      const show = (x: number | undefined) => (x === undefined ? '-' : info.show(x));
      return [
        info.label,
        show(v.middleMax),
        show(v.lastMax),
        show(v.limit),
        v.slopePerHour === undefined ? '-' : `${v.slopePerHour >= 0 ? '+' : '-'}${info.show(Math.abs(v.slopePerHour))}`,
        v.flat === undefined ? 'NOT JUDGED (too few samples)' : v.flat ? 'flat' : 'GROWS',
      ];
    }),
  );
}

export { FIGURES };
