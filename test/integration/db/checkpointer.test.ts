import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { startCheckpointer } from '../../../src/db/checkpointer.js';
import { connectionOf, openDatabase } from '../../../src/db/database.js';
import { createRequest } from '../../../src/db/requests.js';
import { createLogger } from '../../../src/logger.js';
import { waitFor } from '../../helpers/http.js';

/** The history's checkpoints run in a thread of their own, never in a commit of the daemon. */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

it('copies the log into the database from its own thread; commits checkpoint again once it stops', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-checkpointer-'));
  dirs.push(dir);
  const history = openDatabase(join(dir, 'history.sqlite'));
  const connection = connectionOf(history.db);
  const checkpoints = startCheckpointer(history, createLogger({ level: 'silent' }), 20);
  try {
    expect(connection.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    const before = statSync(history.file).size;
    const base = {
      profile: 'default',
      name: 'n',
      spec: {},
      owner: 'default',
      actor: 'test',
      origin: 'api' as const,
      at: Date.now(),
      source: 'api' as const,
    };
    for (let i = 0; i < 200; i++) await createRequest(history.store, { ...base, id: `r${i}` });
    // Written to the log alone (no commit checkpoints now): the database file grows only as the
    // thread copies the log into it.
    await waitFor(async () => (statSync(history.file).size > before ? true : undefined), {
      what: 'the log to be copied into the database',
      timeoutMs: 5000,
    });
  } finally {
    await checkpoints.stop();
  }
  expect(connection.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
  history.close();
});
