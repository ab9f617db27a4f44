import { statSync } from 'node:fs';
import { getTableName, sql, type Table } from 'drizzle-orm';
import { nextTurn } from '../lib/turns.js';
import type { History } from './history.js';
import { connectionOf } from './history.js';
import { schedflow } from './pg-schema.js';

/**
 * The history's size: rows and bytes per table, the write-ahead log, free pages; and, on
 * SQLite, giving free pages back to the file system after a prune (incremental vacuum).
 * PostgreSQL's autovacuum makes the space of deleted rows reusable by itself.
 */

export interface TableSpace {
  table: string;
  rows: number;
  /** Table and indexes; null where the database cannot tell (SQLite built without dbstat). */
  bytes: number | null;
}

export interface HistorySpace {
  dialect: 'sqlite' | 'postgres';
  tables: TableSpace[];
  /** The whole database (SQLite: the file, without its log). */
  totalBytes: number;
  /** SQLite's write-ahead log file; null on PostgreSQL. */
  walBytes: number | null;
  /** Pages SQLite keeps free inside the file; null on PostgreSQL. */
  freePages: number | null;
  pageSize: number | null;
  /** SQLite's auto_vacuum mode (`none`, `full`, `incremental`); null on PostgreSQL. */
  autoVacuum: 'none' | 'full' | 'incremental' | null;
}

/** Pages given back per statement: a few milliseconds of the write lock each. */
export const VACUUM_SLICE_PAGES = 256;

const AUTO_VACUUM_MODES = ['none', 'full', 'incremental'] as const;

const num = (n: unknown): number => Number(n ?? 0);

/** Reads the space the history takes (read-only: works beside a running daemon). */
export async function historySpace(h: History, file?: string): Promise<HistorySpace> {
  // The schema's table objects, not bare names: on PostgreSQL they name schedflow's schema
  // themselves, whatever the connection's search_path (which follows the role's name).
  const tables = (Object.values(h.t) as Table[])
    .map((table) => ({ name: getTableName(table), table }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const names = tables.map((t) => t.name);
  const rows = new Map<string, number>();
  for (const { name, table } of tables) {
    rows.set(name, num((await h.rows<{ n: unknown }>(sql`select count(*) as n from ${table}`))[0]?.n));
  }
  if (h.dialect === 'postgres') {
    const sizes = await h.rows<{ name: string; bytes: unknown }>(
      sql`select c.relname as name, pg_total_relation_size(c.oid) as bytes from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = ${schedflow.schemaName} and c.relkind = 'r'`,
    );
    const bytesOf = new Map(sizes.map((s) => [s.name, num(s.bytes)]));
    const total = num(
      (await h.rows<{ bytes: unknown }>(sql`select pg_database_size(current_database()) as bytes`))[0]?.bytes,
    );
    return {
      dialect: 'postgres',
      tables: names.map((table) => ({ table, rows: rows.get(table) ?? 0, bytes: bytesOf.get(table) ?? null })),
      totalBytes: total,
      walBytes: null,
      freePages: null,
      pageSize: null,
      autoVacuum: null,
    };
  }
  const pragma = async (name: string) =>
    num(Object.values((await h.rows<Record<string, unknown>>(sql.raw(`pragma ${name}`)))[0] ?? {})[0]);
  const pageSize = await pragma('page_size');
  const pageCount = await pragma('page_count');
  const freePages = await pragma('freelist_count');
  const autoVacuum = AUTO_VACUUM_MODES[await pragma('auto_vacuum')] ?? 'none';
  let bytesOf = new Map<string, number>();
  try {
    // dbstat (when SQLite was built with it): each table's pages and those of its indexes.
    const stats = await h.rows<{ tbl: string; bytes: unknown }>(
      sql`select m.tbl_name as tbl, sum(d.pgsize) as bytes from dbstat d join sqlite_master m on m.name = d.name group by m.tbl_name`,
    );
    bytesOf = new Map(stats.map((s) => [s.tbl, num(s.bytes)]));
  } catch {
    // No dbstat: rows only, and the file's size.
  }
  let walBytes = 0;
  if (file) {
    try {
      walBytes = statSync(`${file}-wal`).size;
    } catch {
      walBytes = 0;
    }
  }
  return {
    dialect: 'sqlite',
    tables: names.map((table) => ({
      table,
      rows: rows.get(table) ?? 0,
      bytes: bytesOf.size ? (bytesOf.get(table) ?? 0) : null,
    })),
    totalBytes: pageCount * pageSize,
    walBytes,
    freePages,
    pageSize,
    autoVacuum,
  };
}

/**
 * Gives SQLite's free pages back to the file system, VACUUM_SLICE_PAGES at a time with a turn of
 * the event loop between two (a single `incremental_vacuum` of all of them holds the write lock
 * as long as they take). Only when the file is in incremental auto_vacuum mode (made so when the
 * history is made, or by `schedflow db vacuum`); elsewhere a no-op. Returns the pages given back.
 */
export async function returnFreePages(h: History, signal?: AbortSignal): Promise<number> {
  if (h.dialect !== 'sqlite') return 0;
  const connection = connectionOf(h.db);
  const mode = connection.pragma('auto_vacuum', { simple: true });
  if (mode !== 2) return 0;
  let returned = 0;
  for (;;) {
    if (signal?.aborted) return returned;
    const before = connection.pragma('freelist_count', { simple: true }) as number;
    if (before === 0) return returned;
    await nextTurn();
    // Through the history's gate: never inside another caller's open transaction.
    await h.run({ run: () => connection.prepare(`pragma incremental_vacuum(${VACUUM_SLICE_PAGES})`).run() });
    const after = connection.pragma('freelist_count', { simple: true }) as number;
    returned += before - after;
    if (after >= before) return returned;
  }
}
