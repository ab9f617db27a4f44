import { execFile } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { z } from 'zod';
import { CLI } from '../chaos/upstream.js';

/**
 * Tables whose rows live a fixed time the daemon sets, not a retention setting, longer than a
 * soak runs: an Idempotency-Key is kept 24 h (IDEMPOTENCY_TTL_MS, src/db/idempotency.ts), and
 * the soak's client sends one with every submission, so in an hour the table only grows. Its
 * rows are left out of the judged `rows` and shown apart (`lifetimeRows`).
 */
export const LIFETIME_TABLES: Record<string, string> = { idempotency_keys: 'kept 24 h' };

/** The history's size: rows and bytes per table, in all. */
export interface HistoryStats {
  /** Rows of every table but LIFETIME_TABLES'. */
  rows: number;
  /** Rows of LIFETIME_TABLES. */
  lifetimeRows: number;
  bytes: number;
  byTable: Record<string, { rows: number; bytes: number }>;
  /** Where the figures came from: `schedflow db stats --json`, or the soak's own SQL. */
  source: 'db stats' | 'sql';
}

/** A request as the history holds it: what the ledger follows. */
export interface RequestRow {
  id: string;
  state: string;
  jobId: number | null;
}

/** What the soak reads of the history, on SQLite or PostgreSQL. */
export interface HistoryReader {
  requests(): Promise<RequestRow[]>;
  stats(): Promise<HistoryStats>;
  /** The SQLite WAL file's bytes (undefined on PostgreSQL). */
  walBytes(): number | undefined;
  /** Connections to the history's database other than the soak's own (undefined on SQLite). */
  connections(): Promise<number | undefined>;
  close(): Promise<void>;
}

/**
 * What `schedflow db stats --json` prints, as far as the soak reads it (the retention branch
 * brings the command; its form may carry more). One table a row.
 */
const dbStatsSchema = z.object({
  tables: z.array(
    z.object({ table: z.string().optional(), name: z.string().optional(), rows: z.number(), bytes: z.number() }),
  ),
});

const run = promisify(execFile);

/**
 * `schedflow db stats --json` in the daemon's environment, when the build has it; undefined
 * when it has not (or prints something this does not read), and the soak counts by SQL.
 */
export async function statsFromCli(dataDir: string, env: NodeJS.ProcessEnv): Promise<HistoryStats | undefined> {
  try {
    const { stdout } = await run(process.execPath, [CLI, 'db', 'stats', '--json', '--data-dir', dataDir], {
      env,
      timeout: 30_000,
    });
    const parsed = dbStatsSchema.safeParse(JSON.parse(stdout));
    if (!parsed.success) return undefined;
    const byTable: HistoryStats['byTable'] = {};
    for (const t of parsed.data.tables) byTable[t.table ?? t.name ?? '?'] = { rows: t.rows, bytes: t.bytes };
    return {
      ...rowsOf(byTable),
      bytes: Object.values(byTable).reduce((n, t) => n + t.bytes, 0),
      byTable,
      source: 'db stats',
    };
  } catch {
    return undefined;
  }
}

function rowsOf(byTable: HistoryStats['byTable']): { rows: number; lifetimeRows: number } {
  let rows = 0;
  let lifetimeRows = 0;
  for (const [name, t] of Object.entries(byTable)) {
    if (name in LIFETIME_TABLES) lifetimeRows += t.rows;
    else rows += t.rows;
  }
  return { rows, lifetimeRows };
}

const REQUESTS_SQL = 'SELECT id, state, job_id FROM job_requests';
/** The history's tables on PostgreSQL live in their own schema (src/db/pg-schema.ts). */
const PG_SCHEMA = 'schedflow';

