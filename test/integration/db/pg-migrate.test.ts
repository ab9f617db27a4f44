import { join } from 'node:path';
import { getTableColumns, getTableName, is } from 'drizzle-orm';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import { PgTable } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { afterAll, expect, it } from 'vitest';
import { applyPgMigrations } from '../../../src/db/pg-migrate.js';
import * as pgSchema from '../../../src/db/pg-schema.js';
import { REPO } from '../../helpers/cli-process.js';
import { testPostgres } from '../../helpers/histories.js';

const MIGRATIONS = join(REPO, 'migrations', 'postgres');

const server = testPostgres();
const pools: pg.Pool[] = [];
afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end()));
});

function pool(url: string): pg.Pool {
  const made = new pg.Pool({ connectionString: url, max: 2 });
  // A connection the server's shutdown ends is an 'error' of its pool, after the tests.
  made.on('error', () => {});
  pools.push(made);
  return made;
}

it('two hosts starting together on a new database migrate it once, and both start', async () => {
  const url = await server.createDatabase('together');
  const [first, second] = await Promise.all([
    applyPgMigrations(pool(url), MIGRATIONS),
    applyPgMigrations(pool(url), MIGRATIONS),
  ]);
  const committed = readMigrationFiles({ migrationsFolder: MIGRATIONS }).length;
  expect([first.applied, second.applied].sort()).toEqual([0, committed]);
  const { rows } = await pool(url).query('SELECT count(*)::int AS n FROM "schedflow"."__drizzle_migrations"');
  expect(rows[0].n).toBe(committed);
  // A start after an upgrade with nothing new applies nothing.
  expect(await applyPgMigrations(pool(url), MIGRATIONS)).toEqual({ applied: 0 });
});

it("keeps its bookkeeping apart from another drizzle application's in the same database", async () => {
  const url = await server.createDatabase('shared');
  // Drizzle's default bookkeeping, with a migration newer than any of ours.
  await pool(url).query(
    'CREATE SCHEMA drizzle; CREATE TABLE drizzle.__drizzle_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint); ' +
      "INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ('theirs', 9999999999999)",
  );
  const { applied } = await applyPgMigrations(pool(url), MIGRATIONS);
  expect(applied).toBe(readMigrationFiles({ migrationsFolder: MIGRATIONS }).length);
  const { rows } = await pool(url).query('SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations');
  expect(rows[0].n).toBe(1);
});

it('starts on a migrated database as a role that may not create anything there', async () => {
  const url = await server.createDatabase('restricted');
  await applyPgMigrations(pool(url), MIGRATIONS);
  await pool(url).query(
    'CREATE ROLE restricted LOGIN; GRANT USAGE ON SCHEMA schedflow TO restricted; ' +
      'GRANT SELECT ON schedflow.__drizzle_migrations TO restricted',
  );
  const asRestricted = pool(url.replace('//schedflow@', '//restricted@'));
  expect(await applyPgMigrations(asRestricted, MIGRATIONS)).toEqual({ applied: 0 });
  // What a start would have done without the check: refused.
  await expect(asRestricted.query('CREATE SCHEMA IF NOT EXISTS "schedflow"')).rejects.toThrow(/permission denied/);
});

it('makes every table and column of the schema (the migrations are regenerated with it)', async () => {
  const url = await server.createDatabase('columns');
  await applyPgMigrations(pool(url), MIGRATIONS);
  const { rows } = await pool(url).query<{ table_name: string; column_name: string; is_nullable: string }>(
    `SELECT table_name, column_name, is_nullable FROM information_schema.columns WHERE table_schema = 'schedflow' AND table_name <> '__drizzle_migrations'`,
  );
  const inDatabase = rows.map(
    (r) => `${r.table_name}.${r.column_name} ${r.is_nullable === 'NO' ? 'not null' : 'null'}`,
  );
  const inSchema = Object.values(pgSchema as Record<string, unknown>)
    .filter((value): value is PgTable => is(value, PgTable))
    .flatMap((table) =>
      Object.values(getTableColumns(table)).map(
        (column) => `${getTableName(table)}.${column.name} ${column.notNull ? 'not null' : 'null'}`,
      ),
    );
  expect(inDatabase.sort()).toEqual(inSchema.sort());
});
