import { getTableColumns, getTableName, is, type Table } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { getTableConfig, SQLiteInteger, SQLiteTable } from 'drizzle-orm/sqlite-core';
import type { Pool } from 'pg';
import { ConfigError } from '../errors.js';
import { rowDecoder, selectList } from './column-values.js';
import { connectionOf, type Db } from './database.js';
import { applyPgMigrations } from './pg-migrate.js';
import * as pgSchema from './pg-schema.js';
import * as schema from './schema.js';

/**
 * Copies a SQLite history into a PostgreSQL database, table by table, row for row: the
 * PostgreSQL tables are generated from the same schema (src/db/pg-schema.ts), with the same
 * row types, so a row read from one is written to the other as it is.
 */

export interface CopyProgress {
  table: string;
  copied: number;
  total: number;
}

/** Parameters per INSERT, under PostgreSQL's limit of 65,535. */
const MAX_PARAMETERS = 60_000;

/** Each SQLite table and its PostgreSQL twin; tables others reference come first. */
function tablePairs(): { name: string; sqlite: SQLiteTable; postgres: Table }[] {
  const postgres = pgSchema as unknown as Record<string, Table>;
  const pairs = Object.entries(schema as Record<string, unknown>)
    .filter((entry): entry is [string, SQLiteTable] => is(entry[1], SQLiteTable))
    .map(([key, sqlite]) => ({ name: getTableName(sqlite), sqlite, postgres: postgres[key] as Table }));
  const references = (table: SQLiteTable) => getTableConfig(table).foreignKeys.length;
  return pairs.sort((a, b) => references(a.sqlite) - references(b.sqlite));
}

/**
 * Copies every row of `db` (opened read-only: it is read in one transaction, a consistent
 * snapshot even beside a running daemon) into the database `pool` reaches, after applying its
 * migrations, in one PostgreSQL transaction: a copy that fails leaves nothing behind. Refused
 * when the PostgreSQL history has rows already (a second copy, or a database in use). Identity
 * columns continue after the copied ids. Returns the rows copied per table.
 */
export async function copyHistoryToPostgres(
  db: Db,
  pool: Pool,
  migrationsFolder: string,
  onProgress: (progress: CopyProgress) => void = () => {},
): Promise<Record<string, number>> {
  await applyPgMigrations(pool, migrationsFolder);
  const sqlite = connectionOf(db);
  const client = await pool.connect();
  const copied: Record<string, number> = {};
  try {
    await client.query('BEGIN');
    sqlite.exec('BEGIN');
    try {
      const target = drizzle(client);
      const tables = tablePairs();
      for (const { name } of tables) {
        const { rows } = await client.query(`SELECT 1 FROM "schedflow"."${name}" LIMIT 1`);
        if (rows.length > 0) {
          throw new ConfigError(
            `the PostgreSQL history is not empty (table ${name} has rows): copy into a new database`,
          );
        }
      }
      for (const { name, sqlite: table, postgres } of tables) {
        const columns = getTableColumns(table);
        const total = (sqlite.prepare(`SELECT count(*) AS n FROM "${name}"`).get() as { n: number }).n;
        const decode = rowDecoder<Record<string, unknown>>(columns);
        // A page is one INSERT: PostgreSQL binds at most 65,535 parameters a statement.
        const perPage = Math.max(1, Math.floor(MAX_PARAMETERS / Object.keys(columns).length));
        // Pages by rowid, so a large history is never held whole.
        const page = sqlite.prepare(
          `SELECT rowid AS "__rowid", ${selectList(columns)} FROM "${name}" WHERE rowid > ? ORDER BY rowid LIMIT ?`,
        );
        let after = -Infinity;
        let done = 0;
        for (;;) {
          const rows = page.all(after, perPage) as ({ __rowid: number } & Record<string, unknown>)[];
          if (rows.length === 0) break;
          after = (rows.at(-1) as { __rowid: number }).__rowid;
          await target.insert(postgres).values(rows.map(({ __rowid, ...row }) => decode(row)));
          done += rows.length;
          onProgress({ table: name, copied: done, total });
        }
        copied[name] = done;
      }
      await continueIdentities(client, tables);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      if (sqlite.inTransaction) sqlite.exec('COMMIT');
    }
  } finally {
    client.release();
  }
  return copied;
}

/** Identity columns (a transition's id, a deadline miss's) go on after the largest id copied. */
async function continueIdentities(
  client: { query(text: string): Promise<unknown> },
  tables: ReturnType<typeof tablePairs>,
): Promise<void> {
  for (const { name, sqlite } of tables) {
    for (const column of getTableConfig(sqlite).columns) {
      if (!(is(column, SQLiteInteger) && column.autoIncrement)) continue;
      await client.query(
        `SELECT setval(pg_get_serial_sequence('"schedflow"."${name}"', '${column.name}'), ` +
          `coalesce((SELECT max("${column.name}") FROM "schedflow"."${name}"), 0) + 1, false)`,
      );
    }
  }
}
