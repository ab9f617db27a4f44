import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import pg from 'pg';
import { loadDaemonConfig, retentionOf } from '../config/daemon-config.js';
import { DAEMON_INFO_FILE, readDaemonInfo } from '../daemon-info.js';
import { copyHistoryToPostgres } from '../db/copy-to-postgres.js';
import { openDatabase, vacuumDatabase } from '../db/database.js';
import { type HistorySpace, historySpace } from '../db/history-space.js';
import { redactedUrl } from '../db/open-history.js';
import { countPrunable, PRUNED_TABLES, type PruneCounts, readPruneRecord } from '../db/retention.js';
import { ConfigError, HistoryUnavailableError } from '../errors.js';
import { packageRoot } from '../lib/package-info.js';
import { pidAlive } from '../lib/pid-lock.js';
import { openCliHistory } from './cli-history.js';
import { withDaemonDataDir } from './data-dir.js';
import { formatBytes } from './format.js';
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
  const db = program
    .command('db')
    .description(
      "the history's own tasks: its size and what retention prunes next, vacuum, move it from SQLite to PostgreSQL",
    );
  withDaemonDataDir(
    db
      .command('stats')
      .description(
        "rows and bytes per table, the write-ahead log, free pages, and what the next prune removes per table (with this shell's SCHEDFLOW_RETAIN_* settings); read-only, beside a running daemon",
      )
      .option('--json', 'print JSON'),
  ).action(async (_opts: unknown, cmd: Command) => {
    const flags = cmd.optsWithGlobals() as { dataDir: string; json?: boolean };
    const config = loadDaemonConfig(process.env);
    const history = await openCliHistory(flags.dataDir, { write: false });
    try {
      const space = await historySpace(history.store, history.sqlite?.file);
      const retention = retentionOf(config);
      const nextPrune = await countPrunable(history.store, retention, Date.now());
      const lastPrune = await readPruneRecord(history.store);
      if (flags.json) {
        print(
          `${JSON.stringify({ history: history.where, ...space, retention, next_prune: nextPrune, last_prune: lastPrune }, null, 2)}\n`,
        );
        return;
      }
      print(statsText(history.where, space, nextPrune, lastPrune?.lastAt ?? null));
    } finally {
      await history.close();
    }
  });
  withDaemonDataDir(
    db
      .command('vacuum')
      .description(
        "rewrite the SQLite history compactly, in incremental auto_vacuum mode (the pruner then gives freed pages back); the daemon on that data dir must be stopped. PostgreSQL's autovacuum needs no command",
      ),
  ).action(async (_opts: unknown, cmd: Command) => {
    const { dataDir } = cmd.optsWithGlobals() as { dataDir: string };
    const file = join(dataDir, 'history.sqlite');
    if (!existsSync(file))
      throw new ConfigError(`no history.sqlite in ${dataDir} (a PostgreSQL history needs no vacuum: autovacuum)`);
    refuseRunningDaemon(dataDir);
    const { beforeBytes, afterBytes } = vacuumDatabase(file);
    print(
      `vacuumed ${file}: ${formatBytes(beforeBytes)} → ${formatBytes(afterBytes)}; freed pages are given back after each prune from now on\n`,
    );
  });
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

function statsText(where: string, space: HistorySpace, next: PruneCounts, lastPruneAt: number | null): string {
  const header = ['table', 'rows', 'bytes', 'next prune'];
  const body = space.tables.map((t) => [
    t.table,
    String(t.rows),
    t.bytes === null ? '?' : formatBytes(t.bytes),
    (PRUNED_TABLES as readonly string[]).includes(t.table) ? String(next[t.table as keyof PruneCounts]) : '-',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] as string).length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i] as number) : c.padStart(widths[i] as number))).join('  ');
  const lines = [
    `history: ${where} (${space.dialect}), ${formatBytes(space.totalBytes)}`,
    line(header),
    ...body.map(line),
  ];
  if (space.dialect === 'sqlite') {
    lines.push(
      `write-ahead log: ${formatBytes(space.walBytes ?? 0)}; free pages: ${space.freePages} of ${formatBytes(space.pageSize ?? 0)}; auto_vacuum: ${space.autoVacuum}${space.autoVacuum === 'incremental' ? '' : ' (run `schedflow db vacuum` with the daemon stopped to give freed pages back)'}`,
    );
  }
  lines.push(`last prune: ${lastPruneAt ? new Date(lastPruneAt).toISOString() : 'never'}`);
  return `${lines.join('\n')}\n`;
}
