import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { type BetterSQLite3Database, drizzle } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { packageRoot } from '../lib/package-info.js';
import * as schema from './schema.js';

export type Db = BetterSQLite3Database<typeof schema>;

export interface HistoryDatabase {
  db: Db;
  file: string;
  close(): void;
}

/**
 * Opens the history database and applies the committed migrations. WAL lets
 * readers (the CLI, the web UI) read while a writer writes; writers take turns.
 */
export function openDatabase(file: string, options: { readonly?: boolean } = {}): HistoryDatabase {
  if (!options.readonly) {
    mkdirSync(dirname(file), { recursive: true });
    ownerOnlyDatabase(file);
  }
  const sqlite = new Database(file, { readonly: options.readonly ?? false, fileMustExist: options.readonly ?? false });
  sqlite.pragma('busy_timeout = 5000');
  if (!options.readonly) {
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma('foreign_keys = ON');
  }
  const db = drizzle(sqlite, { schema });
  // Every transaction here writes. A deferred one that reads first cannot wait for another
  // process's write (SQLite answers "database is locked" at once rather than risk a deadlock),
  // so with roles in separate processes each transaction takes the write lock as it begins,
  // where busy_timeout applies.
  if (!options.readonly) {
    const transaction = db.transaction.bind(db);
    db.transaction = ((fn, config) => transaction(fn, { behavior: 'immediate', ...config })) as Db['transaction'];
    migrate(db, { migrationsFolder: join(packageRoot(), 'migrations') });
  }
  return {
    db,
    file,
    close: () => {
      if (sqlite.open) sqlite.close();
    },
  };
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
