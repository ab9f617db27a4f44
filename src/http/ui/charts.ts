import { stateColour } from './dag.js';
import { type Html, html } from './html.js';

/** Jobs per day (UTC), stacked by state, as an inline SVG bar chart with a legend. */
export function jobsPerDayChart(rows: { day: string; state: string }[]): Html {
  if (rows.length === 0) return html`<p class="muted">No jobs in this range.</p>`;
  const days = [...new Set(rows.map((r) => r.day))].sort();
  const states = [...new Set(rows.map((r) => r.state))].sort();
  const counts = new Map<string, Map<string, number>>();
  for (const r of rows) {
    const day = counts.get(r.day) ?? new Map<string, number>();
    day.set(r.state, (day.get(r.state) ?? 0) + 1);
    counts.set(r.day, day);
  }
  const max = Math.max(...days.map((d) => [...(counts.get(d)?.values() ?? [])].reduce((a, b) => a + b, 0)));
  const W = 560;
  const H = 180;
  const barW = Math.max(4, Math.min(40, (W - 40) / days.length - 4));
  const bars = days.map((day, i) => {
    let y = H - 20;
    const x = 30 + i * (barW + 4);
    const stacks = states.map((state) => {
      const n = counts.get(day)?.get(state) ?? 0;
      if (n === 0) return html``;
      const h = (n / max) * (H - 40);
      y -= h;
      return html`<rect x="${x}" y="${y.toFixed(1)}" width="${barW}" height="${h.toFixed(1)}" fill="${stateColour(
        state.toLowerCase(),
      )}"><title>${day}: ${n} ${state}</title></rect>`;
    });
    return html`${stacks}${
      days.length <= 14 || i % Math.ceil(days.length / 7) === 0
        ? html`<text x="${x}" y="${H - 5}">${day.slice(5)}</text>`
        : ''
    }`;
  });
  return html`<svg role="img" aria-label="jobs per day by state" viewBox="0 0 ${W} ${H}" width="100%"><text x="0" y="12">${max}</text><line x1="28" y1="${
    H - 20
  }" x2="${W}" y2="${H - 20}" stroke="#d6dce1"/>${bars}</svg>
<p class="legend">${states.map((s) => html`<span><i style="background:${stateColour(s.toLowerCase())}"></i>${s}</span>`)}</p>`;
}

const BUCKETS: [number, string][] = [
  [60, '< 1 min'],
  [300, '1–5 min'],
  [900, '5–15 min'],
  [3600, '15–60 min'],
  [4 * 3600, '1–4 h'],
  [24 * 3600, '4–24 h'],
  [Number.POSITIVE_INFINITY, '> 24 h'],
];

/** How long jobs ran (elapsed seconds) in a few buckets: an inline SVG histogram. */
export function runTimeChart(elapsedSec: number[]): Html {
  if (elapsedSec.length === 0) return html`<p class="muted">No finished jobs with a run time.</p>`;
  const counts = BUCKETS.map(
    ([limit], i) => elapsedSec.filter((s) => s < limit && (i === 0 || s >= (BUCKETS[i - 1]?.[0] ?? 0))).length,
  );
  const max = Math.max(...counts);
  const W = 560;
  const H = 180;
  const barW = (W - 40) / BUCKETS.length - 8;
  return html`<svg role="img" aria-label="run time distribution" viewBox="0 0 ${W} ${H}" width="100%">${counts.map(
    (n, i) => {
      const h = max ? (n / max) * (H - 45) : 0;
      const x = 30 + i * (barW + 8);
      return html`<rect x="${x}" y="${(H - 25 - h).toFixed(1)}" width="${barW}" height="${h.toFixed(1)}" fill="#1f5fbf"><title>${
        BUCKETS[i]?.[1]
      }: ${n}</title></rect><text x="${x}" y="${(H - 29 - h).toFixed(1)}">${n}</text><text x="${x}" y="${H - 8}">${BUCKETS[i]?.[1]}</text>`;
    },
  )}</svg>`;
}
