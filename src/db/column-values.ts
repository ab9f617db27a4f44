import type { Column } from 'drizzle-orm';

/** Values of columns as the drivers have them, for statements and rows drizzle does not map. */

/**
 * A column's value as its driver binds it: NULL for null, else the column's mapping (JSON
 * text; 1/0 for a SQLite boolean). Drizzle's own mapping of null wrote a json column's as the text
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
