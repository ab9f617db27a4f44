import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SourceError } from '../../src/lib/yaml-source.js';
import {
  isOneOutputRef,
  malformedOutputRefs,
  outputRefs,
  renderOutputs,
} from '../../src/pipelines/param-substitution.js';
import { loadPipelineFile } from '../../src/pipelines/pipeline-loader.js';
import { MAX_OUTPUTS_FILE_BYTES, parseOutputs, readStepOutputs } from '../../src/pipelines/step-outputs.js';
import { parseProfile } from '../../src/sched/profile.js';
import { runDefinitionView } from '../../src/views/views.js';

/** Step outputs (issue 36): the file's lines, `${steps.<step>.outputs.<name>}`, and what a pipeline file may say. */

describe('an outputs file', () => {
  it('is name=value lines; blank lines and # comments skipped; the last of a name wins; = in a value kept', () => {
    expect(parseOutputs('a=1\n\n# note\nb=x=y\na=2\r\nempty=\n')).toEqual({
      ok: true,
      values: { a: '2', b: 'x=y', empty: '' },
    });
  });

  it('refuses a line that is not name=value, a bad name, or a control character, naming the line', () => {
    expect(parseOutputs('a=1\njunk\n')).toMatchObject({ ok: false, error: expect.stringMatching(/^line 2: /) });
    expect(parseOutputs('1a=1\n')).toMatchObject({ ok: false, error: expect.stringMatching(/^line 1: /) });
    expect(parseOutputs('a=\u0007\n')).toMatchObject({
      ok: false,
      error: 'line 1: the value of a holds control characters',
    });
    expect(parseOutputs(`a=${'x'.repeat(5000)}\n`)).toMatchObject({ ok: false });
  });

  it('is read from the step’s working directory, bounded; none written is no outputs; a directory the daemon cannot see is said so', () => {
    const cwd = mkdtempSync(join(tmpdir(), 'schedflow-outputs-'));
    const spec = { current_working_directory: cwd };
    // Written by this test's user: the job's user here.
    const own = { protectedDirs: [], ownerUid: process.getuid?.() ?? null };
    expect(readStepOutputs({ id: 'r1', spec }, own)).toEqual({
      path: `${cwd}/.schedflow-outputs-r1`,
      values: {},
      error: null,
    });
    writeFileSync(join(cwd, '.schedflow-outputs-r2'), 'n=3\n');
    expect(readStepOutputs({ id: 'r2', spec }, own).values).toEqual({ n: '3' });
    writeFileSync(join(cwd, '.schedflow-outputs-r3'), 'n=1\n'.repeat(MAX_OUTPUTS_FILE_BYTES));
    expect(readStepOutputs({ id: 'r3', spec }, own).error).toMatch(/more than the 65536/);
    const hidden = readStepOutputs(
      { id: 'r4', spec: { current_working_directory: join(cwd, 'not-mounted-here') } },
      own,
    );
    expect(hidden.error).toMatch(/is not visible to the daemon on this host: .* shared file system/);
    // A file older than the job (a declared file's earlier run): none written, not its values.
    writeFileSync(join(cwd, '.schedflow-outputs-r6'), 'n=9\n');
    utimesSync(join(cwd, '.schedflow-outputs-r6'), new Date(1_000_000), new Date(1_000_000));
    expect(readStepOutputs({ id: 'r6', spec }, { ...own, notBeforeMs: 2_000_000 })).toEqual({
      path: `${cwd}/.schedflow-outputs-r6`,
      values: {},
      error: null,
    });
    expect(readStepOutputs({ id: 'r6', spec }, { ...own, notBeforeMs: 500_000 }).values).toEqual({ n: '9' });
    // A step without a working directory is given no file.
    expect(readStepOutputs({ id: 'r5', spec: {} }, own)).toEqual({
      path: null,
      values: {},
      error: null,
    });
  });
});

describe('${steps.<step>.outputs.<name>}', () => {
  it('is found, rendered (:q shell-quotes) and told from what only looks like one', () => {
    const text = 'echo ${steps.split.outputs.n} ${steps.my.step-1.outputs.label:q} ${HOME} ${params.x}';
    expect(outputRefs(text)).toEqual([
      { step: 'split', name: 'n' },
      { step: 'my.step-1', name: 'label' },
    ]);
    expect(renderOutputs(text, (ref) => (ref.name === 'n' ? '3' : "it's"))).toBe(
      `echo 3 'it'\\''s' \${HOME} \${params.x}`,
    );
    expect(malformedOutputRefs('${steps.a.output.b} ${steps.a.outputs.b:z} ${steps.a.outputs.b}')).toEqual([
      '${steps.a.output.b}',
      '${steps.a.outputs.b:z}',
    ]);
    expect(isOneOutputRef(' ${steps.a.outputs.n} ')).toBe(true);
    expect(isOneOutputRef('0-${steps.a.outputs.n}')).toBe(false);
  });
});

