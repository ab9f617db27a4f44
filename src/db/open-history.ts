import { join } from 'node:path';
import pg from 'pg';
import { ConfigError, HistoryNewerError, HistoryUnavailableError } from '../errors.js';
import { packageRoot } from '../lib/package-info.js';
import type { Secret } from '../lib/secret.js';
import type { Logger } from '../logger.js';
import { type HistoryDatabase, openDatabase } from './database.js';
import { type History, postgresHistory } from './history.js';
import { applyPgMigrations, pendingPgMigrations } from './pg-migrate.js';

/** The history a daemon process works on: SQLite in its data dir, or PostgreSQL for several hosts. */
export interface OpenedHistory {
  store: History;
  /** Where it is, for messages and `daemon.json`: the SQLite file, or the PostgreSQL URL without its password. */
  where: string;
  /** The SQLite database (its maintenance: WAL checkpoints); null on PostgreSQL. */
  sqlite: HistoryDatabase | null;
  close(): Promise<void>;
}

/** Connections of one process to a PostgreSQL history: the submit workers' in flight together, and the API's. */
const POOL_SIZE = 10;

/**
 * Bounds on waiting for PostgreSQL. A host that stops between two statements of a transaction
 * (paused, cut off) holds its row locks: its session is ended after a minute, and another
 * host's statement gives up waiting on a lock after 30 s (its job is retried) rather than
 * holding one of its pool's connections, and so its API, for as long.
 */
const CONNECT_TIMEOUT_MS = 10_000;
const SESSION_OPTIONS = '-c lock_timeout=30000 -c idle_in_transaction_session_timeout=60000';

/**
 * Opens the history: PostgreSQL when `databaseUrl` is given (migrated under a lock, so hosts
 * starting together migrate once), else `<dataDir>/history.sqlite`. With `migrate: false` (a
 * command that only reads, beside running daemons) a PostgreSQL history at another version's
 * schema is refused rather than migrated under them.
 */
export async function openHistory(
  options: {
    dataDir: string;
    databaseUrl?: Secret;
    migrate?: boolean;
    /** SQLite: whether the file may be switched to incremental auto_vacuum at open (src/db/database.ts). */
    vacuumAtOpen?: boolean;
  },
  logger: Logger,
): Promise<OpenedHistory> {
  if (!options.databaseUrl) {
    const sqlite = openDatabase(join(options.dataDir, 'history.sqlite'), { vacuumAtOpen: options.vacuumAtOpen });
    return { store: sqlite.store, where: sqlite.file, sqlite, close: async () => sqlite.close() };
  }
  const url = options.databaseUrl.reveal();
  const where = redactedUrl(url);
  const pool = new pg.Pool({
    connectionString: url,
    max: POOL_SIZE,
    application_name: 'schedflow',
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
    options: SESSION_OPTIONS,
  });
  // An idle connection the server dropped: the pool replaces it; the next query says what failed.
  pool.on('error', (error) => logger.warn({ err: error.message, history: where }, 'a PostgreSQL connection failed'));
  const migrations = join(packageRoot(), 'migrations', 'postgres');
  let behind = 0;
  try {
    if (options.migrate === false) behind = await pendingPgMigrations(pool, migrations, where);
    else {
      const { applied } = await applyPgMigrations(pool, migrations, where);
      if (applied > 0) logger.info({ applied, history: where }, 'PostgreSQL history migrated');
    }
  } catch (error) {
    await pool.end().catch(() => {});
    // Reached and read: not unavailable, and starting again will not help.
    if (error instanceof HistoryNewerError) throw error;
    throw new HistoryUnavailableError(`cannot open the history at ${where}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (behind > 0) {
    await pool.end().catch(() => {});
    throw new ConfigError(
      `the history at ${where} lacks ${behind} migration(s) of this schedflow version: start the daemon of this version (it migrates), or use the schedflow the daemons run`,
    );
  }
  return { store: postgresHistory(pool), where, sqlite: null, close: () => pool.end() };
}

/**
 * The URL as it may be shown: its password replaced, and its query left out (libpq's options
 * there may hold one too: `password`, `sslpassword`).
 */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    const query = parsed.search ? '?…' : '';
    parsed.search = '';
    return `${parsed.toString()}${query}`;
  } catch {
    return 'postgres://…';
  }
}
