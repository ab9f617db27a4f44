import { describe, expect, it } from 'vitest';
import { pipelineFileSchema } from '../../src/pipelines/pipeline-file.js';
import { afterMove, moveDecision, moveReason, pendingMoveOf } from '../../src/requests/pending-move.js';
import { codecFor } from '../../src/sched/codecs/codec.js';
import { jobSpecSchema } from '../../src/sched/job-spec.js';

const SCRIPT = '#!/bin/bash\ntrue\n';

function issuesOf(spec: Record<string, unknown>): string[] {
  const parsed = jobSpecSchema.safeParse({ name: 'x', script: SCRIPT, ...spec });
  return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
}

describe('on_pending in a job spec', () => {
  it('reads the wait as a duration, in seconds, and keeps the partitions in order', () => {
    const spec = jobSpecSchema.parse({
      name: 'x',
      script: SCRIPT,
      partition: 'a',
      on_pending: { after: '30m', partitions: ['b', 'c'] },
    });
    expect(spec.on_pending).toEqual({ after: 1800, partitions: ['b', 'c'] });
    // What is stored is read again the same (a stored spec is parsed again before submission).
    expect(jobSpecSchema.parse(spec).on_pending).toEqual({ after: 1800, partitions: ['b', 'c'] });
    expect(
      jobSpecSchema.parse({ name: 'x', script: SCRIPT, on_pending: { after: 90, partitions: ['b'] } }).on_pending,
    ).toEqual({ after: 90, partitions: ['b'] });
  });

  it("refuses, naming the field, a wait that is not positive, no partitions, one named twice, the job's own", () => {
    expect(issuesOf({ on_pending: { after: 0, partitions: ['b'] } })).toEqual([
      expect.stringMatching(/^on_pending\.after: /),
    ]);
    expect(issuesOf({ on_pending: { after: '0s', partitions: ['b'] } })).toEqual([
      'on_pending.after: "0s" is not a positive duration',
    ]);
    expect(issuesOf({ on_pending: { after: 'soon', partitions: ['b'] } })).toEqual([
      expect.stringMatching(/^on_pending\.after: "soon" is not a duration/),
    ]);
    expect(issuesOf({ on_pending: { after: '5m', partitions: [] } })).toEqual([
      'on_pending.partitions: name at least one partition to move the job to',
    ]);
    expect(issuesOf({ on_pending: { after: '5m', partitions: ['b', 'c', 'b'] } })).toEqual([
      'on_pending.partitions.2: partition "b" is named twice',
    ]);
    expect(issuesOf({ partition: 'b', on_pending: { after: '5m', partitions: ['c', 'b'] } })).toEqual([
      `on_pending.partitions.1: "b" is the job's own partition (partition:); list only the partitions to move it to`,
    ]);
    expect(issuesOf({ on_pending: { after: '5m' } })).toEqual([expect.stringMatching(/^on_pending\.partitions: /)]);
    expect(issuesOf({ on_pending: { after: '5m', partitions: ['b'], when: 'now' } })).toEqual([
      expect.stringMatching(/^on_pending: .*when/),
    ]);
  });

  it('is not for arrays', () => {
    expect(issuesOf({ array: '0-3', on_pending: { after: '5m', partitions: ['b'] } })).toEqual([
      expect.stringMatching(/^on_pending: an array job is not moved/),
    ]);
  });

  it('is never sent to Slurm', () => {
    const spec = jobSpecSchema.parse({ name: 'x', script: SCRIPT, on_pending: { after: '5m', partitions: ['b'] } });
    for (const version of ['v0.0.42', 'v0.0.43', 'v0.0.44'] as const) {
      const { job } = codecFor(version).encodeSubmit(spec);
      expect(job).not.toHaveProperty('on_pending');
      expect(job.name).toBe('x');
    }
  });
});

