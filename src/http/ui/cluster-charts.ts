import type { ClusterSampleRow } from '../../db/schema.js';
import type { CpuCounts, Node } from '../../sched/cluster-model.js';
import { type Html, html } from './html.js';

/**
 * The Cluster page's charts, inline SVG drawn on the server like the history's (charts.ts):
 * each partition's allocated CPUs over the last hours (from the sampled history), the nodes by
 * state, and a partition's CPUs now as one small bar.
 */

/** Partition colours, in the order partitions are listed; distinguishable and readable on white. */
const PALETTE = ['#1f5fbf', '#d9480f', '#2b8a3e', '#862e9c', '#c2255c', '#0b7285', '#5c940d', '#e67700'];

export const partitionColour = (i: number): string => PALETTE[i % PALETTE.length] ?? '#5d6873';

const CPU_COLOURS = { allocated: '#1f5fbf', idle: '#8fd19e', other: '#c92a2a' } as const;

/** A node's state as a person reads it: a drained node is DRAINED (or DRAINING while jobs end), whatever its base. */
export function nodeStateLabel(n: Pick<Node, 'state' | 'stateFlags' | 'allocatedCpus'>): string {
  if (n.stateFlags.includes('DRAIN')) return n.allocatedCpus > 0 ? 'DRAINING' : 'DRAINED';
  return n.state;
}

const NODE_STATE_COLOURS: Record<string, string> = {
  IDLE: '#2b8a3e',
  MIXED: '#4dabf7',
  ALLOCATED: '#1f5fbf',
  COMPLETING: '#74c0fc',
  DRAINING: '#e67700',
  DRAINED: '#f08c00',
  DOWN: '#c92a2a',
  ERROR: '#c92a2a',
  FAIL: '#c92a2a',
  FUTURE: '#adb5bd',
  UNKNOWN: '#868e96',
};

export const nodeStateColour = (state: string): string => NODE_STATE_COLOURS[state] ?? '#868e96';

const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);
const hhmmss = (ms: number) => new Date(ms).toISOString().slice(11, 19);

/** A step of the x axis that gives at most five labels over `spanMs` (they must fit a phone too). */
function tickStepMs(spanMs: number): number {
  const steps = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10_800, 14_400, 21_600].map((s) => s * 1000);
  return steps.find((s) => spanMs / s <= 5) ?? 43_200_000;
}

/** Line styles beside the colours: partitions that share nodes often have the same line. */
const DASHES = ['', '7 4', '2 3', '10 3 2 3'];

/**
 * Allocated CPUs of each partition from `fromMs` to `toMs` (UTC on the axis), one step line per
 * partition on the scale of the largest partition; a sample is a point, so one sample still shows.
 */
