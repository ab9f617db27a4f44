import { assertNever } from '../lib/assert-never.js';
import type { RenderedPlaceholder, RenderedStep, RunRender, StepSubmission } from '../pipelines/run-render.js';

/**
 * `schedflow validate --render --text`: a run's render (src/pipelines/run-render.ts) for a
 * person to read. The JSON stays the default: CI scripts parse it.
 */
export function runRenderText(render: RunRender): string {
  const params = Object.entries(render.params).map(([name, value]) => `${name}=${value}`);
  const head = [
    `pipeline ${render.pipeline}`,
    `profile ${render.profile ?? '(the daemon\u2019s first)'}`,
    `slurmrestd ${render.version}`,
    params.length ? `params ${params.join(' ')}` : 'no params',
  ].join(', ');
  const { schedule, on } = render.started;
  const started = [
    ...(schedule ? [`its schedule, ${schedule}`] : []),
    ...on.map((o) => `the end of a run of ${o.pipeline} (${o.end === 'finished' ? 'any end' : o.end})`),
  ];
  // A run triggered by hand has no upstream run to take upstream values from (refused).
  const byHand = render.steps.every((step) => step.placeholders.every((p) => p.resolves !== 'upstream-ended'));
  const startedLine = `started by: ${[...started, ...(byHand ? ['a trigger (API, CLI, web UI)'] : [])].join('; ')}`;
  return `${[`${head}\n${startedLine}`, ...render.steps.map((step) => stepText(step, render.version))].join('\n\n')}\n`;
}

function stepText(step: RenderedStep, version: string): string {
  const lines = [`step ${step.step}`, `  when: ${whenText(step.submitted)}`];
  if (step.arraySizedBy) {
    lines.push(
      `  array: sized when ${step.arraySizedBy.step} ends, by ${step.arraySizedBy.placeholder}: a count N is tasks 0 to N-1 (0 skips the step, and the steps behind it go on), or an index list`,
    );
  }
  lines.push(...resolvesText(step.placeholders));
  lines.push(
    step.standIn === null
      ? '  body:'
      : `  body (step outputs as written; checked against ${version} with ${step.standIn} for each):`,
  );
  lines.push(JSON.stringify(step.body, null, 2).replace(/^/gm, '    '));
  return lines.join('\n');
}

function whenText(s: StepSubmission): string {
  const dependency = s.dependency ? `Slurm dependency ${s.dependency}` : 'no Slurm dependency';
  switch (s.at) {
    case 'with-run':
      return `submitted with the run, ${dependency}`;
    case 'after-outputs': {
      const made = s.behind.length
        ? ` and ${listed(s.behind)} ${s.behind.length === 1 ? 'has' : 'have'} been made`
        : '';
      const outputs = s.waitsFor.map((name) => `\${${name}}`).join(', ');
      return `deferred: made once ${listed(s.after)} ${s.after.length === 1 ? 'has' : 'have'} ended${made} (it waits for ${outputs}), then submitted with ${dependency}`;
    }
    case 'behind-deferred':
      return `deferred behind ${listed(s.behind)}, ${s.behind.length === 1 ? 'a step that waits' : 'steps that wait'} for outputs: made once ${listed(s.behind)} ${s.behind.length === 1 ? 'has' : 'have'} been made, then submitted with ${dependency}`;
    default:
      return assertNever(s.at);
  }
}

/** The placeholders grouped by when they resolve: at trigger, when the run is made, when each step ends. */
function resolvesText(placeholders: readonly RenderedPlaceholder[]): string[] {
  if (placeholders.length === 0) return ['  resolves: nothing (no placeholders)'];
  const groups = new Map<string, string[]>();
  for (const p of placeholders) {
    const label = groupLabel(p);
    const value = p.value === null ? '' : ` = ${p.value}`;
    groups.set(label, [...(groups.get(label) ?? []), `${p.written}${value} (${p.in.join(', ')})`]);
  }
  // Trigger first, then the run, then the steps in the order first used: the order values come in.
  const order = (label: string) =>
    label === 'at trigger'
      ? 0
      : label.startsWith('when an upstream run ends')
        ? 1
        : label === 'when the run is made'
          ? 2
          : 3;
  return [...groups]
    .sort(([a], [b]) => order(a) - order(b))
    .map(([label, items]) => `  resolves ${label}: ${items.join('; ')}`);
}

function groupLabel(p: RenderedPlaceholder): string {
  switch (p.resolves) {
    case 'trigger':
      return 'at trigger';
    case 'upstream-ended':
      return 'when an upstream run ends (the run is made then)';
    case 'run-made':
      return 'when the run is made';
    case 'step-ended':
      return `when ${p.step} ends`;
    default:
      return assertNever(p.resolves);
  }
}

function listed(steps: readonly string[]): string {
  return steps.length <= 1 ? (steps[0] ?? '') : `${steps.slice(0, -1).join(', ')} and ${steps.at(-1)}`;
}
