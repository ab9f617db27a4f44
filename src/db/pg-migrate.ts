import { readMigrationFiles } from 'drizzle-orm/migrator';
import type { Pool } from 'pg';

/**
 * Drizzle's bookkeeping for PostgreSQL, where its own migrator keeps it: a history migrated
 * here reads the same to `drizzle-kit migrate`, and the other way round.
 */
const MIGRATIONS_TABLE = '"drizzle"."__drizzle_migrations"';

/**
 * Held by the transaction that migrates: hosts starting together take turns, and the second
 * finds the first one's migrations applied. A key of schedflow's own, unlikely to be another
 * application's advisory lock in the same database.
 */
const MIGRATE_LOCK = 0x5c4edf10;

/**
 * Applies the committed PostgreSQL migrations not yet applied, in one transaction under an
 * advisory lock. Drizzle's own migrator reads what was applied before it takes any lock, so two
 * hosts starting together on a new database would both try the first migration, and one would
 * fail on "relation already exists" (the same race SQLite had, src/db/migrate.ts).
 */
export async function applyPgMigrations(pool: Pool, migrationsFolder: string): Promise<{ applied: number }> {
  const migrations = readMigrationFiles({ migrationsFolder });
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATE_LOCK]);
    await client.query('CREATE SCHEMA IF NOT EXISTS "drizzle"');
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`,
    );
    const last = await client.query<{ created_at: string }>(
      `SELECT created_at FROM ${MIGRATIONS_TABLE} ORDER BY created_at DESC LIMIT 1`,
    );
    const lastAt = last.rows[0] === undefined ? null : Number(last.rows[0].created_at);
    const pending = migrations.filter((migration) => lastAt === null || lastAt < migration.folderMillis);
    for (const migration of pending) {
      for (const statement of migration.sql) {
        if (statement.trim() !== '') await client.query(statement);
      }
      await client.query(`INSERT INTO ${MIGRATIONS_TABLE} ("hash", "created_at") VALUES ($1, $2)`, [
        migration.hash,
        migration.folderMillis,
      ]);
    }
    await client.query('COMMIT');
    return { applied: pending.length };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