export function allocationChart(
  samples: readonly ClusterSampleRow[],
  partitions: readonly string[],
  fromMs: number,
  toMs: number,
): Html {
  if (samples.length === 0) {
    return html`<p class="muted">No samples in this range yet: the daemon records the partitions every few minutes (setting <code>clusterSampleEveryMs</code>).</p>`;
  }
  const W = 560;
  const H = 200;
  const left = 34;
  const right = 8;
  const top = 16;
  const bottom = 24;
  const plotW = W - left - right;
  const plotH = H - top - bottom;
  const max = Math.max(1, ...samples.map((s) => s.cpusTotal));
  // Sampling that began within the range (a new deployment, a longer range than kept) is drawn
  // over the time it covers, not squeezed against the right edge.
  const first = Math.min(...samples.map((s) => s.at));
  const start = first > fromMs ? Math.max(fromMs, first - Math.max(5000, (toMs - first) * 0.05)) : fromMs;
  const x = (ms: number) => left + ((ms - start) / Math.max(1, toMs - start)) * plotW;
  const y = (cpus: number) => top + plotH - (cpus / max) * plotH;
  const names = [...partitions, ...new Set(samples.map((s) => s.partition).filter((p) => !partitions.includes(p)))];
  const yTicks = [...new Set([0, Math.round(max / 2), max])];
  const step = tickStepMs(toMs - start);
  const label = step < 60_000 ? hhmmss : hhmm;
  const xTicks: number[] = [];
  for (let t = Math.ceil(start / step) * step; t <= toMs; t += step) xTicks.push(t);
  const series = names.map((name, i) => {
    const points = samples.filter((s) => s.partition === name);
    if (points.length === 0) return html``;
    const colour = partitionColour(i);
    // A step line: the allocation holds until the next sample says otherwise.
    let d = '';
    for (const [k, p] of points.entries()) {
      const px = x(p.at).toFixed(1);
      const py = y(p.cpusAllocated).toFixed(1);
      d += k === 0 ? `M${px},${py}` : `H${px}V${py}`;
    }
    const dash = DASHES[i % DASHES.length];
    return html`<path d="${d}" fill="none" stroke="${colour}" stroke-width="2"${dash ? html` stroke-dasharray="${dash}"` : ''}/>${points.map(
      (p) =>
        html`<circle cx="${x(p.at).toFixed(1)}" cy="${y(p.cpusAllocated).toFixed(1)}" r="2.5" fill="${colour}"><title>${name} at ${hhmm(
          p.at,
        )} UTC: ${p.cpusAllocated} of ${p.cpusTotal} CPUs allocated, ${p.jobsRunning} running, ${p.jobsPending} pending</title></circle>`,
    )}`;
  });
  const latest = new Map(samples.map((s) => [s.partition, s]));
  return html`<svg role="img" aria-label="allocated CPUs by partition over time" data-samples="${samples.length}" viewBox="0 0 ${W} ${H}" width="100%">${yTicks.map(
    (v) =>
      html`<line x1="${left}" y1="${y(v).toFixed(1)}" x2="${W - right}" y2="${y(v).toFixed(1)}" stroke="#d6dce1"${
        v === 0 ? '' : html` stroke-dasharray="3 3"`
      }/><text x="${left - 4}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${v}</text>`,
  )}${xTicks.map(
    (t) =>
      html`<line x1="${x(t).toFixed(1)}" y1="${top + plotH}" x2="${x(t).toFixed(1)}" y2="${top + plotH + 4}" stroke="#5d6873"/><text x="${x(
        t,
      ).toFixed(1)}" y="${H - 6}" text-anchor="${
        // A label at the right edge ends there rather than past it (phones draw the text large).
        x(t) > W - 60 ? 'end' : 'middle'
      }">${label(t)}</text>`,
  )}${series}</svg>
<p class="legend">${names.map((name, i) => {
    const last = latest.get(name);
    const dash = DASHES[i % DASHES.length];
    return html`<span><svg class="swatch" viewBox="0 0 22 8" width="22" height="8" aria-hidden="true"><line x1="0" y1="4" x2="22" y2="4" stroke="${partitionColour(
      i,
    )}" stroke-width="3"${dash ? html` stroke-dasharray="${dash}"` : ''}/></svg>${name}${
      last ? html` <span class="muted">${last.cpusAllocated}/${last.cpusTotal}</span>` : ''
    }</span>`;
  })}${start > fromMs ? html`<span class="muted">sampled since ${hhmm(first)} UTC</span>` : ''}</p>`;
}

/** The nodes by state: one bar split by state, each part labelled with its count, and a legend. */
export function nodeStatesChart(nodes: readonly Pick<Node, 'state' | 'stateFlags' | 'allocatedCpus'>[]): Html {
  if (nodes.length === 0) return html`<p class="muted">The scheduler lists no nodes.</p>`;
  const counts = new Map<string, number>();
  for (const n of nodes) counts.set(nodeStateLabel(n), (counts.get(nodeStateLabel(n)) ?? 0) + 1);
  const order = Object.keys(NODE_STATE_COLOURS);
  const states = [...counts.keys()].sort(
    (a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99) || a.localeCompare(b),
  );
  const W = 560;
  const H = 56;
  let x = 0;
  const parts = states.map((state) => {
    const n = counts.get(state) ?? 0;
    const w = (n / nodes.length) * W;
    const part = html`<rect x="${x.toFixed(1)}" y="0" width="${w.toFixed(1)}" height="36" fill="${nodeStateColour(
      state,
    )}" data-state="${state}" data-count="${n}"><title>${state}: ${n} of ${nodes.length} nodes</title></rect>${
      w >= 28
        ? html`<text x="${(x + w / 2).toFixed(1)}" y="23" text-anchor="middle" fill="#fff" font-weight="600">${n}</text>`
        : ''
    }`;
    x += w;
    return part;
  });
  return html`<svg role="img" aria-label="nodes by state" viewBox="0 0 ${W} ${H}" width="100%">${parts}<text x="0" y="52">${
    nodes.length
  } node${nodes.length === 1 ? '' : 's'}</text></svg>
