import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, inject } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { type History, postgresHistory, sqliteHistory } from '../../src/db/history.js';
import { applyPgMigrations } from '../../src/db/pg-migrate.js';
import { REPO } from './cli-process.js';
import { createDatabaseAt, startTestPostgres, type TestPostgres } from './postgres.js';

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
  /**
   * The same history through a connection of its own, as another process (or host) has it;
   * `pgOptions`: the PostgreSQL session's settings (`-c search_path=public`, as for a role not
   * named schedflow).
   */
  again(history: History, pgOptions?: string): Promise<History>;
}

/**
 * Databases on the run's PostgreSQL server (test/helpers/postgres-server.ts), or on a server of
 * the file's own where the run has none (a project without that globalSetup): each new
 * database has a name of its own, so files side by side never share one.
 */
export function testPostgres(): { createDatabase(prefix: string): Promise<string> } {
  let own: Promise<TestPostgres> | undefined;
  afterAll(async () => {
    await (await own)?.stop();
  });
  const shared = (() => {
    try {
      return inject('postgresUrl');
    } catch {
      return undefined;
    }
  })();
  return {
    async createDatabase(prefix) {
      const name = `${prefix}_${randomBytes(6).toString('hex')}`;
      if (!shared) {
        own ??= startTestPostgres();
        return (await own).createDatabase(name);
      }
      const admin = new pg.Client({ connectionString: shared });
      await admin.connect();
      try {
        return await createDatabaseAt(admin, shared, name);
      } finally {
        await admin.end();
      }
    },
  };
}

/** A new, empty database on the run's PostgreSQL server (left for the server's end); its URL. */
export async function newTestDatabase(prefix: string): Promise<string> {
  const server = inject('postgresUrl');
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  try {
    return await createDatabaseAt(admin, server, `${prefix}_${randomBytes(6).toString('hex')}`);
  } finally {
    await admin.end();
  }
}

export function testHistories(): TestHistories {
  const server = testPostgres();
  const cleanups: (() => Promise<void> | void)[] = [];
  const reopen = new Map<History, (pgOptions?: string) => Promise<History>>();
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    reopen.clear();
  });
  const sqlite = (file: string) => {
    const opened = openDatabase(file);
    cleanups.push(() => opened.close());
    const history = sqliteHistory(opened.db);
    reopen.set(history, async () => sqlite(file));
    return history;
  };
  const postgres = async (url: string, migrate: boolean, options?: string) => {
    const pool = new pg.Pool({ connectionString: url, max: 4, ...(options && { options }) });
    pool.on('error', () => {});
    cleanups.push(() => pool.end());
    if (migrate) await applyPgMigrations(pool, join(REPO, 'migrations', 'postgres'));
    const history = postgresHistory(pool);
    reopen.set(history, (options) => postgres(url, false, options));
    return history;
  };
  return {
    async make(dialect) {
      if (dialect === 'sqlite') {
        const dir = mkdtempSync(join(tmpdir(), 'schedflow-history-'));
        cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
        return sqlite(join(dir, 'history.sqlite'));
      }
      return postgres(await server.createDatabase('history'), true);
    },
    again(history, pgOptions) {
      const open = reopen.get(history);
      if (!open) throw new Error("not a history of this file's tests");
      return open(pgOptions);
    },
  };
}
