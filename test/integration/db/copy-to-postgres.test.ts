import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { asc, is, type Table } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { SQLiteTable } from 'drizzle-orm/sqlite-core';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type CopyProgress, copyHistoryToPostgres } from '../../../src/db/copy-to-postgres.js';
import { type HistoryDatabase, openDatabase } from '../../../src/db/database.js';
import * as pgSchema from '../../../src/db/pg-schema.js';
import * as schema from '../../../src/db/schema.js';
import { ConfigError } from '../../../src/errors.js';
import { cleanEnv, REPO, runCli } from '../../helpers/cli-process.js';
import { testPostgres } from '../../helpers/histories.js';

const MIGRATIONS = join(REPO, 'migrations', 'postgres');
const TRANSITIONS = 13_000; // more than one INSERT's worth (6,000 rows of 10 columns)

const server = testPostgres();
let history: HistoryDatabase;
let dir: string;
const pools: pg.Pool[] = [];
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'schedflow-copy-'));
  history = openDatabase(join(dir, 'history.sqlite'));
  const { db } = history;
  const at = 1_795_000_000_000;
  db.insert(schema.jobRequests)
    .values([
      {
        id: 'r1',
        profile: 'lab',
        name: 'train',
        spec: { name: 'train', script: '#!/bin/sh\ntrue\n', memory_per_node: 1024 },
        origin: 'api',
        state: 'completed',
        jobId: 4_000_000_123,
        adopted: true,
        lastSeenStale: false,
        needs: [{ step: 'prep', type: 'afterok' }],
        deadlines: { startBy: at + 60_000 },
        summarize: null,
        exitCode: 0,
        createdAt: at,
        updatedAt: at + 1,
      },
      {
        id: 'r2',
        profile: 'lab',
        name: 'plain',
        spec: {},
        origin: 'cli',
        state: 'queued',
        createdAt: at,
        updatedAt: at,
      },
    ])
    .run();
  // In slices: SQLite binds at most 32,766 parameters a statement.
  for (let from = 0; from < TRANSITIONS; from += 2_000) {
    db.insert(schema.jobTransitions)
      .values(
        Array.from({ length: Math.min(2_000, TRANSITIONS - from) }, (_, j) => ({
          requestId: (from + j) % 2 === 0 ? 'r1' : 'r2',
          fromState: null,
          toState: 'accepted' as const,
          at: at + from + j,
          source: 'api' as const,
          stale: (from + j) % 3 === 0,
        })),
      )
      .run();
  }
  db.insert(schema.accountingJobs)
    .values({
      ...{ profile: 'lab', jobId: 4_000_000_123, requestId: 'r1', name: 'train', account: 'lab', user: 'alice' },
      ...{ partition: 'debug', state: 'completed', rawState: 'COMPLETED', cpuTimeSec: 12.5, comment: 'sf:r1' },
      syncedAt: at,
    })
    .run();
  db.insert(schema.apiTokens)
    .values({ id: 't1', name: 'ci', hash: 'h', scopes: ['submit', 'read'], createdAt: at })
    .run();
  db.insert(schema.profileSync).values({ profile: 'lab', lastPollOk: true, accountingOk: null }).run();
  db.insert(schema.deadlineMisses)
    .values({ subject: 'r1', requestId: 'r1', kind: 'start_by', at, detail: 'late' })
    .run();
});
afterAll(async () => {
  history?.close();
  await Promise.all(pools.map((pool) => pool.end()));
  rmSync(dir, { recursive: true, force: true });
});

function pool(url: string): pg.Pool {
  const made = new pg.Pool({ connectionString: url, max: 2 });
  made.on('error', () => {});
  pools.push(made);
  return made;
}

/** Every table's rows, ordered by all their columns' values, as each database's drizzle reads them. */
async function rowsOf(read: (table: Table) => Promise<unknown[]>, tables: Record<string, Table>) {
  const all: Record<string, string[]> = {};
  for (const [key, table] of Object.entries(tables)) {
    all[key] = (await read(table)).map((row) => JSON.stringify(row)).sort();
  }
  return all;
}

