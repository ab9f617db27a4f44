import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { openDatabase } from '../../../src/db/database.js';
import { createRequest, getRequest, submitLimitQueueAhead } from '../../../src/db/requests.js';
import { jobRequests } from '../../../src/db/schema.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';

/** What the prepared insert stores, read with plain SQL as the history's queries and indexes see it. */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

it('stores a missing needs or deadlines as SQL NULL, and present ones as JSON that reads back', () => {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-store-'));
  dirs.push(dir);
  const history = openDatabase(join(dir, 'history.sqlite'));
  const spec = jobSpecSchema.parse({ name: 'n', script: '#!/bin/sh\ntrue\n' });
  const base = { profile: 'default', name: 'n', spec, origin: 'api' as const, at: Date.now(), source: 'api' as const };
  createRequest(history.db, { ...base, id: 'plain' });
  createRequest(history.db, {
    ...base,
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
  expect(getRequest(reopened.db, 'plain')).toMatchObject({ needs: null, deadlines: null });
  expect(getRequest(reopened.db, 'step')).toMatchObject({
    needs: [{ step: 'a', type: 'afterok' }],
    deadlines: { startBy: 1_800_000_000_000 },
  });
  reopened.close();
});

it('puts requests accepted in the same millisecond in a submit-limit line in the order they were recorded', () => {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-store-'));
  dirs.push(dir);
  const history = openDatabase(join(dir, 'history.sqlite'));
  const spec = jobSpecSchema.parse({ name: 'n', script: '#!/bin/sh\ntrue\n' });
  const at = Date.now();
  // Ids sort the other way round from the order of acceptance, as random ids may.
  const ids = ['d', 'c', 'b', 'a'];
  for (const id of ids) {
    createRequest(history.db, { profile: 'default', name: 'n', spec, origin: 'api', at, source: 'api', id });
  }
  history.db.update(jobRequests).set({ state: 'waiting' }).run();
  const ahead = ids.map((id) => submitLimitQueueAhead(history.db, { id, profile: 'default', createdAt: at }));
  expect(ahead).toEqual([0, 1, 2, 3]);
  history.close();
});
