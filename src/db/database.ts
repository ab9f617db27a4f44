import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { TransactionRollbackError } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { packageRoot } from '../lib/package-info.js';
import { connectionOf, type Db, type History, sqliteHistory } from './history.js';
import { applyMigrations } from './migrate.js';
import * as schema from './schema.js';

// Defined beside the history handle, which cannot import this module (it imports the handle).
export { connectionOf, type Db };

type Transaction = Parameters<Parameters<Db['transaction']>[0]>[0];

export interface HistoryDatabase {
  db: Db;
  /** The same history, as the code that runs on SQLite and PostgreSQL alike reads and writes it. */
  store: History;
  file: string;
  close(): void;
}

/**
 * Opens the history database and applies the committed migrations. WAL lets
 * readers (the CLI, the web UI) read while a writer writes; writers take turns.
 */
export function openDatabase(
  file: string,
  options: {
    readonly?: boolean;
    /**
     * Whether an existing file may be switched to incremental auto_vacuum here (one VACUUM);
     * false when another process of the data dir runs (the VACUUM would hold the write lock
     * for the whole rewrite, stalling it). Default true.
     */
    vacuumAtOpen?: boolean;
  } = {},
): HistoryDatabase {
  if (!options.readonly) {
    mkdirSync(dirname(file), { recursive: true });
    ownerOnlyDatabase(file);
  }
  const sqlite = new Database(file, { readonly: options.readonly ?? false, fileMustExist: options.readonly ?? false });
  sqlite.pragma('busy_timeout = 5000');
  if (!options.readonly) {
    incrementalVacuum(sqlite, options.vacuumAtOpen ?? true);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma('foreign_keys = ON');
    // Savepoints (each acceptance, each state change in a shared commit) keep the pages they
    // change in a sub-journal, a temporary file by default: a write call per page, which made a
    // savepoint's writes cost twice what they cost without one (issue 14). In memory instead.
    sqlite.pragma('temp_store = MEMORY');
  }
  const db = drizzle(sqlite, { schema });
  if (!options.readonly) {
    db.transaction = cheapTransactions(sqlite, db);
    applyMigrations(sqlite, join(packageRoot(), 'migrations', 'sqlite'));
  }
  return {
    db,
    store: sqliteHistory(db),
    file,
    close: () => {
      if (sqlite.open) sqlite.close();
    },
  };
}

/**
 * `db.transaction` at the cost of its BEGIN and COMMIT. Drizzle's own builds a transaction
 * object (a relational query builder per table) and better-sqlite3 a wrapper function for each
 * call, and a nested one prepares its SAVEPOINT and RELEASE again every time: together most of
 * what a transaction cost beyond its statements (a profile of bench:submit, issue 14). Here one
 * better-sqlite3 transaction function, made once, runs them all (a nested one as a savepoint,
 * a rollback on a throw, a promise refused), and the callback's `tx` is the database itself:
 * the connection is one, so a statement run through either is in the transaction.
 *
 * Every transaction here writes. A deferred one that reads first cannot wait for another
 * process's write (SQLite answers "database is locked" at once rather than risk a deadlock),
 * so with roles in separate processes each transaction takes the write lock as it begins,
 * where busy_timeout applies.
 */
function cheapTransactions(sqlite: Database.Database, db: Db): Db['transaction'] {
  // `tx.rollback()` as drizzle has it: a throw that undoes the transaction (or its savepoint).
  const tx = Object.assign(Object.create(db) as Db, {
    rollback: () => {
      throw new TransactionRollbackError();
    },
  }) as unknown as Transaction;
  const run = sqlite.transaction((fn: (tx: Transaction) => unknown) => fn(tx));
  return ((fn, config) => run[config?.behavior ?? 'immediate'](fn)) as Db['transaction'];
}

/**
 * The history file, made 0600 before SQLite opens it (SQLite makes a new one 0644 less
 * the umask). SQLite gives the -wal and -shm files it makes the database file's mode, so
 * they follow; ones left by an older version are tightened here too.
 */
function ownerOnlyDatabase(file: string): void {
  closeSync(openSync(file, 'a', 0o600));
  for (const path of [file, `${file}-wal`, `${file}-shm`]) if (existsSync(path)) chmodSync(path, 0o600);
}

/**
 * Files up to this size are switched to incremental auto_vacuum at open, by the one VACUUM the
 * switch needs (a second or so); a larger one stays as it is until `schedflow db vacuum`.
 */
export const VACUUM_AT_OPEN_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Incremental auto_vacuum, so the pruner can give the pages of removed rows back to the file
 * system (src/db/history-space.ts). The mode is set before the first table of a new file; an
 * existing file needs a VACUUM to switch, done here while it is small and `vacuum` says no
 * other process of the data dir runs: in WAL mode a VACUUM waits for the write lock (up to
 * busy_timeout) and then holds it for the whole rewrite. Else the file stays as it is, and is
 * switched at a start alone or by `schedflow db vacuum`.
 */
function incrementalVacuum(sqlite: Database.Database, vacuum: boolean): void {
  if (sqlite.pragma('auto_vacuum', { simple: true }) === 2) return;
  const pages = sqlite.pragma('page_count', { simple: true }) as number;
  if (pages === 0) {
    // A new file: the mode applies from its first table, no VACUUM needed.
    sqlite.pragma('auto_vacuum = INCREMENTAL');
    return;
  }
  if (!vacuum) return;
  const bytes = pages * (sqlite.pragma('page_size', { simple: true }) as number);
  if (bytes > VACUUM_AT_OPEN_MAX_BYTES) return;
  sqlite.pragma('auto_vacuum = INCREMENTAL');
  try {
    sqlite.exec('VACUUM');
  } catch {
    // Busy all along (a process not registered yet, a command writing): switched at a later start.
  }
}

/** Rewrites the whole file in incremental auto_vacuum mode, its free pages given back (`schedflow db vacuum`). */
export function vacuumDatabase(file: string): { beforeBytes: number; afterBytes: number } {
  const sqlite = new Database(file, { fileMustExist: true });
  try {
    sqlite.pragma('busy_timeout = 5000');
    const size = () =>
      (sqlite.pragma('page_count', { simple: true }) as number) *
      (sqlite.pragma('page_size', { simple: true }) as number);
    const beforeBytes = size();
    sqlite.pragma('auto_vacuum = INCREMENTAL');
    sqlite.exec('VACUUM');
    sqlite.pragma('wal_checkpoint(TRUNCATE)');
    return { beforeBytes, afterBytes: size() };
  } finally {
    sqlite.close();
  }
}
