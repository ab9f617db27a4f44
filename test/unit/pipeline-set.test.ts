import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_PIPELINE_STEPS } from '../../src/pipelines/pipeline-limits.js';
import { pipelineFiles } from '../../src/pipelines/pipeline-loader.js';
import { loadPipelineSet, loadPipelineSetAsync, PipelineCache } from '../../src/pipelines/pipeline-set.js';

/** A folder of pipeline files loaded as one set: the checks between files, and reloads that skip what did not change. */

const context = { profiles: new Map() };
const script = '#!/bin/sh\necho one\n';

function folder(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-set-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

describe('a set of pipeline files', () => {
  it('two files with one pipeline name (x.yaml and x.yml) are both refused, naming each other', () => {
    const step = 'steps:\n  a:\n    script: "#!/bin/sh\\n"\n';
    const dir = folder({ 'x.yaml': step, 'x.yml': step, 'y.yaml': `name: x\n${step}`, 'z.yaml': step });
    const { results } = loadPipelineSet(pipelineFiles(dir), context);
    const [xYaml, xYml, y, z] = [join(dir, 'x.yaml'), join(dir, 'x.yml'), join(dir, 'y.yaml'), join(dir, 'z.yaml')];
    expect(results.map((r) => [r.file, r.error?.message ?? r.pipeline?.name])).toEqual([
      [
        xYaml,
        `${xYaml}: pipeline name "x" is also used by ${xYml}, ${y}: give each file its own name (name:) or file name`,
      ],
      [
        xYml,
        `${xYml}: pipeline name "x" is also used by ${xYaml}, ${y}: give each file its own name (name:) or file name`,
      ],
      [
        y,
        `${y}: pipeline name "x" is also used by ${xYaml}, ${xYml}: give each file its own name (name:) or file name`,
      ],
      [z, 'z'],
    ]);
  });

  it('a reload checks only the files that changed, or whose script files did; a failing file every time', () => {
    const dir = folder({
      'a.yaml': 'steps:\n  a:\n    script: "#!/bin/sh\\n"\n',
      'b.yaml': 'steps:\n  b:\n    script_file: b.sh\n',
      'b.sh': script,
      'c.yaml': 'steps:\n  c:\n    script_file: missing.sh\n',
    });
    const [a, b, c] = ['a.yaml', 'b.yaml', 'c.yaml'].map((f) => join(dir, f)) as [string, string, string];
    const cache = new PipelineCache();
    const first = loadPipelineSet(pipelineFiles(dir), context, cache);
    expect(first.checked).toEqual([a, b, c]);
    const again = loadPipelineSet(pipelineFiles(dir), context, cache);
    expect(again.checked).toEqual([c]);
    // Unchanged files come back as the very objects loaded before.
    expect(again.results[0]?.pipeline).toBe(first.results[0]?.pipeline);

    writeFileSync(a, 'steps:\n  a2:\n    script: "#!/bin/sh\\n"\n');
    writeFileSync(join(dir, 'b.sh'), `${script}echo two\n`);
    writeFileSync(join(dir, 'missing.sh'), script);
    const changed = loadPipelineSet(pipelineFiles(dir), context, cache);
    expect(changed.checked).toEqual([a, b, c]);
    expect(changed.results.map((r) => r.error?.message ?? r.pipeline?.order)).toEqual([['a2'], ['b'], ['c']]);

    // Same size, new modification time: an edit all the same.
    writeFileSync(a, 'steps:\n  a3:\n    script: "#!/bin/sh\\n"\n');
    utimesSync(a, new Date(), new Date(Date.now() + 5000));
    expect(loadPipelineSet(pipelineFiles(dir), context, cache).checked).toEqual([a]);
    rmSync(join(dir, 'b.sh'));
    const gone = loadPipelineSet(pipelineFiles(dir), context, cache);
    expect(gone.checked).toEqual([b]);
    expect(gone.results[1]?.error?.message).toBe(`${b}:3:18: steps.b.script_file: cannot read ${join(dir, 'b.sh')}`);
  });

  it("the daemon's load checks large files off the event loop: timers keep firing, and it finds what the CLI finds", async () => {
    // Each file at the step limit, each step needing the next: a few hundred milliseconds of parsing and checking apiece.
    const lines = ['steps:'];
    for (let i = 0; i < MAX_PIPELINE_STEPS; i++) {
      lines.push(`  s${i}:`, '    script: "#!/bin/sh\\necho ${params.who:q}\\n"');
      if (i + 1 < MAX_PIPELINE_STEPS) lines.push(`    needs: [s${i + 1}]`);
    }
    const big = `params:\n  who: me\n${lines.join('\n')}\n`;
    const dir = folder({
      'a.yaml': big,
      'b.yaml': big.replace('needs: [s1]', 'needs: [nowhere]'),
      'c.yaml': big,
      'd.yaml': 'name: c\nsteps:\n  a:\n    script: "#!/bin/sh\\n"\n',
    });
    let ticks = 0;
    let ticking = true;
    const tick = () => {
      ticks += 1;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const cache = new PipelineCache();
    const loaded = await loadPipelineSetAsync(pipelineFiles(dir), context, cache);
    ticking = false;
    // A load on the event loop would let no tick run until it ended.
    expect(ticks).toBeGreaterThan(10);
    const summary = (r: (typeof loaded.results)[number]) => r.error?.message ?? r.pipeline?.order.length;
    expect(loaded.results.map(summary)).toEqual(loadPipelineSet(pipelineFiles(dir), context).results.map(summary));
    expect(loaded.results.map((r) => r.error?.problems.length ?? 0)).toEqual([0, 1, 1, 1]);
    expect(loaded.results[1]?.error?.message).toMatch(/b\.yaml:\d+:\d+: steps\.s0\.needs: no step "nowhere"/);
    expect(loaded.results[0]?.pipeline?.order[0]).toBe(`s${MAX_PIPELINE_STEPS - 1}`);
    // What came from the thread is cached like any load (a file that failed alone is checked again).
    expect((await loadPipelineSetAsync(pipelineFiles(dir), context, cache)).checked).toEqual([join(dir, 'b.yaml')]);
  });
});
