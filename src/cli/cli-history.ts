import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DAEMON_INFO_FILE, readDaemonInfo } from '../daemon-info.js';
import { openDatabase } from '../db/database.js';
import { type OpenedHistory, openHistory } from '../db/open-history.js';
import { ConfigError } from '../errors.js';
import { ensureOwnerOnlyDir } from '../lib/owner-only.js';
import { Secret } from '../lib/secret.js';
import { createLogger } from '../logger.js';

/**
 * The history a command of the shell reads or writes: the one the daemon of `dataDir` works on,
 * as its daemon.json says (its SQLite file, or its PostgreSQL database), else the one a start
 * would open (DATABASE_URL, else the data dir's SQLite file). Whether a command may make one is
 * decided with its data dir (src/cli/data-dir.ts), before it gets here. A
 * DATABASE_URL set in the shell alone never sends a command to another history than its
 * daemon's.
 *
 * `write`: the command writes (tokens), and may make or migrate the history; otherwise it only
 * reads, beside running daemons: SQLite read-only, and a PostgreSQL history at another
 * version's schema refused rather than migrated under them.
 */
export async function openCliHistory(dataDir: string, options: { write: boolean }): Promise<OpenedHistory> {
  const dir = resolve(dataDir);
  // stdout is the command's own; a failure to reach the database is said by its error.
  const logger = createLogger({ level: 'silent' });
  // A command that only reads needs a daemon's history (readDaemonInfo says how to get one).
  const known = options.write && !existsSync(join(dir, DAEMON_INFO_FILE)) ? null : readDaemonInfo(dir);
  const databaseUrl = known
    ? known.historyFile === null
      ? (known.historyUrl ?? process.env.DATABASE_URL?.trim())
      : undefined
    : process.env.DATABASE_URL?.trim();
  if (known?.historyFile === null && !databaseUrl) {
    throw new ConfigError(
      "the daemon's history is on PostgreSQL and its daemon.json does not say where: set DATABASE_URL here as the daemon has it",
    );
  }
  if (databaseUrl) {
    return openHistory({ dataDir: dir, databaseUrl: new Secret(databaseUrl), migrate: options.write }, logger);
  }
  if (!options.write && known?.historyFile) {
    const sqlite = openDatabase(known.historyFile, { readonly: true });
    return { store: sqlite.store, where: sqlite.file, sqlite, close: async () => sqlite.close() };
  }
  ensureOwnerOnlyDir(dir, 'data dir');
  return openHistory({ dataDir: dir }, logger);
}
