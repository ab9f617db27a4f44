import { describe, expect, it } from 'vitest';
import { outputRefs, RUN_VARIABLES, unknownPlaceholders } from '../../src/pipelines/param-substitution.js';
import { kindOf, placeholdersIn } from '../../src/pipelines/placeholder-kinds.js';

/** Which placeholders resolve when (issue 36), as `schedflow validate --render` groups them. */

describe('placeholder kinds', () => {
  it('sorts each kind by when it resolves: params at trigger, run names when the run is made, outputs when their step ends', () => {
    const text = [
      'echo ${params.sample:q} ${params.sample:q} ${ run.id }',
      'tag=${pipeline.name}.${step.name} on ${run.date}',
      'n=${steps.split.outputs.chunks} sum=${steps.pre.split.outputs.sum:q}',
    ].join('\n');
    expect(placeholdersIn(text).map((p) => [p.written, p.kind, p.resolves, p.step])).toEqual([
      ['${params.sample:q}', 'param', 'trigger', null],
      ['${run.id}', 'run', 'run-made', null],
      ['${pipeline.name}', 'run', 'run-made', null],
      ['${step.name}', 'run', 'run-made', null],
      ['${run.date}', 'run', 'run-made', null],
      // A step name may hold dots: the step is everything up to the last `.outputs.`.
      ['${steps.split.outputs.chunks}', 'step-output', 'step-ended', 'split'],
      ['${steps.pre.split.outputs.sum:q}', 'step-output', 'step-ended', 'pre.split'],
    ]);
  });

  it("leaves the shell's own alone: ${HOME}, ${x%.*}, ${a:-b}, and dotted names that are none of schedflow's", () => {
    expect(placeholdersIn('${HOME} ${x%.*} ${a:-b} ${1} ${foo.bar} ${steps.a.output.n}')).toEqual([]);
  });

  it('knows the values of an upstream run, resolved when it ends (one table entry each)', () => {
    expect(kindOf('upstream.run_id')).toMatchObject({ kind: 'upstream', resolves: 'upstream-ended' });
    expect(kindOf('upstream.state')).toMatchObject({ kind: 'upstream', resolves: 'upstream-ended' });
    expect(kindOf('upstream.outputs.split.n')).toMatchObject({
      kind: 'upstream-output',
      resolves: 'upstream-ended',
      step: null,
    });
    expect(kindOf('upstream.other')).toBeNull();
  });

  it('agrees with the templating: every name it renders when a run is made is one, every step output too', () => {
    for (const [ns, names] of Object.entries(RUN_VARIABLES)) {
      for (const name of names) expect(kindOf(`${ns}.${name}`), `${ns}.${name}`).toMatchObject({ kind: 'run' });
    }
    const text = 'a ${params.p} ${run.trigger:q} ${steps.x-1.outputs.v_2} ${steps.y.outputs.w:q} ${HOME}';
    expect(unknownPlaceholders(text, new Set(['p']))).toEqual([]);
    const found = placeholdersIn(text);
    expect(found.filter((p) => p.kind === 'step-output').map((p) => p.name)).toEqual(
      outputRefs(text).map((ref) => `steps.${ref.step}.outputs.${ref.name}`),
    );
    expect(found.map((p) => p.kind)).toEqual(['param', 'run', 'step-output', 'step-output']);
  });
});
