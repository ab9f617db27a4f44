import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/db/database.js';
import {
  createRequest,
  getRequest,
  submitLimitQueueAhead,
  trackedRequests,
  transitionsOf,
  updateRequest,
} from '../../../src/db/requests.js';
import { transition } from '../../../src/requests/transition.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/** The request aggregate's queries, on SQLite and on PostgreSQL. */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const histories = testHistories();
const spec = jobSpecSchema.parse({ name: 'n', script: '#!/bin/sh\ntrue\n' });
const base = {
  profile: 'default',
  name: 'n',
  spec,
  owner: 'default',
  actor: 'test',
  origin: 'api' as const,
  source: 'api' as const,
};

it('stores a missing needs or deadlines as SQL NULL, and present ones as JSON that reads back', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-store-'));
  dirs.push(dir);
  const history = openDatabase(join(dir, 'history.sqlite'));
  await createRequest(history.store, { ...base, at: Date.now(), id: 'plain' });
  await createRequest(history.store, {
    ...base,
    at: Date.now(),
    id: 'step',
    needs: [{ step: 'a', type: 'afterok' }],
    deadlines: { startBy: 1_800_000_000_000 },
  });
  history.close();

  const raw = new Database(join(dir, 'history.sqlite'), { readonly: true });
  const rows = raw
    .prepare('select id, typeof(needs) as needs, typeof(deadlines) as deadlines from job_requests order by id')
    .all();
  // The deadline check reads `deadlines is not null` on every tick: JSON 'null' would be every request.
  expect(rows).toEqual([
    { id: 'plain', needs: 'null', deadlines: 'null' },
    { id: 'step', needs: 'text', deadlines: 'text' },
  ]);
  raw.close();
  const reopened = openDatabase(join(dir, 'history.sqlite'));
  expect(await getRequest(reopened.store, 'plain')).toMatchObject({ needs: null, deadlines: null });
  expect(await getRequest(reopened.store, 'step')).toMatchObject({
    needs: [{ step: 'a', type: 'afterok' }],
    deadlines: { startBy: 1_800_000_000_000 },
  });
  reopened.close();
});

describe.each(DIALECTS)('requests on %s', (dialect) => {
  it('keeps null apart from false and JSON null, and reads back what it wrote', async () => {
    const h = await histories.make(dialect);
    await createRequest(h, { ...base, at: 1, id: 'plain', summarize: null });
    await createRequest(h, { ...base, at: 2, id: 'off', summarize: false, needs: [{ step: 'a', type: 'afterok' }] });
    expect(await getRequest(h, 'plain')).toMatchObject({ summarize: null, needs: null, spec, state: 'accepted' });
    expect(await getRequest(h, 'off')).toMatchObject({ summarize: false, needs: [{ step: 'a', type: 'afterok' }] });
    // A second create of the same id returns the first row.
    expect(await createRequest(h, { ...base, at: 3, id: 'plain', name: 'other' })).toMatchObject({ name: 'n' });
  });

  it('puts requests accepted in the same millisecond in a submit-limit line in the order they were recorded', async () => {
    const h = await histories.make(dialect);
    const at = Date.now();
    // Ids sort the other way round from the order of acceptance, as random ids may.
    const ids = ['d', 'c', 'b', 'a'];
    for (const id of ids) await createRequest(h, { ...base, at, id });
    for (const id of ids) await updateRequest(h, id, { state: 'waiting' });
    const ahead = [];
    for (const id of ids) ahead.push(await submitLimitQueueAhead(h, { id, profile: 'default', createdAt: at }));
    expect(ahead).toEqual([0, 1, 2, 3]);
  });

  // On SQLite the connections are processes of one machine, whose writes SQLite takes one at a time.
  it.skipIf(dialect === 'sqlite')(
    'moves a request once when two hosts move it from the same state at once',
    async () => {
      const h = await histories.make(dialect);
      const other = await histories.again(h);
      await createRequest(h, { ...base, at: 1, id: 'r' });
      const moves = await Promise.all([
        transition(h, 'r', { to: 'queued', source: 'api', at: 2, from: 'accepted' }),
        transition(other, 'r', { to: 'queued', source: 'submit', at: 3, from: 'accepted' }),
      ]);
      expect(moves.filter(Boolean)).toHaveLength(1);
      expect((await transitionsOf(h, 'r')).map((t) => t.toState)).toEqual(['accepted', 'queued']);
    },
  );

  it('follows every submitted, unfinished request of a profile across pages, in job id order', async () => {
    const h = await histories.make(dialect);
    const n = 4500;
    const rows = Array.from({ length: n }, (_, i) => ({
      ...base,
      id: `r${String(i).padStart(5, '0')}`,
      createdAt: i,
      updatedAt: i,
      state: i % 3 ? ('running' as const) : ('submitted' as const),
      jobId: n - i,
    }));
    for (let at = 0; at < n; at += 500) await h.run(h.db.insert(h.t.jobRequests).values(rows.slice(at, at + 500)));
    await createRequest(h, { ...base, at: 0, id: 'done' });
    await updateRequest(h, 'done', { state: 'completed', jobId: 99_999 });
    const tracked = await trackedRequests(h, 'default');
    expect(tracked).toHaveLength(n);
    expect(tracked.map((row) => row.jobId)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
  });
});
