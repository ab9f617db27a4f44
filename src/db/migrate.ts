import type Database from 'better-sqlite3';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { refuseNewerHistory } from './newer-history.js';

/** Drizzle's bookkeeping table: kept, so a history migrated by drizzle's own migrator reads the same. */
const MIGRATIONS_TABLE = '__drizzle_migrations';

type Migration = ReturnType<typeof readMigrationFiles>[number];

/**
 * Applies the committed migrations not yet applied, as drizzle's migrator does, but under the
 * write lock from the read that decides. Drizzle's reads which migration was last applied before
 * it begins its (deferred) transaction, so two processes of one data dir starting together both
 * saw a new history and the second failed on "table already exists" (CI, history-claim.test).
 * With one pending, BEGIN IMMEDIATE makes the second wait (busy_timeout) and read again, then
 * find them applied. With none pending (every start but the first after an upgrade) no lock is
 * taken: `schedflow tokens` opens the history beside a busy daemon. A history a newer release
 * migrated is refused (src/db/newer-history.ts), before anything is written.
 */
export function applyMigrations(sqlite: Database.Database, migrationsFolder: string): void {
  const migrations = readMigrationFiles({ migrationsFolder });
  sqlite.exec(
    `CREATE TABLE IF NOT EXISTS "${MIGRATIONS_TABLE}" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`,
  );
  const applied = sqlite.prepare(`SELECT hash, created_at FROM "${MIGRATIONS_TABLE}"`).all() as {
    hash: string;
    created_at: number | string;
  }[];
  refuseNewerHistory(
    applied.map((row) => ({ hash: row.hash, createdAt: Number(row.created_at) })),
    migrations,
    migrationsFolder,
    sqlite.name,
  );
  if (pending(sqlite, migrations).length === 0) return;
  const apply = sqlite.transaction(() => {
    const insert = sqlite.prepare(`INSERT INTO "${MIGRATIONS_TABLE}" ("hash", "created_at") VALUES (?, ?)`);
    for (const migration of pending(sqlite, migrations)) {
      // One statement per prepare, as drizzle runs them: a migration that runs here runs under drizzle-kit too.
      for (const statement of migration.sql) {
        if (statement.trim() !== '') sqlite.prepare(statement).run();
      }
      insert.run(migration.hash, migration.folderMillis);
    }
  });
  apply.immediate();
}

/** The migrations after the last one applied, compared as drizzle compares them. */
function pending(sqlite: Database.Database, migrations: readonly Migration[]): Migration[] {
  const last = sqlite.prepare(`SELECT created_at FROM "${MIGRATIONS_TABLE}" ORDER BY created_at DESC LIMIT 1`).get() as
    | { created_at: number | string }
    | undefined;
  return migrations.filter((migration) => !last || Number(last.created_at) < migration.folderMillis);
}
