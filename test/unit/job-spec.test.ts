import { describe, expect, it } from 'vitest';
import { closestName } from '../../src/lib/closest-name.js';
import { jobSpecSchema } from '../../src/sched/job-spec.js';

const base = { name: 'x', script: '#!/bin/sh\ntrue\n' };

function issues(extra: Record<string, unknown>): { path: string; message: string }[] {
  const parsed = jobSpecSchema.safeParse({ ...base, ...extra });
  if (parsed.success) return [];
  return parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message }));
}

describe('the job spec refuses at the door what no scheduler would take', () => {
  it('a misspelt member, with the member it was meant to be', () => {
    expect(issues({ time_limt: 5 })).toEqual([
      { path: 'time_limt', message: 'unknown member "time_limt"; did you mean "time_limit"?' },
    ]);
  });

  it('a member no data parser has, without a far-fetched suggestion', () => {
    expect(issues({ constructor: 1 })).toEqual([{ path: 'constructor', message: 'unknown member "constructor"' }]);
    expect(issues({ wibble_wobble_frobnicate: 1 })[0]?.message).toBe('unknown member "wibble_wobble_frobnicate"');
  });

  it('memory, time limits and counts Slurm cannot store', () => {
    expect(issues({ memory_per_node: '99999999999999999999999T' })).toEqual([
      { path: 'memory_per_node', message: '"99999999999999999999999T" is more memory than Slurm can take' },
    ]);
    expect(issues({ time_limit: 2 ** 32 })[0]?.path).toBe('time_limit');
    expect(issues({ tasks: 2 ** 40 })[0]?.path).toBe('tasks');
  });

  it("a pass-through member whose value the scheduler's schema refuses, in the schema's words", () => {
    expect(issues({ requeue: 'yes' })).toEqual([{ path: 'requeue', message: 'must be boolean' }]);
    expect(issues({ nice: 'high' })).toEqual([{ path: 'nice', message: 'must be integer' }]);
  });

  it('checks pass-through members by their values, not by what JSON would write of them (NaN is not null)', () => {
    // Either order: the check of one set of members is remembered for the next spec with the same.
    expect(issues({ core_specification: null })).toEqual([]);
    expect(issues({ core_specification: Number.NaN }).map((i) => i.path)).toContain('core_specification');
    expect(issues({ thread_specification: Number.POSITIVE_INFINITY }).map((i) => i.path)).toContain(
      'thread_specification',
    );
    expect(issues({ thread_specification: null })).toEqual([]);
    expect(issues({ nice: 10n }).map((i) => i.path)).not.toEqual([]);
  });

  it('takes well-formed pass-through members and Slurm notation', () => {
    expect(issues({ requeue: true, qos: 'normal', nice: 10, memory_per_node: '4G', time_limit: '1:30:00' })).toEqual(
      [],
    );
  });
});

describe('closestName', () => {
  it('suggests only near misses', () => {
    expect(closestName('partiton', ['partition', 'account'])).toBe('partition');
    expect(closestName('cpus_per_tsk', ['cpus_per_task', 'tasks'])).toBe('cpus_per_task');
    expect(closestName('xyz', ['partition', 'account'])).toBeUndefined();
  });
});
