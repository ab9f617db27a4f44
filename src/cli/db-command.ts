import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import pg from 'pg';
import { DAEMON_INFO_FILE, readDaemonInfo } from '../daemon-info.js';
import { copyHistoryToPostgres } from '../db/copy-to-postgres.js';
import { openDatabase } from '../db/database.js';
import { redactedUrl } from '../db/open-history.js';
import { ConfigError, HistoryUnavailableError } from '../errors.js';
import { packageRoot } from '../lib/package-info.js';
import { pidAlive } from '../lib/pid-lock.js';
import { print, printError } from './terminal.js';

interface MigrateFlags {
  from: string;
  to?: string;
}

/**
 * `schedflow db`: the history's own tasks. `migrate-to-postgres` copies a SQLite history (one
 * host's data dir) into PostgreSQL, for moving from one host to several.
 */
export function registerDbCommand(program: Command): void {
  const db = program.command('db').description("the history's own tasks: move it from SQLite to PostgreSQL");
  db.command('migrate-to-postgres')
    .description(
      'copy the SQLite history of a data dir into the PostgreSQL database of DATABASE_URL (or --to), which must be new or empty; the daemon on that data dir must be stopped',
    )
    .requiredOption('--from <data dir>', 'the data dir whose history.sqlite is copied')
    .option('--to <url>', 'postgres://user:password@host:5432/database (default: DATABASE_URL)')
    .action(async (opts: MigrateFlags) => {
      const dataDir = resolve(opts.from);
      const file = join(dataDir, 'history.sqlite');
      if (!existsSync(file)) throw new ConfigError(`--from ${opts.from}: no history.sqlite in ${dataDir}`);
      refuseRunningDaemon(dataDir);
      const url = opts.to ?? process.env.DATABASE_URL?.trim();
      if (!url) throw new ConfigError('give the PostgreSQL database: set DATABASE_URL, or --to postgres://…');
      const where = redactedUrl(url);
      const sqlite = openDatabase(file, { readonly: true });
      const pool = new pg.Pool({ connectionString: url, max: 1, application_name: 'schedflow db migrate-to-postgres' });
      pool.on('error', () => {});
      try {
        let shown = '';
        const copied = await copyHistoryToPostgres(
          sqlite.db,
          pool,
          join(packageRoot(), 'migrations', 'postgres'),
          ({ table, copied: n, total }) => {
            // Progress on stderr, a line per table and per tenth of a large one.
            const line = `${table}: ${n}/${total}`;
            if (n === total || Math.floor((n * 10) / total) !== Math.floor(((n - 1) * 10) / total)) {
              if (line !== shown) printError(`${line}\n`);
              shown = line;
            }
          },
        ).catch((error: unknown) => {
          if (error instanceof ConfigError) throw error;
          throw new HistoryUnavailableError(`cannot copy into ${where}: ${(error as Error).message}`, { cause: error });
        });
        const rows = Object.values(copied).reduce((sum, n) => sum + n, 0);
        print(
          `copied ${rows} rows of ${file} into ${where}; start every role with DATABASE_URL, REDIS_URL (one Redis for every host) and SCHEDFLOW_WEBHOOK_SECRET (the key of the data dir's webhook-secret, for receivers to keep checking)\n`,
        );
      } finally {
        sqlite.close();
        await pool.end();
      }
    });
}

/**
 * A daemon still writing the history would write after the copy, and what it wrote would be
 * left behind. Its pid is in the data dir: `daemon.pid` (a private Redis's lock) or `daemon.json`.
 */
function refuseRunningDaemon(dataDir: string): void {
  const pids: number[] = [];
  const lock = join(dataDir, 'daemon.pid');
  if (existsSync(lock)) pids.push(Number(readFileSync(lock, 'utf8')));
  if (existsSync(join(dataDir, DAEMON_INFO_FILE))) pids.push(readDaemonInfo(dataDir).pid);
  const running = pids.find((pid) => pid !== process.pid && pidAlive(pid));
  if (running !== undefined) {
    throw new ConfigError(
      `a schedflow daemon (pid ${running}) is running on ${dataDir}: stop it first, or what it writes after the copy is left behind`,
    );
  }
}