/** The SQLite history, opened read-only for each reading (no read transaction held between them, so checkpoints are never pinned). */
export function sqliteHistory(dataDir: string): HistoryReader {
  const file = join(dataDir, 'history.sqlite');
  const withDb = <T>(read: (db: Database.Database) => T): T => {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      db.pragma('busy_timeout = 5000');
      return read(db);
    } finally {
      db.close();
    }
  };
  return {
    requests: async () =>
      withDb((db) =>
        (db.prepare(REQUESTS_SQL).all() as { id: string; state: string; job_id: number | null }[]).map((r) => ({
          id: r.id,
          state: r.state,
          jobId: r.job_id,
        })),
      ),
    stats: async () =>
      withDb((db) => {
        const tables = (
          db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() as {
            name: string;
          }[]
        ).map((t) => t.name);
        // dbstat: the bytes of each table's pages with its indexes' (better-sqlite3 is built with it).
        const pages = new Map<string, number>();
        for (const row of db.prepare('SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name').all() as {
          name: string;
          bytes: number;
        }[])
          pages.set(row.name, row.bytes);
        const indexes = db.prepare("SELECT name, tbl_name FROM sqlite_master WHERE type = 'index'").all() as {
          name: string;
          tbl_name: string;
        }[];
        const byTable: HistoryStats['byTable'] = {};
        for (const name of tables) {
          const rows = (db.prepare(`SELECT COUNT(*) AS n FROM "${name}"`).get() as { n: number }).n;
          const bytes =
            (pages.get(name) ?? 0) +
            indexes.filter((i) => i.tbl_name === name).reduce((n, i) => n + (pages.get(i.name) ?? 0), 0);
          byTable[name] = { rows, bytes };
        }
        const pageSize = db.pragma('page_size', { simple: true }) as number;
        const pageCount = db.pragma('page_count', { simple: true }) as number;
        return {
          ...rowsOf(byTable),
          // The file's pages, free ones included: what the disk holds (vacuum gives free ones back).
          bytes: pageSize * pageCount,
          byTable,
          source: 'sql' as const,
        };
      }),
    walBytes: () => {
      const wal = `${file}-wal`;
      return existsSync(wal) ? statSync(wal).size : 0;
    },
    connections: async () => undefined,
    close: async () => {},
  };
}

/** The PostgreSQL history, through one connection of the soak's own. */
export function postgresHistory(url: string): HistoryReader {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  pool.on('error', () => {});
  return {
    requests: async () =>
      (
        await pool.query<{ id: string; state: string; job_id: string | null }>(
          REQUESTS_SQL.replace('job_requests', `${PG_SCHEMA}.job_requests`),
        )
      ).rows.map((r) => ({
        id: r.id,
        state: r.state,
        jobId: r.job_id === null ? null : Number(r.job_id),
      })),
    stats: async () => {
      const tables = (
        await pool.query<{ name: string; bytes: string }>(
          `SELECT c.relname AS name, pg_total_relation_size(c.oid) AS bytes FROM pg_class c
           JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`,
          [PG_SCHEMA],
        )
      ).rows;
      // None would read as an empty history, flat for ever: a reading that failed, not a figure.
      if (tables.length === 0) throw new Error(`no tables in schema ${PG_SCHEMA}`);
      const byTable: HistoryStats['byTable'] = {};
      for (const t of tables) {
        const rows =
          (await pool.query<{ n: string }>(`SELECT COUNT(*) AS n FROM ${PG_SCHEMA}."${t.name}"`)).rows[0]?.n ?? '0';
        byTable[t.name] = { rows: Number(rows), bytes: Number(t.bytes) };
      }
      const size = (await pool.query<{ bytes: string }>('SELECT pg_database_size(current_database()) AS bytes'))
        .rows[0];
      return {
        ...rowsOf(byTable),
        bytes: Number(size?.bytes ?? 0),
        byTable,
        source: 'sql' as const,
      };
    },
    walBytes: () => undefined,
    connections: async () => {
      const row = (
        await pool.query<{ n: string }>(
          'SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
        )
      ).rows[0];
      return Number(row?.n ?? 0);
    },
    close: () => pool.end(),
  };
}
