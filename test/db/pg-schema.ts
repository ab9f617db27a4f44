import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Column, getTableColumns, is, SQL, StringChunk } from 'drizzle-orm';
import { getTableConfig, type SQLiteColumn, SQLiteInteger, SQLiteTable } from 'drizzle-orm/sqlite-core';
import * as schema from '../../src/db/schema.js';

/**
 * src/db/pg-schema.ts, the history's tables for PostgreSQL, generated from the SQLite schema
 * (src/db/schema.ts), the one source of truth: `npm run db:generate` writes it (and both
 * dialects' migrations from the two), test/unit/pg-schema.test.ts fails when the committed file
 * differs. Without `--write` this prints whether the file is current.
 *
 * Each column keeps its SQL name, nullability, default, key and uniqueness, and its TypeScript
 * type (the SQLite row's, so a row reads the same from either database). Types change where
 * PostgreSQL has its own: integers are `bigint` (times are Unix milliseconds, past int4), read
 * as numbers; booleans are `boolean`, JSON is `jsonb` (`json` where kept verbatim), reals `double precision`.
 */

export const PG_SCHEMA_FILE = fileURLToPath(new URL('../../src/db/pg-schema.ts', import.meta.url));

const BIOME = fileURLToPath(new URL('../../node_modules/.bin/biome', import.meta.url));

const HEADER = `// Generated from src/db/schema.ts by \`npm run db:generate\` (test/db/pg-schema.ts): edit that
// schema, not this file. The history's tables for PostgreSQL, column for column.
import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  doublePrecision,
  index,
  json,
  jsonb,
  pgSchema,
  primaryKey,
  text,
  uniqueIndex,
} from 'drizzle-orm/pg-core';
import type * as sqlite from './schema.js';

/** schedflow's own schema: a database shared with other applications keeps their tables apart. */
export const schedflow = pgSchema('schedflow');

/**
 * A column's type as the SQLite schema's row has it, without its null (nullability is the
 * column's own); JSON of no declared type stays unknown.
 */
type Of<T extends { $inferSelect: object }, K extends keyof T['$inferSelect']> = unknown extends T['$inferSelect'][K]
  ? unknown
  : NonNullable<T['$inferSelect'][K]>;
`;

/** SQL defaults in SQLite's words, as PostgreSQL says them. */
const SQL_DEFAULTS: Record<string, string> = {
  '(unixepoch() * 1000)': '(extract(epoch from now()) * 1000)::bigint',
};

function sqlText(value: SQL): string {
  return value.queryChunks
    .map((chunk) => {
      if (!is(chunk, StringChunk)) throw new Error(`pg-schema: only plain SQL text is translated, found ${chunk}`);
      return chunk.value.join('');
    })
    .join('');
}

function literal(value: unknown): string {
  if (is(value, SQL)) {
    const text = sqlText(value);
    const pg = SQL_DEFAULTS[text];
    if (pg === undefined)
      throw new Error(`pg-schema: no PostgreSQL form for the default ${text}; add it to SQL_DEFAULTS`);
    return `sql\`${pg}\``;
  }
  return JSON.stringify(value);
}

/**
 * JSON kept as it was given, as `json` rather than `jsonb`: an answer replayed for an
 * Idempotency-Key is the first answer, its members in their order, and may hold any text
 * (jsonb reorders keys and refuses `\u0000` in strings).
 */
const VERBATIM_JSON = new Set(['idempotency_keys.response']);

function columnBuilder(column: SQLiteColumn, table: string): string {
  const name = JSON.stringify(column.name);
  switch (column.columnType) {
    case 'SQLiteText':
      return `text(${name})`;
    case 'SQLiteTextJson':
      return VERBATIM_JSON.has(`${table}.${column.name}`) ? `json(${name})` : `jsonb(${name})`;
    case 'SQLiteInteger':
      return `bigint(${name}, { mode: 'number' })`;
    case 'SQLiteBoolean':
      return `boolean(${name})`;
    case 'SQLiteReal':
      return `doublePrecision(${name})`;
    default:
      throw new Error(`pg-schema: no PostgreSQL type for ${column.columnType} (${column.name})`);
  }
}

/** What the generator does not translate fails it, rather than go missing from PostgreSQL's tables. */
function untranslated(what: string, table: string): never {
  throw new Error(`pg-schema: ${what} (table ${table}) is not translated; teach test/db/pg-schema.ts to write it`);
}