it('copies a SQLite history row for row: JSON, booleans, nulls, reals and 64-bit ids read back the same', async () => {
  const url = await server.createDatabase('copy');
  const progress: CopyProgress[] = [];
  const copied = await copyHistoryToPostgres(history.db, pool(url), MIGRATIONS, (p) => progress.push(p));
  expect(copied.job_transitions).toBe(TRANSITIONS);
  expect(copied.job_requests).toBe(2);
  // Progress as the pages go: a long copy shows how far it is.
  const transitions = progress.filter((p) => p.table === 'job_transitions');
  expect(transitions.length).toBeGreaterThan(1);
  expect(transitions.at(-1)).toEqual({ table: 'job_transitions', copied: TRANSITIONS, total: TRANSITIONS });

  const sqliteTables = Object.fromEntries(
    Object.entries(schema as Record<string, unknown>).filter((entry): entry is [string, Table] =>
      is(entry[1], SQLiteTable),
    ),
  );
  const pgTables = Object.fromEntries(Object.keys(sqliteTables).map((key) => [key, (pgSchema as never)[key] as Table]));
  const target = drizzle(pool(url));
  const fromSqlite = await rowsOf(
    async (table) =>
      history.db
        .select()
        .from(table as SQLiteTable)
        .all(),
    sqliteTables,
  );
  const fromPostgres = await rowsOf(async (table) => target.select().from(table as never), pgTables);
  expect(fromPostgres).toEqual(fromSqlite);
  expect(fromPostgres.jobRequests?.some((row) => row.includes('"jobId":4000000123'))).toBe(true);
  // As PostgreSQL has them, not only as drizzle reads them back (it would parse JSON text twice).
  const { rows: raw } = await pool(url).query(
    `SELECT jsonb_typeof(spec) AS spec, jsonb_typeof(needs) AS needs, adopted, summarize, job_id
       FROM schedflow.job_requests WHERE id = 'r1'`,
  );
  expect(raw[0]).toEqual({ spec: 'object', needs: 'array', adopted: true, summarize: null, job_id: '4000000123' });

  // New rows go on after the ids copied.
  const [added] = await target
    .insert(pgSchema.jobTransitions)
    .values({ requestId: 'r2', toState: 'queued', at: 1, source: 'api' })
    .returning({ id: pgSchema.jobTransitions.id });
  const [last] = await history.db
    .select({ id: schema.jobTransitions.id })
    .from(schema.jobTransitions)
    .orderBy(asc(schema.jobTransitions.id))
    .limit(1)
    .offset(TRANSITIONS - 1);
  expect(added?.id).toBe((last?.id ?? 0) + 1);
});

it('refuses a PostgreSQL history that has rows already, and changes nothing there', async () => {
  const url = await server.createDatabase('second');
  await copyHistoryToPostgres(history.db, pool(url), MIGRATIONS);
  const again = copyHistoryToPostgres(history.db, pool(url), MIGRATIONS);
  await expect(again).rejects.toBeInstanceOf(ConfigError);
  await expect(again).rejects.toThrow(/not empty/);
  const { rows } = await pool(url).query('SELECT count(*)::int AS n FROM schedflow.job_transitions');
  expect(rows[0].n).toBe(TRANSITIONS);
});

it('`schedflow db migrate-to-postgres` copies a data dir, says how far it is, and refuses while its daemon runs', async () => {
  const url = await server.createDatabase('cli');
  const args = ['db', 'migrate-to-postgres', '--from', dir];
  const env = cleanEnv({ DATABASE_URL: url });
  // A daemon on the data dir (this test's process, alive): what it writes after a copy would be left behind.
  writeFileSync(join(dir, 'daemon.pid'), String(process.pid));
  const refused = await runCli(args, { env });
  expect(refused.stderr).toMatch(`a schedflow daemon (pid ${process.pid}) is running on ${dir}: stop it first`);
  expect(refused.code).toBe(2);
  rmSync(join(dir, 'daemon.pid'));
  const { rows: before } = await pool(url).query("SELECT to_regclass('schedflow.job_requests') AS t");
  expect(before[0].t).toBeNull();

  const copied = await runCli(args, { env });
  expect(copied.stderr).toContain(`job_transitions: ${TRANSITIONS}/${TRANSITIONS}\n`);
  expect(copied.code, copied.stderr).toBe(0);
  expect(copied.stdout).toMatch(
    /^copied \d+ rows of .*history\.sqlite into postgres:\/\/schedflow@127\.0\.0\.1:\d+\/cli_/,
  );
  const { rows } = await pool(url).query('SELECT count(*)::int AS n FROM schedflow.job_transitions');
  expect(rows[0].n).toBe(TRANSITIONS);

  const again = await runCli(args, { env });
  expect(again.code).toBe(2);
  expect(again.stderr).toMatch(/the PostgreSQL history is not empty/);
  expect(again.stderr).not.toMatch(/^\s+at /m);
}, 60_000);
