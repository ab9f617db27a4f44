import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StepNeed } from '../../src/db/schema.js';
import { SourceError } from '../../src/lib/yaml-source.js';
import { MAX_PIPELINE_FILE_BYTES, MAX_PIPELINE_STEPS } from '../../src/pipelines/pipeline-limits.js';
import { loadPipelineFile } from '../../src/pipelines/pipeline-loader.js';
import { stepOrder } from '../../src/pipelines/step-order.js';

/** Huge pipeline files: bounded before they are parsed, and what is loaded is loaded in linear time. */

const dir = mkdtempSync(join(tmpdir(), 'schedflow-limits-'));
const context = { profiles: new Map() };

function problems(name: string, text: string): string[] {
  const file = join(dir, name);
  writeFileSync(file, text);
  try {
    loadPipelineFile(file, context);
  } catch (error) {
    if (error instanceof SourceError) return error.problems.map((p) => p.replace(`${dir}/`, ''));
    throw error;
  }
  return [];
}

/** `count` steps, each needing the next one, so the file's order is the reverse of the run order. */
function chain(count: number): string {
  const lines = ['steps:'];
  for (let i = 0; i < count; i++) {
    lines.push(`  s${i}:`, '    script: "#!/bin/sh\\n"');
    if (i + 1 < count) lines.push(`    needs: [s${i + 1}]`);
  }
  return `${lines.join('\n')}\n`;
}

describe('pipeline file limits', () => {
  it('a file over the size limit is refused without being read, naming the file and the limit', () => {
    const text = `# ${'x'.repeat(MAX_PIPELINE_FILE_BYTES)}\nsteps:\n  a:\n    script: "#!/bin/sh\\n"\n`;
    expect(problems('big.yaml', text)).toEqual([
      `big.yaml: ${Buffer.byteLength(text)} bytes, more than the 1048576 bytes (1 MiB) a pipeline file may have: split it into several pipelines`,
    ]);
  });

  it('more steps than the limit is refused, pointed at steps:; the limit itself loads, quickly', () => {
    expect(problems('many.yaml', chain(MAX_PIPELINE_STEPS + 1))).toEqual([
      `many.yaml:2:3: steps: ${MAX_PIPELINE_STEPS + 1} steps, more than the ${MAX_PIPELINE_STEPS} a pipeline may have: split it into several pipelines, or use array jobs (array:) for many alike tasks`,
    ]);
    writeFileSync(join(dir, 'limit.yaml'), chain(MAX_PIPELINE_STEPS));
    const started = performance.now();
    const loaded = loadPipelineFile(join(dir, 'limit.yaml'), context);
    expect(loaded.order[0]).toBe(`s${MAX_PIPELINE_STEPS - 1}`);
    expect(loaded.order.at(-1)).toBe('s0');
    // Generous for a shared 2-core machine; the quadratic sort alone took seconds here.
    expect(performance.now() - started).toBeLessThan(3000);
  });
});

describe('step order (Kahn)', () => {
  const needsOf = (pairs: Record<string, string[]>): Record<string, StepNeed[]> =>
    Object.fromEntries(Object.entries(pairs).map(([s, n]) => [s, n.map((step) => ({ step, type: 'afterok' }))]));

  it('round by round, in file order within a round', () => {
    const steps = ['report', 'fetch', 'align', 'index'];
    const needs = needsOf({ report: ['align', 'index'], align: ['fetch'], index: ['fetch', 'fetch'] });
    expect(stepOrder(steps, needs)).toEqual({ ok: true, order: ['fetch', 'align', 'index', 'report'] });
  });

  it('a cycle: the steps on it and behind it, in file order', () => {
    const needs = needsOf({ a: ['c'], b: ['a'], c: ['b'], d: ['c'], e: [] });
    expect(stepOrder(['a', 'b', 'c', 'd', 'e'], needs)).toEqual({ ok: false, cycle: ['a', 'b', 'c', 'd'] });
  });

  it('60,000 steps in a chain written backwards, and in one big cycle, take linear time', () => {
    const count = 60_000;
    const steps = Array.from({ length: count }, (_, i) => `s${i}`);
    const needs = needsOf(Object.fromEntries(steps.map((s, i) => [s, i + 1 < count ? [`s${i + 1}`] : []])));
    const started = performance.now();
    const result = stepOrder(steps, needs);
    expect(result.ok && result.order.length).toBe(count);
    expect(result.ok && result.order[0]).toBe(`s${count - 1}`);
    needs[`s${count - 1}`] = [{ step: 's0', type: 'afterok' }];
    const cycle = stepOrder(steps, needs);
    expect(!cycle.ok && cycle.cycle.length).toBe(count);
    // The former round-by-round rescan needed about count²/2 checks here: minutes.
    expect(performance.now() - started).toBeLessThan(2000);
  });
});