function tableSource(exportName: string, table: SQLiteTable, exportOf: Map<string, string>): string {
  const config = getTableConfig(table);
  if (config.uniqueConstraints.length > 0) untranslated('a table-level unique constraint', config.name);
  if (config.checks.length > 0) untranslated('a check constraint', config.name);
  const keyOf = new Map(Object.entries(getTableColumns(table)).map(([key, column]) => [column.name, key]));
  const columnKey = (column: unknown): string => {
    const key = is(column, Column) ? keyOf.get(column.name) : undefined;
    return key ?? untranslated('an index on an expression', config.name);
  };
  const references = new Map(
    config.foreignKeys.map((foreignKey) => {
      const ref = foreignKey.reference();
      if (ref.columns.length !== 1) untranslated('a composite foreign key', config.name);
      if (foreignKey.onUpdate !== undefined && foreignKey.onUpdate !== 'no action') {
        untranslated('a foreign key ON UPDATE', config.name);
      }
      const target = exportOf.get(getTableConfig(ref.foreignTable).name);
      const targetKey = Object.entries(getTableColumns(ref.foreignTable)).find(
        ([, column]) => column.name === ref.foreignColumns[0]?.name,
      )?.[0];
      const onDelete = foreignKey.onDelete ? `, { onDelete: '${foreignKey.onDelete}' }` : '';
      return [ref.columns[0]?.name, `.references(() => ${target}.${targetKey}${onDelete})`] as const;
    }),
  );
  const columns = config.columns.map((column) => {
    const key = keyOf.get(column.name) as string;
    let chain = columnBuilder(column, config.name);
    if (column.primary) chain += '.primaryKey()';
    if (is(column, SQLiteInteger) && column.primary && column.autoIncrement) chain += '.generatedByDefaultAsIdentity()';
    if (column.notNull && !column.primary) chain += '.notNull()';
    if (column.defaultFn !== undefined || column.onUpdateFn !== undefined || column.generated !== undefined) {
      untranslated(`a default, update or generated function of ${column.name}`, config.name);
    }
    if (column.hasDefault && column.default !== undefined) chain += `.default(${literal(column.default)})`;
    if (column.isUnique) chain += `.unique(${JSON.stringify(column.uniqueName)})`;
    chain += references.get(column.name) ?? '';
    chain += `.$type<Of<typeof sqlite.${exportName}, '${key}'>>()`;
    return `    ${key}: ${chain},`;
  });
  const extras = [
    ...config.primaryKeys.map(
      (pk) => `primaryKey({ columns: [${pk.columns.map((c) => `t.${columnKey(c)}`).join(', ')}] })`,
    ),
    ...config.indexes.map(({ config: index }) => {
      const columns = index.columns.map((c) => `t.${columnKey(c)}`).join(', ');
      const where = index.where ? `.where(sql\`${sqlText(index.where)}\`)` : '';
      return `${index.unique ? 'uniqueIndex' : 'index'}(${JSON.stringify(index.name)}).on(${columns})${where}`;
    }),
  ];
  const extraSource = extras.length > 0 ? `,\n  (t) => [\n${extras.map((e) => `    ${e},`).join('\n')}\n  ]` : '';
  return `export const ${exportName} = schedflow.table(\n  ${JSON.stringify(config.name)},\n  {\n${columns.join('\n')}\n  }${extraSource},\n);\n`;
}

/** The generated file's text, formatted as the repository's code is (biome). */
export function pgSchemaSource(): string {
  // By name: a module namespace's order is not the same under Node and Vitest.
  const tables = Object.entries(schema as Record<string, unknown>)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .filter((entry): entry is [string, SQLiteTable] => is(entry[1], SQLiteTable));
  const exportOf = new Map(tables.map(([name, table]) => [getTableConfig(table).name, name]));
  const source = [HEADER, ...tables.map(([name, table]) => tableSource(name, table, exportOf))].join('\n');
  return execFileSync(BIOME, ['format', `--stdin-file-path=${PG_SCHEMA_FILE}`], { input: source, encoding: 'utf8' });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const source = pgSchemaSource();
  if (process.argv.includes('--write')) {
    writeFileSync(PG_SCHEMA_FILE, source);
  } else if (readFileSync(PG_SCHEMA_FILE, 'utf8') !== source) {
    process.stderr.write('src/db/pg-schema.ts is out of date: npm run db:generate\n');
    process.exit(1);
  }
}
