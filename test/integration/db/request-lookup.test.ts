import { describe, expect, it } from 'vitest';
import type { History } from '../../../src/db/history.js';
import { requestsByAnyJobId, requestsByIdPrefix } from '../../../src/db/requests.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/**
 * The queries behind naming a request on the command line (src/cli/request-reference.ts): by
 * the start of its id, and by a Slurm job id of the request or of a task of its array, the
 * same on SQLite and on PostgreSQL.
 */

const histories = testHistories();

async function seed(h: History) {
  const { jobRequests, arrayTasks } = h.t;
  const rows = [
    { id: 'ab12-x', createdAt: 1000, jobId: 7, profile: 'test' },
    { id: 'ab13-y', createdAt: 2000, jobId: 7, profile: 'other' },
    { id: 'AB14-z', createdAt: 3000, jobId: 20, profile: 'test' },
    { id: 'c_%-w', createdAt: 4000, jobId: null, profile: 'test' },
  ];
  for (const r of rows) {
    await h.run(
      h.db.insert(jobRequests).values({
        ...r,
        name: `job-${r.id}`,
        spec: { name: r.id, script: '#!/bin/sh\ntrue\n' },
        state: 'completed',
        origin: 'api',
        updatedAt: r.createdAt,
      }),
    );
  }
  await h.run(
    h.db.insert(arrayTasks).values([
      { requestId: 'AB14-z', taskId: 0, jobId: 20, state: 'completed' },
      { requestId: 'AB14-z', taskId: 1, jobId: 21, state: 'completed' },
    ]),
  );
}

describe.each(DIALECTS)('request lookups on %s', (dialect) => {
  it('by the start of the id (exact case, no wildcards), and by a job id of the request or of an array task', async () => {
    const h = await histories.make(dialect);
    await seed(h);
    const ids = (rows: { id: string }[]) => rows.map((r) => r.id);
    expect(ids(await requestsByIdPrefix(h, 'ab1', 10))).toEqual(['ab13-y', 'ab12-x']);
    expect(ids(await requestsByIdPrefix(h, 'ab1', 1))).toEqual(['ab13-y']);
    expect(ids(await requestsByIdPrefix(h, 'ab12', 10))).toEqual(['ab12-x']);
    // LIKE would take `_` and `%` for wildcards, and SQLite's LIKE ignores case.
    expect(ids(await requestsByIdPrefix(h, 'c_', 10))).toEqual(['c_%-w']);
    expect(ids(await requestsByIdPrefix(h, 'a_', 10))).toEqual([]);
    expect(ids(await requestsByIdPrefix(h, '%', 10))).toEqual([]);
    expect(ids(await requestsByIdPrefix(h, 'AB1', 10))).toEqual(['AB14-z']);
    // Job 7 on two profiles (two clusters): both.
    expect(ids(await requestsByAnyJobId(h, 7))).toEqual(['ab13-y', 'ab12-x']);
    expect(ids(await requestsByAnyJobId(h, 20))).toEqual(['AB14-z']);
    expect(ids(await requestsByAnyJobId(h, 21))).toEqual(['AB14-z']);
    expect(ids(await requestsByAnyJobId(h, 99))).toEqual([]);
  });
});
