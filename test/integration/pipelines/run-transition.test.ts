import { describe, expect, it } from 'vitest';
import type { History } from '../../../src/db/history.js';
import { getRun, runTransitionsOf } from '../../../src/db/runs.js';
import type { RunState } from '../../../src/db/schema.js';
import { recordRun, transitionRun } from '../../../src/pipelines/run-transition.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/** A run changes state by a guarded transition with a log row, on SQLite and on PostgreSQL. */

const histories = testHistories();

function newRun(h: History, id: string, state: RunState) {
  return recordRun(
    h,
    {
      id,
      pipeline: 'nightly',
      owner: 'default',
      actor: 'token:ci',
      trigger: 'api',
      triggeredBy: 'API token "ci"',
      scheduledFor: null,
      params: {},
      definition: { steps: [] },
      state,
      detail: null,
      webhookUrl: null,
      createdAt: 1000,
      endedAt: null,
      updatedAt: 1000,
    },
    'api',
  );
}

describe.each(DIALECTS)('run transitions on %s', (dialect) => {
  it('a run is made with the first row of its log; a move writes the state and its row', async () => {
    const h = await histories.make(dialect);
    await newRun(h, 'r1', 'queued');
    const started = await transitionRun(h, 'r1', { from: 'queued', to: 'running', at: 2000, source: 'pipeline' });
    expect(started).toMatchObject({ id: 'r1', state: 'running', updatedAt: 2000 });
    const ended = await transitionRun(h, 'r1', {
      from: 'running',
      to: 'failed',
      at: 3000,
      source: 'pipeline',
      detail: 'a: FAILED (exit 1)',
      patch: { detail: 'a: FAILED (exit 1)', endedAt: 2900 },
    });
    expect(ended).toMatchObject({ state: 'failed', detail: 'a: FAILED (exit 1)', endedAt: 2900, updatedAt: 3000 });
    expect((await runTransitionsOf(h, 'r1')).map(({ id: _id, ...row }) => row)).toEqual([
      { runId: 'r1', fromState: null, toState: 'queued', at: 1000, source: 'api', detail: null },
      { runId: 'r1', fromState: 'queued', toState: 'running', at: 2000, source: 'pipeline', detail: null },
      {
        runId: 'r1',
        fromState: 'running',
        toState: 'failed',
        at: 3000,
        source: 'pipeline',
        detail: 'a: FAILED (exit 1)',
      },
    ]);
  });

  it('a stale move (from a state the run has left) changes nothing and logs nothing', async () => {
    const h = await histories.make(dialect);
    await newRun(h, 'r2', 'queued');
    // A cancel ends the queued run; a start decided from `queued` before it comes too late.
    await transitionRun(h, 'r2', {
      from: 'queued',
      to: 'cancelled',
      at: 2000,
      source: 'api',
      patch: { endedAt: 2000 },
    });
    const late = await transitionRun(h, 'r2', { from: 'queued', to: 'running', at: 2100, source: 'pipeline' });
    expect(late).toBeNull();
    expect(await getRun(h, 'r2')).toMatchObject({ state: 'cancelled', updatedAt: 2000 });
    expect((await runTransitionsOf(h, 'r2')).map((t) => t.toState)).toEqual(['queued', 'cancelled']);
  });

  it('of two writers ending one run (two hosts), one ends it and one row is logged', async () => {
    const h = await histories.make(dialect);
    const other = await histories.again(h);
    await newRun(h, 'r3', 'running');
    const [a, b] = await Promise.all([
      transitionRun(h, 'r3', { from: 'running', to: 'succeeded', at: 2000, source: 'pipeline' }),
      transitionRun(other, 'r3', { from: 'running', to: 'cancelled', at: 2000, source: 'api' }),
    ]);
    expect([a, b].filter((row) => row !== null)).toHaveLength(1);
    const log = await runTransitionsOf(h, 'r3');
    expect(log).toHaveLength(2);
    expect(log[1]?.toState).toBe((await getRun(h, 'r3'))?.state);
  });

  it('a move the runs state machine has not (back, or out of an end) throws and writes nothing', async () => {
    const h = await histories.make(dialect);
    await newRun(h, 'r4', 'skipped');
    await expect(
      transitionRun(h, 'r4', { from: 'skipped', to: 'running', at: 2000, source: 'pipeline' }),
    ).rejects.toThrow(/no move from skipped to running/);
    await expect(newRun(h, 'r5', 'succeeded')).rejects.toThrow(/not made in state succeeded/);
    expect((await runTransitionsOf(h, 'r4')).map((t) => t.toState)).toEqual(['skipped']);
    expect(await getRun(h, 'r5')).toBeUndefined();
  });
});
