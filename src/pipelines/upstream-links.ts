import { type LoadedPipeline, RUN_ENDS, type RunEnd } from './pipeline-file.js';

/**
 * The checks of `on:` that need the whole folder: the pipelines named upstream exist, may be
 * followed by this one's owner (their runs' outputs reach its steps), have the steps whose
 * outputs it uses, and no chain of `on:` comes back to where it started (a loop would start runs
 * for ever). Problems by the file they are reported in.
 */
export function upstreamProblems(pipelines: readonly LoadedPipeline[]): Map<string, string[]> {
  const byName = new Map(pipelines.map((p) => [p.name, p]));
  const problems = new Map<string, string[]>();
  const report = (p: LoadedPipeline, message: string) =>
    problems.set(p.file, [...(problems.get(p.file) ?? []), `${p.file}: ${message}`]);
  for (const p of pipelines) {
    for (const [end, upstream] of upstreamsOf(p)) {
      const source = byName.get(upstream);
      if (!source) {
        const known = [...byName.keys()].filter((n) => n !== p.name).join(', ') || 'none';
        report(p, `on.${end}: no pipeline "${upstream}" (loaded: ${known})`);
        continue;
      }
      const owner = p.def.owner;
      if (source.def.owner !== owner && !source.def.allow.includes(owner)) {
        report(
          p,
          `on.${end}: pipeline "${upstream}" is owner "${source.def.owner}"'s, and its file does not allow "${owner}" (allow:): a pipeline follows only runs its owner may read`,
        );
      }
      for (const ref of p.upstreamRefs) {
        if (!Object.hasOwn(source.def.steps, ref.step)) {
          report(
            p,
            `\${upstream.outputs.${ref.step}.${ref.name}}: upstream pipeline "${upstream}" (on.${end}) has no step "${ref.step}" (steps: ${source.order.join(', ')})`,
          );
        }
      }
    }
  }
  for (const loop of loops(pipelines, byName)) {
    const path = [...loop, loop[0]].join(' → ');
    for (const name of loop) {
      const p = byName.get(name);
      if (p) report(p, `on: runs would start each other for ever: ${path}`);
    }
  }
  return problems;
}

/** `[end, upstream pipeline]` for each name under the file's `on:`. */
export function upstreamsOf(p: LoadedPipeline): [end: RunEnd, upstream: string][] {
  const on = p.def.on;
  if (!on) return [];
  return RUN_ENDS.flatMap((end) => (on[end] ?? []).map((name): [RunEnd, string] => [end, name]));
}

/** Each cycle of the upstream → downstream graph, once, as the names along it. */
function loops(pipelines: readonly LoadedPipeline[], byName: ReadonlyMap<string, LoadedPipeline>): string[][] {
  const found: string[][] = [];
  const done = new Set<string>();
  const onPath = new Map<string, number>();
  const path: string[] = [];
  const visit = (name: string): void => {
    const at = onPath.get(name);
    if (at !== undefined) {
      found.push(path.slice(at));
      return;
    }
    if (done.has(name)) return;
    const p = byName.get(name);
    if (!p) return;
    onPath.set(name, path.length);
    path.push(name);
    // Edges go from a pipeline to those it follows: a cycle either way is the same loop.
    for (const upstream of new Set(upstreamsOf(p).map(([, u]) => u))) visit(upstream);
    path.pop();
    onPath.delete(name);
    done.add(name);
  };
  for (const p of pipelines) visit(p.name);
  return found;
}
