import { describe, expect, it } from 'vitest';
import {
  DependencySyntaxError,
  type DependencyTarget,
  evaluateDependency,
  parseDependency,
} from '../../src/sim/dependency.js';

const running: DependencyTarget = { started: true, finished: false, completedOk: false };
const pending: DependencyTarget = { started: false, finished: false, completedOk: false };
const ok: DependencyTarget = { started: true, finished: true, completedOk: true };
const failed: DependencyTarget = { started: true, finished: true, completedOk: false };

function status(text: string, targets: Record<number, DependencyTarget>) {
  const dependency = parseDependency(text);
  if (!dependency) throw new Error('no dependency');
  return evaluateDependency(dependency, (id) => targets[id]);
}

describe('parseDependency', () => {
  it('parses several ids per type and several types', () => {
    expect(parseDependency('afterok:1:2,afterany:3')).toEqual({
      mode: 'all',
      terms: [
        { type: 'afterok', jobId: 1 },
        { type: 'afterok', jobId: 2 },
        { type: 'afterany', jobId: 3 },
      ],
    });
    expect(parseDependency('afterok:1?afternotok:2')?.mode).toBe('any');
    expect(parseDependency('  ')).toBeUndefined();
  });

  it('rejects unknown types, missing ids, delays and mixed separators', () => {
    for (const bad of ['afterwards:1', 'afterok', 'afterok:1+5', 'afterok:1,afterok:2?afterok:3', 'singleton']) {
      expect(() => parseDependency(bad), bad).toThrow(DependencySyntaxError);
    }
  });
});

describe('evaluateDependency', () => {
  it('afterok waits, then is satisfied by success and never by failure', () => {
    expect(status('afterok:1', { 1: running })).toBe('waiting');
    expect(status('afterok:1', { 1: ok })).toBe('satisfied');
    expect(status('afterok:1', { 1: failed })).toBe('never');
  });

  it('afternotok is the mirror of afterok; afterany takes any end; after takes a start', () => {
    expect(status('afternotok:1', { 1: failed })).toBe('satisfied');
    expect(status('afternotok:1', { 1: ok })).toBe('never');
    expect(status('afterany:1', { 1: failed })).toBe('satisfied');
    expect(status('afterany:1', { 1: running })).toBe('waiting');
    expect(status('after:1', { 1: running })).toBe('satisfied');
    expect(status('after:1', { 1: pending })).toBe('waiting');
  });

  it("',' needs every term; '?' needs one; an unknown job can never satisfy", () => {
    expect(status('afterok:1,afterok:2', { 1: ok, 2: running })).toBe('waiting');
    expect(status('afterok:1,afterok:2', { 1: ok, 2: failed })).toBe('never');
    expect(status('afterok:1?afterok:2', { 1: failed, 2: running })).toBe('waiting');
    expect(status('afterok:1?afterok:2', { 1: failed, 2: ok })).toBe('satisfied');
    expect(status('afterok:1?afterok:2', { 1: failed, 2: failed })).toBe('never');
    expect(status('afterok:9', {})).toBe('never');
  });
});