<p class="legend">${states.map(
    (s) => html`<span><i style="background:${nodeStateColour(s)}"></i>${s} ${counts.get(s) ?? 0}</span>`,
  )}</p>`;
}

/** A partition's CPUs now (allocated, idle, other), as a small bar beside its figures. */
export function cpuBar(cpus: CpuCounts): Html {
  const W = 120;
  if (cpus.total <= 0) return html``;
  let x = 0;
  const parts = (['allocated', 'idle', 'other'] as const).map((kind) => {
    const w = (cpus[kind] / cpus.total) * W;
    const part = html`<rect x="${x.toFixed(1)}" y="0" width="${w.toFixed(1)}" height="10" fill="${CPU_COLOURS[kind]}"/>`;
    x += w;
    return part;
  });
  return html`<svg class="cpu-bar" role="img" aria-label="${cpus.allocated} allocated, ${cpus.idle} idle, ${cpus.other} other of ${cpus.total} CPUs" viewBox="0 0 ${W} 10" width="${W}" height="10">${parts}</svg>`;
}

/** The legend of cpuBar's colours. */
export function cpuLegend(): Html {
  return html`<p class="legend">${(['allocated', 'idle', 'other'] as const).map(
    (k) => html`<span><i style="background:${CPU_COLOURS[k]}"></i>${k}</span>`,
  )}</p>`;
}

/** The CPUs of every node (allocated, idle on nodes that take work, other), for under the node states. */
export function nodeCpuSummary(nodes: readonly Pick<Node, 'cpus' | 'allocatedCpus' | 'available'>[]): Html {
  const cpus: CpuCounts = { total: 0, allocated: 0, idle: 0, other: 0 };
  for (const n of nodes) {
    cpus.total += n.cpus;
    cpus.allocated += n.allocatedCpus;
    if (n.available) cpus.idle += n.cpus - n.allocatedCpus;
    else cpus.other += n.cpus - n.allocatedCpus;
  }
  return html`<h3>CPUs of all nodes</h3><p class="cpu-summary" data-node-cpus="${cpus.allocated}/${cpus.idle}/${cpus.other}/${cpus.total}"><strong>${cpus.allocated}</strong> allocated · <strong>${cpus.idle}</strong> idle · <strong>${cpus.other}</strong> other · of ${cpus.total}</p>${wideCpuBar(cpus)}${cpuLegend()}`;
}

function wideCpuBar(cpus: CpuCounts): Html {
  if (cpus.total <= 0) return html``;
  const W = 560;
  let x = 0;
  const parts = (['allocated', 'idle', 'other'] as const).map((kind) => {
    const w = (cpus[kind] / cpus.total) * W;
    const part = html`<rect x="${x.toFixed(1)}" y="0" width="${w.toFixed(1)}" height="18" fill="${CPU_COLOURS[kind]}"><title>${cpus[kind]} ${kind}</title></rect>`;
    x += w;
    return part;
  });
  return html`<svg role="img" aria-label="CPUs of all nodes: ${cpus.allocated} allocated, ${cpus.idle} idle, ${cpus.other} other" viewBox="0 0 ${W} 18" width="100%">${parts}</svg>`;
}
