import { readFileSync, writeFileSync } from 'node:fs';
import type { ApiVersion } from '../../src/sched/versions.js';
import type { StepRecord } from './reduce.js';
import type { Shape } from './shape.js';

/** The recorded answers of a real Slurm for one API version (test/fixtures/differential/<version>.json). */
export interface DifferentialFixture {
  version: ApiVersion;
  /** `slurm.release` of the cluster it was recorded from. */
  recordedFrom: string;
  steps: StepRecord[];
}

/** As stored: shapes that several steps share (`meta`, a job) once, referred to as `{"$shape": name}`. */
interface StoredFixture extends DifferentialFixture {
  shapes: Record<string, Shape>;
}

const REF = '$shape';
/** Shapes shorter than this stay where they are: a reference would not make the file easier to read. */
const HOIST_MIN_CHARS = 200;
/** Objects and arrays this short go on one line. */
const LINE_CHARS = 110;

export const fixtureUrl = (version: ApiVersion): URL =>
  new URL(`../fixtures/differential/${version}.json`, import.meta.url);

type Walkable = Shape | undefined;

function isRef(shape: Walkable): shape is { [REF]: string } {
  return typeof shape === 'object' && shape !== null && !Array.isArray(shape) && typeof shape[REF] === 'string';
}

function children(shape: Shape, path: string): [string, Shape][] {
  if (typeof shape === 'string') return [];
  if (Array.isArray(shape)) return shape.map((s) => [`${path}[]`, s]);
  return Object.entries(shape).map(([k, s]) => [path ? `${path}.${k}` : k, s]);
}

/** Replaces every large sub-shape that occurs more than once by a reference into `shapes`. */
function hoist(steps: StepRecord[]): { steps: StepRecord[]; shapes: Record<string, Shape> } {
  const counts = new Map<string, number>();
  // Counted as in the file after hoisting: the parts of a repeated shape are counted once, not
  // once per repetition, so only what really recurs gets a name.
  const count = (shape: Shape, path: string): void => {
    const text = JSON.stringify(shape);
    const seen = counts.get(text);
    if (text.length >= HOIST_MIN_CHARS) counts.set(text, (seen ?? 0) + 1);
    if (seen !== undefined) return;
    for (const [p, s] of children(shape, path)) count(s, p);
  };
  // A body itself is never replaced (steps show their own top level), so counting starts below it.
  for (const step of steps) for (const [p, s] of step.body === undefined ? [] : children(step.body, '')) count(s, p);

  const shapes: Record<string, Shape> = {};
  const names = new Map<string, string>();
  const replace = (shape: Shape, path: string): Shape => {
    const text = JSON.stringify(shape);
    if ((counts.get(text) ?? 0) > 1) {
      let name = names.get(text);
      if (name === undefined) {
        // Named after where it first occurs (`jobs[]`, `meta`); a different shape at the same place gets `#2`.
        const base = path || 'body';
        name = base;
        for (let n = 2; name in shapes; n++) name = `${base}#${n}`;
        names.set(text, name);
        shapes[name] = inner(shape, path);
      }
      return { [REF]: name };
    }
    return inner(shape, path);
  };
  const inner = (shape: Shape, path: string): Shape => {
    if (typeof shape === 'string') return shape;
    if (Array.isArray(shape)) return shape.map((s) => replace(s, `${path}[]`));
    return Object.fromEntries(Object.entries(shape).map(([k, s]) => [k, replace(s, path ? `${path}.${k}` : k)]));
  };
  const out = steps.map((step) => (step.body === undefined ? step : { ...step, body: inner(step.body, '') }));
  return { steps: out, shapes };
}

function expand(shape: Shape, shapes: Record<string, Shape>): Shape {
  if (isRef(shape)) {
    const found = shapes[shape[REF]];
    if (found === undefined) throw new Error(`fixture refers to an unknown shape "${shape[REF]}"`);
    return expand(found, shapes);
  }
  if (typeof shape === 'string') return shape;
  if (Array.isArray(shape)) return shape.map((s) => expand(s, shapes));
  return Object.fromEntries(Object.entries(shape).map(([k, s]) => [k, expand(s, shapes)]));
}

/** JSON with small objects and arrays on one line: a job's 150 members stay readable and diff line by line. */
export function formatJson(value: unknown, indent = ''): string {
  const flat = JSON.stringify(value);
  if (flat === undefined) return 'null';
  if (typeof value !== 'object' || value === null || indent.length + flat.length <= LINE_CHARS) return flat;
  const next = `${indent}  `;
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    return `[\n${value.map((v) => `${next}${formatJson(v, next)}`).join(',\n')}\n${indent}]`;
  }
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
  if (entries.length === 0) return '{}';
  return `{\n${entries.map(([k, v]) => `${next}${JSON.stringify(k)}: ${formatJson(v, next)}`).join(',\n')}\n${indent}}`;
}

export function readFixture(version: ApiVersion): DifferentialFixture {
  const stored = JSON.parse(readFileSync(fixtureUrl(version), 'utf8')) as StoredFixture;
  return {
    version: stored.version,
    recordedFrom: stored.recordedFrom,
    steps: stored.steps.map((step) =>
      step.body === undefined ? step : { ...step, body: expand(step.body, stored.shapes) },
    ),
  };
}

export function writeFixture(fixture: DifferentialFixture): void {
  const { steps, shapes } = hoist(fixture.steps);
  const stored: StoredFixture = { version: fixture.version, recordedFrom: fixture.recordedFrom, steps, shapes };
  writeFileSync(fixtureUrl(fixture.version), `${formatJson(stored)}\n`);
}
