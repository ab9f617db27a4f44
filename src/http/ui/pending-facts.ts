import { type PartitionLoad, partitionLoadWords } from '../../views/partition-load.js';
import type { PendingView } from '../../views/pending-view.js';
import { type Html, html, time } from './html.js';

/**
 * Why a pending job waits, on the UI's job page: Slurm's reason in plain words, what the user can
 * do, the scheduler's expected start (src/views/pending-view.ts), and its partition's load as the
 * cluster view last read it (src/views/partition-load.ts; never read for this page). Nothing for a
 * request that is not pending.
 */
export function pendingFacts(
  pending: PendingView | null,
  load: PartitionLoad | null = null,
  /** The profile's Cluster page, whose viewing reads the view again. */
  clusterLink: string | null = null,
): Html {
  if (!pending) return html``;
  const why =
    pending.reason === null
      ? html`<span class="muted">the scheduler has given no reason yet</span>`
      : html`<code>${pending.reason}</code>: ${pending.meaning}`;
  return html`<dt>Waiting because</dt><dd data-testid="pending-reason">${why}${
    pending.action ? html`<br><span class="muted">What you can do: ${pending.action}</span>` : ''
  }</dd>
<dt>Expected start</dt><dd data-testid="pending-expected-start">${
    pending.expected_start === null
      ? html`<span class="muted">no forecast from the scheduler</span>`
      : html`${time(pending.expected_start)} <span class="muted">(the scheduler's forecast)</span>`
  }</dd>
<dt>Partition</dt><dd data-testid="pending-partition">${
    load === null
      ? html`<span class="muted">its load is not known: the cluster view has no recent answer${
          clusterLink ? html` (open the <a href="${clusterLink}">Cluster</a> page to read it)` : ''
        }</span>`
      : html`${partitionLoadWords(load)} <span class="muted">(as of ${time(load.as_of)})</span>`
  }</dd>`;
}

/** The Pending cell of the UI's job list: the reason and the expected start, `—` when not pending. */
export function pendingCell(pending: PendingView | null): Html {
  if (!pending) return html`<span class="muted">—</span>`;
  const reason =
    pending.reason === null
      ? html`<span class="muted">waiting</span>`
      : html`<span title="${pending.meaning ?? ''}">${pending.reason}</span>`;
  return pending.expected_start === null
    ? reason
    : html`${reason}<br><span class="muted">start ~${time(pending.expected_start)}</span>`;
}
