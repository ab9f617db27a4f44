import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { historyId } from '../../../src/db/history-meta.js';
import { pauseSchedule, resumeSchedule, schedulePauses } from '../../../src/db/schedule-pauses.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/** An admin's pause of a pipeline's schedule, and the history's id, on SQLite and on PostgreSQL. */

const histories = testHistories();

describe.each(DIALECTS)('on %s', (dialect) => {
  it('a pause keeps who paused first; a resume lifts it and owes nothing from the paused time', async () => {
    const h = await histories.make(dialect);
    await pauseSchedule(h, 'nightly', { by: 'token ops', at: 1000 });
    await pauseSchedule(h, 'nightly', { by: 'password', at: 2000 });
    expect(await schedulePauses(h)).toEqual(new Map([['nightly', { by: 'token ops', at: 1000 }]]));
    await resumeSchedule(h, 'nightly', 3000);
    expect((await schedulePauses(h)).size).toBe(0);
    const t = h.t.pipelineSchedules;
    expect(await h.one(h.db.select().from(t).where(eq(t.pipeline, 'nightly')))).toMatchObject({
      pausedAt: null,
      pausedBy: null,
      lastScheduledFor: 3000,
    });
  });

  it('gives the history one id, the same to every process that opens it', async () => {
    const h = await histories.make(dialect);
    const other = await histories.again(h);
    const [first, second] = await Promise.all([historyId(h), historyId(other)]);
    expect(first).toMatch(/^[0-9a-f-]{36}$/);
    expect(second).toBe(first);
  });
});
