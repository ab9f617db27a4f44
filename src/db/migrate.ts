import type Database from 'better-sqlite3';
import { readMigrationFiles } from 'drizzle-orm/migrator';

/** Drizzle's bookkeeping table: kept, so a history migrated by drizzle's own migrator reads the same. */
const MIGRATIONS_TABLE = '__drizzle_migrations';

/**
 * Applies the committed migrations not yet applied, as drizzle's migrator does, but under the
 * write lock from the first read. Drizzle's reads which migration was last applied before it
 * begins its (deferred) transaction, so two processes of one data dir starting together both
 * saw a new history and the second failed on "table already exists" (CI, history-claim.test).
 * BEGIN IMMEDIATE makes the second wait (busy_timeout) and then find the migrations applied.
 */
export function applyMigrations(sqlite: Database.Database, migrationsFolder: string): void {
  const migrations = readMigrationFiles({ migrationsFolder });
  const apply = sqlite.transaction(() => {
    sqlite.exec(
      `CREATE TABLE IF NOT EXISTS "${MIGRATIONS_TABLE}" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`,
    );
    const last = sqlite
      .prepare(`SELECT created_at FROM "${MIGRATIONS_TABLE}" ORDER BY created_at DESC LIMIT 1`)
      .get() as { created_at: number | string } | undefined;
    const insert = sqlite.prepare(`INSERT INTO "${MIGRATIONS_TABLE}" ("hash", "created_at") VALUES (?, ?)`);
    for (const migration of migrations) {
      if (last && Number(last.created_at) >= migration.folderMillis) continue;
      for (const statement of migration.sql) sqlite.exec(statement);
      insert.run(migration.hash, migration.folderMillis);
    }
  });
  apply.immediate();
}
