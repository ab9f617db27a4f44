import { describe, expect, it } from 'vitest';
import type { History } from '../../../src/db/history.js';
import { endedRequestsToCheck, endedRunsToCheck, pendingSummaryIds, takeUp } from '../../../src/db/summaries.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/** Ended requests and runs taken up for summaries, on SQLite and on PostgreSQL, once across hosts. */

const histories = testHistories();

async function seed(h: History) {
  const { jobRequests, pipelineRuns } = h.t;
  const base = { profile: 'test', spec: {}, owner: 'default', actor: 'test', origin: 'api' as const };
  await h.run(
    h.db.insert(jobRequests).values([
      { ...base, id: 'done', name: 'done', state: 'completed', createdAt: 1, updatedAt: 20 },
      { ...base, id: 'older', name: 'older', state: 'failed', createdAt: 1, updatedAt: 10, summarize: false },
      { ...base, id: 'busy', name: 'busy', state: 'running', createdAt: 1, updatedAt: 5 },
      { ...base, id: 'retrying', name: 'retrying', state: 'failed', createdAt: 1, updatedAt: 6, retryDueAt: 99 },
    ]),
  );
  await h.run(
    h.db.insert(pipelineRuns).values({
      id: 'run-1',
      pipeline: 'p',
      trigger: 'api',
      params: {},
      definition: {},
      state: 'succeeded',
      createdAt: 1,
      updatedAt: 30,
    }),
  );
}

describe.each(DIALECTS)('summary take-up on %s', (dialect) => {
  it('finds what ended, oldest first, and takes each up once', async () => {
    const h = await histories.make(dialect);
    await seed(h);
    const requests = await endedRequestsToCheck(h);
    expect(requests).toEqual([
      { id: 'older', summarize: false, runId: null, nextAttemptId: null },
      { id: 'done', summarize: null, runId: null, nextAttemptId: null },
    ]);
    expect((await endedRunsToCheck(h)).map((r) => r.id)).toEqual(['run-1']);
    const made = await takeUp(h, {
      requests: requests.map((r) => ({ id: r.id, wanted: r.summarize !== false })),
      runs: [{ id: 'run-1', wanted: true }],
      at: 100,
    });
    expect(made).toHaveLength(2);
    expect((await pendingSummaryIds(h)).sort()).toEqual([...made].sort());
    expect(await endedRequestsToCheck(h)).toEqual([]);
    expect(await endedRunsToCheck(h)).toEqual([]);
    // Taken up again (a second host that read the same rows): no second summary.
    expect(
      await takeUp(h, { requests: [{ id: 'done', wanted: true }], runs: [{ id: 'run-1', wanted: true }], at: 200 }),
    ).toEqual([]);
  });

  it.skipIf(dialect === 'sqlite')('makes one summary per request when two hosts take it up at once', async () => {
    const h = await histories.make(dialect);
    const other = await histories.again(h);
    await seed(h);
    const input = { requests: [{ id: 'done', wanted: true }], runs: [{ id: 'run-1', wanted: true }], at: 100 };
    const [a, b] = await Promise.all([takeUp(h, input), takeUp(other, input)]);
    expect(a.length + b.length).toBe(2);
    expect(await pendingSummaryIds(h)).toHaveLength(2);
  });
});
