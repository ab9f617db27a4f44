import type { AccountingJobRow } from '../../db/schema.js';
import { jobsPerDayChart, runTimeChart } from './charts.js';
import { type Html, html } from './html.js';

/** The history's two charts over the records the filters select (days in UTC). */
export function charts(rows: AccountingJobRow[]): Html {
  const perDay = rows
    .filter((r) => r.submitTime !== null)
    .map((r) => ({ day: new Date((r.submitTime ?? 0) * 1000).toISOString().slice(0, 10), state: r.state }));
  const elapsed = rows.filter((r) => r.elapsedSec !== null && r.endTime !== null).map((r) => r.elapsedSec ?? 0);
  return html`<div class="charts"><section class="panel" aria-labelledby="per-day"><h2 id="per-day">Jobs per day (UTC), by state</h2>${jobsPerDayChart(
    perDay,
  )}</section><section class="panel" aria-labelledby="run-time"><h2 id="run-time">Run time</h2>${runTimeChart(elapsed)}</section></div>`;
}