describe('on_pending in a pipeline step', () => {
  const file = (step: Record<string, unknown>, defaults: Record<string, unknown> = {}) =>
    pipelineFileSchema.safeParse({ defaults, steps: { s: { script: SCRIPT, ...step } } });

  it('is read as in a job spec', () => {
    const parsed = file({ on_pending: { after: '1h', partitions: ['b'] } });
    expect(parsed.success && parsed.data.steps.s?.on_pending).toEqual({ after: 3600, partitions: ['b'] });
  });

  it("refuses the step's own partition, or the defaults' when the step has none", () => {
    const own = file({ partition: 'b', on_pending: { after: '1h', partitions: ['b'] } });
    expect(own.success ? [] : own.error.issues.map((i) => i.path.join('.'))).toEqual([
      'steps.s.on_pending.partitions.0',
    ]);
    const defaults = file({ on_pending: { after: '1h', partitions: ['c', 'b'] } }, { partition: 'b' });
    expect(defaults.success ? [] : defaults.error.issues.map((i) => [i.path.join('.'), i.message])).toEqual([
      ['steps.s.on_pending.partitions.1', expect.stringContaining(`"b" is the job's own partition`)],
    ]);
    expect(file({ partition: 'a', on_pending: { after: '1h', partitions: ['b'] } }, { partition: 'b' }).success).toBe(
      true,
    );
  });
});

describe('the decision to move', () => {
  const move = pendingMoveOf({ partition: 'a', on_pending: { after: 1800, partitions: ['b', 'c'] } });
  const t0 = 1_000_000;
  const waiting = { state: 'pending', jobId: 7, startedAt: null, submittedAt: t0, pendingMove: move };

  it('starts with no move made, counting from the submission', () => {
    expect(move).toEqual({ afterSec: 1800, partitions: ['b', 'c'], next: 0, partition: 'a', since: null });
    expect(pendingMoveOf({ partition: 'a' })).toBeNull();
  });

  it('waits `after` in each partition, then takes the next of the list', () => {
    expect(moveDecision(waiting, t0 + 1_799_999)).toEqual({ kind: 'wait', dueAt: t0 + 1_800_000 });
    expect(moveDecision(waiting, t0 + 1_800_000)).toEqual({ kind: 'move', to: 'b', waitedSec: 1800 });
    const moved = afterMove(move as NonNullable<typeof move>, 'b', t0 + 1_802_000);
    expect(moved).toMatchObject({ next: 1, partition: 'b', since: t0 + 1_802_000 });
    const inB = { ...waiting, pendingMove: moved };
    // Counted from the move, not from the submission.
    expect(moveDecision(inB, t0 + 3_000_000)).toMatchObject({ kind: 'wait' });
    expect(moveDecision(inB, t0 + 3_602_000)).toEqual({ kind: 'move', to: 'c', waitedSec: 1800 });
    const inC = { ...waiting, pendingMove: afterMove(moved, 'c', t0 + 3_602_000) };
    // The list is over: it stays in c.
    expect(moveDecision(inC, t0 + 99_000_000)).toEqual({ kind: 'none' });
  });

  it('never moves a job that started, is not in the scheduler yet, or could not be moved', () => {
    const late = t0 + 10_000_000;
    expect(moveDecision({ ...waiting, state: 'running', startedAt: t0 + 5 }, late)).toEqual({ kind: 'none' });
    expect(moveDecision({ ...waiting, startedAt: t0 + 5 }, late)).toEqual({ kind: 'none' });
    expect(moveDecision({ ...waiting, state: 'queued', jobId: null, submittedAt: null }, late)).toEqual({
      kind: 'none',
    });
    expect(moveDecision({ ...waiting, state: 'completed' }, late)).toEqual({ kind: 'none' });
    const noted = { ...waiting, pendingMove: { ...(move as NonNullable<typeof move>), note: 'refused' } };
    expect(moveDecision(noted, late)).toEqual({ kind: 'none' });
    // A submitted job not yet seen pending waits as long.
    expect(moveDecision({ ...waiting, state: 'submitted' }, late)).toMatchObject({ kind: 'move', to: 'b' });
  });

  it('says why, in words', () => {
    expect(moveReason({ waitedSec: 1802.4, from: 'b', slurmReason: 'Resources', to: 'c', how: 'update' })).toBe(
      'waited 30m in b (Resources); moved to c',
    );
    expect(moveReason({ waitedSec: 5.3, from: 'sf-wait', slurmReason: null, to: 'debug', how: 'resubmit' })).toBe(
      'waited 5s in sf-wait; moved to debug (Slurm refused the update: cancelled and submitted again there)',
    );
  });
});
