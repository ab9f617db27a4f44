import { type Column, type Placeholder, sql } from 'drizzle-orm';
import type { Db } from './database.js';

/**
 * Statements prepared once per connection and reused. Building the same query with drizzle
 * and having SQLite prepare it again on every call was most of what a submission cost the
 * daemon (a profile, issue 14: 37 % building, 13 % preparing), and most of a mass end.
 *
 * The cache is the connection's: drizzle hands a transaction the session of the database it
 * runs on, so a statement prepared through either serves both (a prepared statement is bound
 * to the SQLite connection, which a transaction shares).
 */
const caches = new WeakMap<object, Map<string, unknown>>();

/** Kinds of statement a connection keeps at most; past it they are prepared for the one call. */
const MAX_PER_CONNECTION = 256;

export function prepared<T>(db: Db, key: string, build: () => T): T {
  const connection = sessionOf(db);
  let cache = caches.get(connection);
  if (!cache) {
    cache = new Map();
    caches.set(connection, cache);
  }
  const hit = cache.get(key) as T | undefined;
  if (hit !== undefined) return hit;
  const statement = build();
  if (cache.size < MAX_PER_CONNECTION) cache.set(key, statement);
  return statement;
}

/** The drizzle session: one per connection, shared by the database and its transactions. */
function sessionOf(db: Db): object {
  const { session } = db as unknown as { session?: object };
  if (!session) throw new Error('drizzle database without a session: cannot cache its statements');
  return session;
}

/** `{ key: placeholder(key) }` for each key: the values of a statement prepared for these columns. */
export function placeholders(keys: readonly string[]): Record<string, Placeholder> {
  return Object.fromEntries(keys.map((key) => [key, sql.placeholder(key)]));
}

/**
 * A column's value as better-sqlite3 binds it: NULL for null, else the column's mapping (JSON
 * text, 1/0 for a boolean). Drizzle's own mapping of null wrote a json column's as the text
 * 'null' and a boolean column's as 0 (false): `summarize: null`, "follow the global setting",
 * came out as "no summary".
 */
export function driverValue(column: Column, value: unknown): unknown {
  return value === null || value === undefined ? null : column.mapToDriverValue(value);
}

/**
 * The row as the table's type has it, from a better-sqlite3 row whose keys are already the
 * table's (`"sql_name" as "key"`): only the columns that map (json, boolean) are converted.
 * Drizzle's own mapping of every column of every row, and its binding of every placeholder,
 * cost about as much as SQLite's work on the statements of a submission (bench:submit).
 */
export function rowDecoder<T>(columns: Record<string, Column>): (row: Record<string, unknown>) => T {
  const mapped = Object.entries(columns).filter(
    ([, column]) => column.dataType !== 'string' && column.dataType !== 'number',
  );
  return (row) => {
    for (const [key, column] of mapped) {
      const value = row[key];
      if (value !== null && value !== undefined) row[key] = column.mapFromDriverValue(value);
    }
    return row as T;
  };
}

/** `"sql_name" as "key", …` for each column: a select whose rows come keyed as the table's type. */
export function selectList(columns: Record<string, Column>): string {
  return Object.entries(columns)
    .map(([key, column]) => `"${column.name}" as "${key}"`)
    .join(', ');
}