describe('a pipeline file using step outputs', () => {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-pipelines-'));
  const profiles = new Map([
    [
      'lab',
      parseProfile('lab', { url: 'http://127.0.0.1:1', auth: { type: 'bearer', tokenEnv: 'T' }, account: 'lab' }),
    ],
  ]);
  const problems = (text: string): string[] => {
    const file = join(dir, 'p.yaml');
    writeFileSync(file, text);
    try {
      loadPipelineFile(file, { profiles, defaultProfile: 'lab' });
    } catch (error) {
      if (error instanceof SourceError) return error.problems.map((p) => p.replace(`${dir}/`, ''));
      throw error;
    }
    return [];
  };
  const head = 'defaults:\n  current_working_directory: /tmp\nsteps:\n  split:\n    script: "#!/bin/sh\\ntrue\\n"\n';

  it('may use an upstream step’s outputs in its script and its array', () => {
    expect(
      problems(
        `${head}  use:\n    needs: [split]\n    array: \${steps.split.outputs.n}\n    script: "#!/bin/sh\\necho \${steps.split.outputs.x:q}\\n"\n`,
      ),
    ).toEqual([]);
  });

  it('may not set SCHEDFLOW_OUTPUTS itself, in a step or the defaults (a file of its own is outputs: { file })', () => {
    const why =
      "SCHEDFLOW_OUTPUTS is set by schedflow (a file in the step's working directory): name the step's own file with outputs: { file: NAME }";
    expect(
      problems(`${head}  own:\n    environment: [SCHEDFLOW_OUTPUTS=/etc/passwd]\n    script: "#!/bin/sh\\ntrue\\n"\n`),
    ).toEqual([expect.stringContaining(`steps.own.environment: ${why}`)]);
    expect(
      problems(
        'defaults:\n  environment: { SCHEDFLOW_OUTPUTS: /etc/shadow }\nsteps:\n  a:\n    script: "#!/bin/sh\\ntrue\\n"\n',
      ),
    ).toEqual([expect.stringContaining(`defaults.environment: ${why}`)]);
    expect(
      problems(`${head}  own:\n    environment: [SCHEDFLOW_OUTPUTS_X=1]\n    script: "#!/bin/sh\\ntrue\\n"\n`),
    ).toEqual([]);
  });

  it('is refused at load, with the line, for an unknown step, a step not upstream, or a misspelt reference', () => {
    const found = problems(
      `${head}  other:\n    script: "#!/bin/sh\\necho \${steps.split.outputs.n} \${steps.nope.outputs.n} \${steps.split.output.n}\\n"\n`,
    );
    expect(found).toEqual([
      expect.stringMatching(/^p\.yaml:7:13: steps\.other\.script: \$\{steps\.split\.output\.n\} is not a step output/),
      expect.stringMatching(/^p\.yaml:7:13: .*step "split" is not upstream of "other": add it to needs/),
      expect.stringMatching(/^p\.yaml:7:13: .*no step "nope"/),
    ]);
  });

  it('is refused when the step whose outputs are used has no working directory for its file', () => {
    const text =
      'steps:\n  split:\n    script: "#!/bin/sh\\ntrue\\n"\n  use:\n    needs: [split]\n    script: "#!/bin/sh\\necho ${steps.split.outputs.n}\\n"\n';
    expect(problems(text)).toEqual([expect.stringMatching(/step "split" has no absolute current_working_directory/)]);
  });
});

describe('a run definition with a step waiting for outputs', () => {
  it('shows the step’s template with its secret-looking environment values masked, as its spec', () => {
    const env = ['API_TOKEN=s3cret-value', 'PLAIN=ok'];
    const shown = runDefinitionView(
      { steps: [{ step: 'use', spec: { environment: env }, deferred: { template: { environment: env }, uses: [] } }] },
      { admin: true },
    );
    const text = JSON.stringify(shown);
    expect(text).not.toContain('s3cret-value');
    expect(text).toContain('PLAIN=ok');
  });
});
