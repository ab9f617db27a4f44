import { join } from 'node:path';
import pg from 'pg';
import { HistoryUnavailableError } from '../errors.js';
import { packageRoot } from '../lib/package-info.js';
import type { Secret } from '../lib/secret.js';
import type { Logger } from '../logger.js';
import { type HistoryDatabase, openDatabase } from './database.js';
import { type History, postgresHistory } from './history.js';
import { applyPgMigrations } from './pg-migrate.js';

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
 * Opens the history: PostgreSQL when `databaseUrl` is given (migrated under a lock, so hosts
 * starting together migrate once), else `<dataDir>/history.sqlite`.
 */
export async function openHistory(
  options: { dataDir: string; databaseUrl?: Secret },
  logger: Logger,
): Promise<OpenedHistory> {
  if (!options.databaseUrl) {
    const sqlite = openDatabase(join(options.dataDir, 'history.sqlite'));
    return { store: sqlite.store, where: sqlite.file, sqlite, close: async () => sqlite.close() };
  }
  const url = options.databaseUrl.reveal();
  const where = redactedUrl(url);
  const pool = new pg.Pool({ connectionString: url, max: POOL_SIZE, application_name: 'schedflow' });
  // An idle connection the server dropped: the pool replaces it; the next query says what failed.
  pool.on('error', (error) => logger.warn({ err: error.message, history: where }, 'a PostgreSQL connection failed'));
  try {
    const { applied } = await applyPgMigrations(pool, join(packageRoot(), 'migrations', 'postgres'));
    if (applied > 0) logger.info({ applied, history: where }, 'PostgreSQL history migrated');
  } catch (error) {
    await pool.end().catch(() => {});
    throw new HistoryUnavailableError(`cannot open the history at ${where}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  return { store: postgresHistory(pool), where, sqlite: null, close: () => pool.end() };
}

/** The URL as it may be shown: its password replaced. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://…';
  }
}
