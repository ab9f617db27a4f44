import { type Html, html } from './html.js';

export interface DagNode {
  name: string;
  needs: { step: string; type: string }[];
  state: string;
  /** Where the node links to (the step's job page), if it ran. */
  href: string | null;
  /** The request id, for live updates. */
  liveId: string | null;
}

const NODE_W = 150;
const NODE_H = 44;
const GAP_X = 60;
const GAP_Y = 18;

const FILL: Record<string, string> = {
  completed: '#1e7d32',
  succeeded: '#1e7d32',
  running: '#1f5fbf',
  submitted: '#1f5fbf',
  submitting: '#1f5fbf',
  pending: '#6b4fa8',
  queued: '#6b4fa8',
  accepted: '#6b4fa8',
  cancelled: '#9a6700',
  skipped: '#9a6700',
  preempted: '#9a6700',
  'not started': '#8a949e',
};
const fillOf = (state: string): string => FILL[state] ?? '#b3261e';

/**
 * The steps of a run as a left-to-right graph in inline SVG: a step's column
 * is the length of the longest chain of steps it needs, edges go from a need
 * to the step that needs it (dashed unless `afterok`), nodes are coloured by
 * state and link to the step's job.
 */
export function dagSvg(nodes: DagNode[], label = 'steps of the run and their dependencies'): Html {
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const depth = new Map<string, number>();
  const depthOf = (name: string, seen: Set<string>): number => {
    const known = depth.get(name);
    if (known !== undefined) return known;
    if (seen.has(name)) return 0; // a cycle cannot load, but never loop here
    seen.add(name);
    const node = byName.get(name);
    const d = node?.needs.length
      ? 1 + Math.max(...node.needs.map((n) => (byName.has(n.step) ? depthOf(n.step, seen) : -1)))
      : 0;
    depth.set(name, d);
    return d;
  };
  const columns: DagNode[][] = [];
  for (const node of nodes) {
    const d = depthOf(node.name, new Set());
    const column = columns[d] ?? [];
    column.push(node);
    columns[d] = column;
  }
  const pos = new Map<string, { x: number; y: number }>();
  for (const [c, column] of columns.entries()) {
    for (const [r, node] of (column ?? []).entries()) {
      pos.set(node.name, { x: 10 + c * (NODE_W + GAP_X), y: 10 + r * (NODE_H + GAP_Y) });
    }
  }
  const width = 20 + columns.length * (NODE_W + GAP_X) - GAP_X;
  const height = 20 + Math.max(1, ...columns.map((c) => c.length)) * (NODE_H + GAP_Y) - GAP_Y;
  const edges = nodes.flatMap((node) =>
    node.needs.flatMap((need) => {
      const from = pos.get(need.step);
      const to = pos.get(node.name);
      if (!from || !to) return [];
      const x1 = from.x + NODE_W;
      const y1 = from.y + NODE_H / 2;
      const x2 = to.x - 6;
      const y2 = to.y + NODE_H / 2;
      const mid = (x1 + x2) / 2;
      return [
        html`<path class="edge" d="M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}" fill="none" stroke="#5d6873" stroke-width="1.5"${
          need.type === 'afterok' ? '' : html` stroke-dasharray="5 3"`
        } marker-end="url(#arrow)"><title>${node.name} needs ${need.step} (${need.type})</title></path>`,
      ];
    }),
  );
  const boxes = nodes.map((node) => {
    const p = pos.get(node.name) ?? { x: 0, y: 0 };
    const label = node.name.length > 20 ? `${node.name.slice(0, 19)}…` : node.name;
    const box = html`<g class="node" data-step="${node.name}" data-state="${node.state}"${
      node.liveId ? html` data-watch="${node.liveId}"` : ''
    }><rect x="${p.x}" y="${p.y}" width="${NODE_W}" height="${NODE_H}" rx="6" fill="${fillOf(node.state)}"/><text x="${
      p.x + 10
    }" y="${p.y + 18}" fill="#fff" font-weight="600">${label}</text><text x="${p.x + 10}" y="${
      p.y + 34
    }" fill="#fff">${node.state}</text><title>${node.name}: ${node.state}</title></g>`;
    return node.href ? html`<a href="${node.href}" aria-label="step ${node.name}: ${node.state}">${box}</a>` : box;
  });
  return html`<div class="table-wrap"><svg role="img" aria-label="${label}" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#5d6873"/></marker></defs>
${edges}${boxes}</svg></div>`;
}

export { fillOf as stateColour };
