import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { connectionOf, openDatabase } from '../../../src/db/database.js';
import { createRequest, patchRequest } from '../../../src/db/requests.js';
import { inSharedCommit } from '../../../src/db/shared-commit.js';

/** Writes asked for in one turn share a commit; each caller is answered once it is on disk, a throw undoes its own. */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

it('commits the writes of one turn together; one that throws is undone alone and rejects its caller', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-shared-commit-'));
  dirs.push(dir);
  const file = join(dir, 'history.sqlite');
  const history = openDatabase(file);
  const at = Date.now();
  const base = {
    profile: 'default',
    name: 'n',
    spec: {},
    owner: 'default',
    actor: 'test',
    origin: 'api' as const,
    at,
    source: 'api' as const,
  };
  for (const id of ['a', 'b', 'c']) await createRequest(history.store, { ...base, id });
  // Another connection, as the CLI or a test harness reads the file: it sees only what is committed.
  const reader = new Database(file, { readonly: true });
  const errorOf = (id: string) =>
    (reader.prepare('select error_message as m from job_requests where id = ?').get(id) as { m: string | null }).m;
  try {
    const write = (id: string, fail = false) =>
      inSharedCommit(history.store, async (tx) => {
        await patchRequest(tx, id, { errorMessage: `written ${id}` });
        if (fail) throw new Error(`refused ${id}`);
        return id;
      }).then((value) => {
        // Answered after the commit: the other connection reads it.
        expect(errorOf(id)).toBe(`written ${id}`);
        return value;
      });
    const outcomes = await Promise.allSettled([write('a'), write('b', true), write('c')]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason.message).toBe('refused b');
    expect(errorOf('b')).toBeNull();
    // Each one's savepoint keeps the pages it changes in memory, not in a temporary file.
    const connection = connectionOf(history.db);
    expect(connection.pragma('temp_store', { simple: true })).toBe(2);
    // Nothing was written before the turn ended.
    const pending = inSharedCommit(history.store, (tx) => patchRequest(tx, 'b', { errorMessage: 'later' }));
    expect(errorOf('b')).toBeNull();
    await pending;
    expect(errorOf('b')).toBe('later');
  } finally {
    reader.close();
    history.close();
  }
});
