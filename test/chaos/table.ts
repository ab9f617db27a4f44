import type { UpstreamCounts } from './counting-proxy.js';
import type { TrialResult } from './scenarios.js';

/** One scenario's figures, summed over its trials. */
export interface ScenarioFigures {
  name: string;
  trials: TrialResult[];
  counts: UpstreamCounts;
  error?: string;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}`;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? 0;
}

export function sums(f: ScenarioFigures) {
  const v = f.trials.map((t) => t.verdict);
  const accepted = f.trials.reduce((n, t) => n + t.subs.filter((s) => s.requestId).length, 0);
  return {
    accepted,
    made: v.reduce((n, x) => n + x.jobs, 0),
    unanswered: f.trials.reduce((n, t) => n + t.subs.filter((s) => s.status === undefined).length, 0),
    refused: f.trials.reduce((n, t) => n + t.subs.filter((s) => s.status !== undefined && !s.requestId).length, 0),
    duplicates: v.reduce((n, x) => n + x.duplicates, 0),
    lost: v.reduce((n, x) => n + x.lost, 0),
    stuck: v.reduce((n, x) => n + x.stuck, 0),
    wronglyFailed: v.reduce((n, x) => n + x.wronglyFailed, 0),
  };
}

function recovery(f: ScenarioFigures): string {
  const times = f.trials.map((t) => t.verdict.recoverMs);
  const done = times.filter((t): t is number => t !== undefined);
  const never = times.length - done.length;
  if (done.length === 0) return never ? `never (${never})` : '-';
  const text = `${seconds(median(done))} / ${seconds(Math.max(...done))}`;
  return never ? `${text}, never (${never})` : text;
}

function notes(f: ScenarioFigures): string {
  const s = sums(f);
  const out: string[] = [];
  if (f.error) out.push(`ERROR: ${f.error}`);
  if (s.unanswered) out.push(`${s.unanswered} POSTs unanswered`);
  if (s.refused) out.push(`${s.refused} refused`);
  const shutdowns = f.trials.map((t) => t.shutdown).filter((x) => x !== undefined);
  if (shutdowns.length) {
    const times = shutdowns.map((x) => x.exitMs);
    const complete = shutdowns.filter((x) => x.stepsMissing.length === 0 && !x.deadlinePassed).length;
    const forced = shutdowns.filter((x) => x.forced).length;
    const missing = [...new Set(shutdowns.flatMap((x) => x.stepsMissing))];
    out.push(
      `shutdown ${seconds(Math.min(...times))}–${seconds(Math.max(...times))} s, every step run in ${complete} of ${shutdowns.length}` +
        (forced ? `, ${forced} killed after the wait` : '') +
        (missing.length ? ` (not run: ${missing.join(', ')})` : ''),
    );
  }
  const c = f.counts;
  if (c.byStatus['429']) {
    const parts = Object.entries(c.byEndpoint)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} ${n}`);
    out.push(`${c.byStatus['429']} answered 429; ${parts.join(', ')}`);
  }
  return out.join('; ');
}

export function renderTable(figures: ScenarioFigures[]): string {
  const header = [
    'scenario',
    'trials',
    'jobs',
    'duplicates',
    'lost',
    'stuck',
    'wrongly failed',
    'recover s (median / max)',
    'upstream req/submit',
    'notes',
  ];
  const rows = figures.map((f) => {
    const s = sums(f);
    return [
      f.name,
      String(f.trials.length),
      String(s.accepted),
      String(s.duplicates),
      String(s.lost),
      String(s.stuck),
      String(s.wronglyFailed),
      recovery(f),
      s.made ? (f.counts.total / s.made).toFixed(2) : '-',
      notes(f),
    ];
  });
  return markdownTable(header, rows);
}

/** A Markdown table, each column as wide as its widest cell (the soak's report uses it too). */
export function markdownTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  const rule = `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}
