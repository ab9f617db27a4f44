/**
 * The shape of a JSON value: member names and JSON types, recursively, without the values.
 * Two answers with the same shape decode the same way, whatever ids, times or hosts they carry.
 *
 * - a scalar is its type name: `"string"`, `"number"`, `"boolean"`, `"null"`;
 * - an object is an object of its members' shapes, keys sorted;
 * - an array is `[]` when empty, else `[<union of its elements' shapes>]`;
 * - where elements differ, a union: `{"|": [alternatives]}`, and a member missing from some
 *   elements of an array has `"absent"` among its alternatives.
 */
export type Shape = string | Shape[] | { [member: string]: Shape };

const UNION = '|';
const ABSENT = 'absent';

function isUnion(shape: Shape): shape is { '|': Shape[] } {
  return typeof shape === 'object' && !Array.isArray(shape) && Array.isArray(shape[UNION]);
}

function isObjectShape(shape: Shape): shape is { [member: string]: Shape } {
  return typeof shape === 'object' && !Array.isArray(shape) && !isUnion(shape);
}

const key = (shape: Shape): string => JSON.stringify(shape);

export function shapeOf(value: unknown): Shape {
  if (value === null) return 'null';
  if (Array.isArray(value)) {
    if (value.length === 0) return [];
    return [value.map(shapeOf).reduce(unionShapes)];
  }
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
      return typeof value;
    case 'object': {
      const members = Object.keys(value as object).sort();
      return Object.fromEntries(members.map((m) => [m, shapeOf((value as Record<string, unknown>)[m])]));
    }
    default:
      return typeof value;
  }
}

function alternatives(shape: Shape): Shape[] {
  return isUnion(shape) ? shape[UNION] : [shape];
}

/** The shape of a value that has either shape. */
export function unionShapes(a: Shape, b: Shape): Shape {
  if (key(a) === key(b)) return a;
  if (isObjectShape(a) && isObjectShape(b)) {
    const members = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    return Object.fromEntries(members.map((m) => [m, unionShapes(a[m] ?? ABSENT, b[m] ?? ABSENT)]));
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    // An empty array says nothing about its elements: it takes the other's element shape.
    const [ea] = a;
    const [eb] = b;
    if (ea === undefined) return b;
    if (eb === undefined) return a;
    return [unionShapes(ea, eb)];
  }
  // Object alternatives merge with each other, so a union holds at most one object shape.
  const merged: Shape[] = [];
  for (const alt of [...alternatives(a), ...alternatives(b)]) {
    const i = merged.findIndex(
      (m) =>
        key(m) === key(alt) || (isObjectShape(m) && isObjectShape(alt)) || (Array.isArray(m) && Array.isArray(alt)),
    );
    const found = i >= 0 ? merged[i] : undefined;
    if (found === undefined) merged.push(alt);
    else merged[i] = unionShapes(found, alt);
  }
  if (merged.length === 1 && merged[0] !== undefined) return merged[0];
  return { [UNION]: merged.sort((x, y) => key(x).localeCompare(key(y))) };
}

/** One difference between two shapes, at a path like `jobs[].exit_code.status`. */
export interface ShapeDifference {
  path: string;
  expected: string;
  actual: string;
}

const brief = (shape: Shape | undefined): string => {
  if (shape === undefined) return 'absent';
  if (typeof shape === 'string') return shape;
  if (Array.isArray(shape)) return shape.length === 0 ? '[] (empty)' : 'array';
  if (isUnion(shape)) return shape[UNION].map(brief).join(' | ');
  return 'object';
};

/** Every difference between two shapes, as precise as possible (down to the member). */
export function compareShapes(expected: Shape | undefined, actual: Shape | undefined, path = ''): ShapeDifference[] {
  if (expected === undefined && actual === undefined) return [];
  if (expected !== undefined && actual !== undefined && key(expected) === key(actual)) return [];
  if (expected !== undefined && actual !== undefined) {
    if (isObjectShape(expected) && isObjectShape(actual)) {
      const members = [...new Set([...Object.keys(expected), ...Object.keys(actual)])].sort();
      return members.flatMap((m) => compareShapes(expected[m], actual[m], path ? `${path}.${m}` : m));
    }
    if (Array.isArray(expected) && Array.isArray(actual) && expected[0] !== undefined && actual[0] !== undefined) {
      return compareShapes(expected[0], actual[0], `${path}[]`);
    }
  }
  return [{ path: path || '(root)', expected: describeShape(expected), actual: describeShape(actual) }];
}

function describeShape(shape: Shape | undefined): string {
  const text = shape === undefined ? 'absent' : JSON.stringify(shape);
  // Whole objects are long: name the kind and the first members so the report stays readable.
  return text.length <= 160 ? text : `${brief(shape)} ${text.slice(0, 150)}…`;
}
