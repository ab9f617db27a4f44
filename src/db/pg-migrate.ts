import { readMigrationFiles } from 'drizzle-orm/migrator';
import type { Pool, PoolClient } from 'pg';
import { refuseNewerHistory } from './newer-history.js';

/**
 * Drizzle's bookkeeping table, in schedflow's own schema rather than drizzle's default
 * "drizzle" one: a database shared with another drizzle application must not mix their
 * migrations (theirs applied would read as ours). The table is the one drizzle's migrator
 * keeps, so `migrationsSchema: 'schedflow'` lets drizzle-kit read it too. The first migration
 * creates the schema IF NOT EXISTS (hand-edited): the bookkeeping table is made in it first.
 */
const MIGRATIONS_TABLE = '"schedflow"."__drizzle_migrations"';

/**
 * Held by the transaction that migrates: hosts starting together take turns, and the second
 * finds the first one's migrations applied. A key of schedflow's own, unlikely to be another
 * application's advisory lock in the same database.
 */
const MIGRATE_LOCK = 0x5c4edf10;

type Migration = ReturnType<typeof readMigrationFiles>[number];

/**
 * Applies the committed PostgreSQL migrations not yet applied, in one transaction under an
 * advisory lock taken before it reads what was applied. Drizzle's own migrator reads first, so
 * two hosts starting together on a new database both created the bookkeeping schema, and one
 * failed (a duplicate key in pg_namespace). With nothing pending (every start but the first
 * after an upgrade) it takes no lock and changes nothing, so a role without CREATE rights on a
 * migrated database starts. A history a newer release migrated is refused first
 * (src/db/newer-history.ts): HistoryNewerError.
 */
export async function applyPgMigrations(
  pool: Pool,
  migrationsFolder: string,
  /** The database, for the message refusing a history a newer release migrated. */
  where = 'the PostgreSQL database',
): Promise<{ applied: number }> {
  const migrations = readMigrationFiles({ migrationsFolder });
  const client = await pool.connect();
  try {
    await refuseNewer(client, migrations, migrationsFolder, where);
    if ((await pending(client, migrations)).length === 0) return { applied: 0 };
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATE_LOCK]);
      await client.query('CREATE SCHEMA IF NOT EXISTS "schedflow"');
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`,
      );
      const toApply = await pending(client, migrations);
      for (const migration of toApply) {
        for (const statement of migration.sql) {
          if (statement.trim() !== '') await client.query(statement);
        }
        await client.query(`INSERT INTO ${MIGRATIONS_TABLE} ("hash", "created_at") VALUES ($1, $2)`, [
          migration.hash,
          migration.folderMillis,
        ]);
      }
      await client.query('COMMIT');
      return { applied: toApply.length };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  } finally {
    client.release();
  }
}

/** How many committed migrations the database has not applied: 0 when it is at this version's schema. */
export async function pendingPgMigrations(
  pool: Pool,
  migrationsFolder: string,
  where = 'the PostgreSQL database',
): Promise<number> {
  const client = await pool.connect();
  try {
    const migrations = readMigrationFiles({ migrationsFolder });
    await refuseNewer(client, migrations, migrationsFolder, where);
    return (await pending(client, migrations)).length;
  } finally {
    client.release();
  }
}

/** Throws HistoryNewerError when the database has a migration not among `migrations`. */
async function refuseNewer(
  client: PoolClient,
  migrations: readonly Migration[],
  migrationsFolder: string,
  where: string,
): Promise<void> {
  const exists = await client.query<{ table: string | null }>('SELECT to_regclass($1) AS "table"', [MIGRATIONS_TABLE]);
  if (exists.rows[0]?.table == null) return;
  const applied = await client.query<{ hash: string; created_at: string }>(
    `SELECT hash, created_at FROM ${MIGRATIONS_TABLE}`,
  );
  refuseNewerHistory(
    applied.rows.map((row) => ({ hash: row.hash, createdAt: Number(row.created_at) })),
    migrations,
    migrationsFolder,
    where,
  );
}

/** The migrations after the last one applied, compared as drizzle compares them. */
async function pending(client: PoolClient, migrations: readonly Migration[]): Promise<Migration[]> {
  const exists = await client.query<{ table: string | null }>('SELECT to_regclass($1) AS "table"', [MIGRATIONS_TABLE]);
  if (exists.rows[0]?.table == null) return [...migrations];
  const last = await client.query<{ created_at: string }>(
    `SELECT created_at FROM ${MIGRATIONS_TABLE} ORDER BY created_at DESC LIMIT 1`,
  );
  const lastAt = last.rows[0] === undefined ? null : Number(last.rows[0].created_at);
  return migrations.filter((migration) => lastAt === null || lastAt < migration.folderMillis);
}
