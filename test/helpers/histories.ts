import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { type History, postgresHistory, sqliteHistory } from '../../src/db/history.js';
import { applyPgMigrations } from '../../src/db/pg-migrate.js';
import { REPO } from './cli-process.js';
import { startTestPostgres, type TestPostgres } from './postgres.js';

/**
 * A new, migrated history per call, on either dialect: for tests that run the same checks on
 * SQLite and on PostgreSQL (`describe.each(DIALECTS)`). The file's PostgreSQL server starts on
 * first use and each history is a database of its own on it; everything is removed after the
 * test (the histories) or the file (the server).
 */
export const DIALECTS = ['sqlite', 'postgres'] as const;
export type Dialect = (typeof DIALECTS)[number];

export interface TestHistories {
  /** A new, empty, migrated history. */
  make(dialect: Dialect): Promise<History>;
  /** The same history through a connection of its own, as another process (or host) has it. */
  again(history: History): Promise<History>;
}

export function testHistories(): TestHistories {
  let server: Promise<TestPostgres> | undefined;
  let made = 0;
  const cleanups: (() => Promise<void> | void)[] = [];
  const reopen = new Map<History, () => Promise<History>>();
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    reopen.clear();
  });
  afterAll(async () => {
    await (await server)?.stop();
  });
  const sqlite = (file: string) => {
    const opened = openDatabase(file);
    cleanups.push(() => opened.close());
    const history = sqliteHistory(opened.db);
    reopen.set(history, async () => sqlite(file));
    return history;
  };
  const postgres = async (url: string, migrate: boolean) => {
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    pool.on('error', () => {});
    cleanups.push(() => pool.end());
    if (migrate) await applyPgMigrations(pool, join(REPO, 'migrations', 'postgres'));
    const history = postgresHistory(pool);
    reopen.set(history, () => postgres(url, false));
    return history;
  };
  return {
    async make(dialect) {
      if (dialect === 'sqlite') {
        const dir = mkdtempSync(join(tmpdir(), 'schedflow-history-'));
        cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
        return sqlite(join(dir, 'history.sqlite'));
      }
      server ??= startTestPostgres();
      return postgres(await (await server).createDatabase(`history_${++made}`), true);
    },
    again(history) {
      const open = reopen.get(history);
      if (!open) throw new Error("not a history of this file's tests");
      return open();
    },
  };
}
