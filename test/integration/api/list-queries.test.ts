import { describe, expect, it } from 'vitest';
import { accountingHistory, history } from '../../../src/db/accounting.js';
import type { History } from '../../../src/db/history.js';
import { jobsPage, requestCountsByState } from '../../../src/db/requests.js';
import { runsPage } from '../../../src/db/runs.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/** The API's and the UI's list queries (src/db), keyset pages and filters, on SQLite and on PostgreSQL. */

const histories = testHistories();

async function seed(h: History) {
  const { jobRequests, pipelineRuns, accountingJobs } = h.t;
  await h.run(
    h.db.insert(pipelineRuns).values({
      id: 'run-1',
      pipeline: 'nightly',
      trigger: 'api',
      params: {},
      definition: {},
      state: 'running',
      createdAt: 500,
      updatedAt: 500,
    }),
  );
  // Two requests in one millisecond: the id breaks the tie, so paging skips and repeats none.
  const requests = [
    { id: 'a', createdAt: 1000, state: 'completed' as const, runId: null },
    { id: 'b', createdAt: 2000, state: 'running' as const, runId: 'run-1' },
    { id: 'c', createdAt: 2000, state: 'running' as const, runId: null },
    { id: 'd', createdAt: 3000, state: 'failed' as const, runId: null },
  ];
  for (const r of requests) {
    await h.run(
      h.db.insert(jobRequests).values({
        ...r,
        profile: 'test',
        name: `job-${r.id}`,
        spec: { name: `job-${r.id}`, script: '#!/bin/sh\ntrue\n' },
        origin: 'api',
        updatedAt: r.createdAt,
      }),
    );
  }
  const record = {
    profile: 'test',
    name: 'x',
    account: 'lab',
    user: 'alice',
    partition: 'debug',
    rawState: 'COMPLETED',
    comment: '',
    syncedAt: 1,
  };
  await h.run(
    h.db.insert(accountingJobs).values([
      { ...record, jobId: 10, requestId: 'a', state: 'COMPLETED', submitTime: 100 },
      { ...record, jobId: 11, requestId: null, state: 'FAILED', submitTime: 200 },
      { ...record, jobId: 12, requestId: null, state: 'COMPLETED', submitTime: null },
    ]),
  );
}

describe.each(DIALECTS)('list queries on %s', (dialect) => {
  it('pages requests newest first with a tie-breaker, filtered by state, run and pipeline', async () => {
    const h = await histories.make(dialect);
    await seed(h);
    const first = await jobsPage(h, { limit: 2 });
    expect(first.map((r) => r.id)).toEqual(['d', 'c', 'b']);
    expect(first[0]).not.toHaveProperty('spec');
    const next = await jobsPage(h, { limit: 2, after: [2000, 'c'] });
    expect(next.map((r) => r.id)).toEqual(['b', 'a']);
    expect((await jobsPage(h, { limit: 10, states: ['running', 'failed'] })).map((r) => r.id)).toEqual(['d', 'c', 'b']);
    expect((await jobsPage(h, { limit: 10, pipeline: 'nightly' })).map((r) => r.id)).toEqual(['b']);
    expect((await jobsPage(h, { limit: 10, runId: 'run-1', states: ['running'] })).map((r) => r.id)).toEqual(['b']);
    expect((await jobsPage(h, { limit: 10, createdSince: 2000, createdUntil: 3000 })).map((r) => r.id)).toEqual([
      'c',
      'b',
    ]);
    // The same shapes again: the prepared statements are reused, with the new values.
    expect((await jobsPage(h, { limit: 10, states: ['completed', 'failed'] })).map((r) => r.id)).toEqual(['d', 'a']);
  });

  it('pages accounting records with their local state, and runs; counts requests by state', async () => {
    const h = await histories.make(dialect);
    await seed(h);
    const page = await accountingHistory(h, { limit: 10 });
    expect(page.map((r) => [r.accounting.jobId, r.localState])).toEqual([
      [11, null],
      [10, 'completed'],
      [12, null],
    ]);
    expect(
      (await accountingHistory(h, { limit: 10, after: [100, 10, 'test'] })).map((r) => r.accounting.jobId),
    ).toEqual([12]);
    expect(
      (await accountingHistory(h, { limit: 10, external: true, states: ['COMPLETED'] })).map((r) => r.accounting.jobId),
    ).toEqual([12]);
    // The UI's filters, and the CLI's flat rows: the same query.
    expect((await accountingHistory(h, { limit: 10, account: 'lab', pipeline: 'nightly' })).length).toBe(0);
    expect(
      (await accountingHistory(h, { limit: 10, account: 'lab', untilSec: 150 })).map((r) => r.accounting.jobId),
    ).toEqual([10]);
    expect((await history(h)).map((r) => [r.jobId, r.external, r.localState])).toEqual([
      [11, true, null],
      [10, false, 'completed'],
      [12, true, null],
    ]);
    expect((await runsPage(h, { limit: 10, pipeline: 'nightly', states: ['running'] })).map((r) => r.id)).toEqual([
      'run-1',
    ]);
    const counts = await requestCountsByState(h);
    expect(counts.sort((x, y) => x.state.localeCompare(y.state))).toEqual([
      { state: 'completed', count: 1 },
      { state: 'failed', count: 1 },
      { state: 'running', count: 2 },
    ]);
  });
});
