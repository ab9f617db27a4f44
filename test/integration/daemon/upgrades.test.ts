import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../../src/config/daemon-config.js';
import { readLocalApi } from '../../../src/daemon-info.js';
import { openHistory } from '../../../src/db/open-history.js';
import { getRequest, listRequests } from '../../../src/db/requests.js';
import { HistoryNewerError } from '../../../src/errors.js';
import { Secret } from '../../../src/lib/secret.js';
import { createLogger } from '../../../src/logger.js';
import { type Daemon, startDaemon } from '../../../src/main.js';
import { REPO } from '../../helpers/cli-process.js';
import { freePort } from '../../helpers/free-port.js';
import { DIALECTS, type Dialect, testPostgres } from '../../helpers/histories.js';
import { waitFor } from '../../helpers/http.js';
import { postgresBin } from '../../helpers/postgres.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';

/**
 * Upgrades on real data (issue 35): histories written by earlier releases of schedflow
 * (test/fixtures/histories/, made by `npm run fixtures:histories`, see its README) opened by this
 * one, migrated, read as the release that wrote them listed them, and their live requests
 * followed to the end by this release's daemon on the simulator state they were left with.
 */

const FIXTURES = join(REPO, 'test', 'fixtures', 'histories');
const COMMITS = readdirSync(FIXTURES, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && existsSync(join(FIXTURES, entry.name, 'expected.json')))
  .map((entry) => entry.name)
  .sort();

interface Expected {
  requests: { id: string; name: string; state: string; jobId: number | null }[];
  /** Running or pending when that release stopped. */
  live: string[];
  /** Of those, the ones pending in the simulator's saved job table: they run after the upgrade. */
  waiting: string[];
}

const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
const postgres = testPostgres();
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The fixture's data dir unpacked, and on PostgreSQL its dump restored into a new database. */
async function restore(commit: string, dialect: Dialect): Promise<{ dataDir: string; databaseUrl?: string }> {
  const root = mkdtempSync(join(tmpdir(), 'schedflow-upgrade-'));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  const dataDir = join(root, 'data');
  mkdirSync(dataDir);
  execFileSync('tar', ['-xzf', join(FIXTURES, commit, `${dialect}.tar.gz`), '-C', dataDir]);
  if (dialect === 'sqlite') return { dataDir };
  const databaseUrl = await postgres.createDatabase('upgrade');
  const psql = spawnSync(
    join(postgresBin(), 'psql'),
    ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', databaseUrl, '-f', join(dataDir, 'history.sql')],
    { encoding: 'utf8' },
  );
  if (psql.status !== 0) throw new Error(`restoring ${commit}'s dump failed: ${psql.stderr}`);
  return { dataDir, databaseUrl };
}

async function startOn(dataDir: string, redis: TestRedis, databaseUrl?: string): Promise<Daemon> {
  const configDir = join(dataDir, '..', 'config');
  mkdirSync(join(configDir, 'pipelines'), { recursive: true });
  const config = loadDaemonConfig(
    {},
    {
      dataDir,
      configDir,
      redisUrl: redis.url,
      queuePrefix: `upgrade-${Math.random().toString(36).slice(2, 10)}`,
      listen: '127.0.0.1:0',
      // The embedded simulator, on the state the old release left in the data dir.
      simPort: await freePort(),
      pollFloorMs: 500,
      reconcileEveryMs: 2000,
      lostGraceMs: 4000,
      shutdownGraceMs: 2000,
      lockDurationMs: 3000,
      ...(databaseUrl && {
        databaseUrl: new Secret(databaseUrl),
        webhookSecret: new Secret('fixture-webhook-secret'),
      }),
    },
  );
  const daemon = await startDaemon(config, logger);
  cleanups.push(() => daemon.stop());
  return daemon;
}

describe.each(COMMITS)('a history written by %s', (commit) => {
  const expected = JSON.parse(readFileSync(join(FIXTURES, commit, 'expected.json'), 'utf8')) as Record<
    Dialect,
    Expected
  >;

  it.each(DIALECTS)(
    'on %s: migrated, read as before, its live requests followed to the end',
    async (dialect) => {
      const want = expected[dialect];
      const redis = await startTestRedis();
      cleanups.push(() => redis.stop());
      const { dataDir, databaseUrl } = await restore(commit, dialect);
      const daemon = await startOn(dataDir, redis, databaseUrl);
      const { store } = daemon.history;

      // Every request the old release listed, as it listed it (the live ones may have moved on).
      const rows = await listRequests(store, { limit: 100 });
      expect(rows.map((row) => row.id).sort()).toEqual(want.requests.map((r) => r.id).sort());
      for (const before of want.requests) {
        const row = rows.find((r) => r.id === before.id);
        expect(row, before.name).toMatchObject({ name: before.name, jobId: before.jobId });
        if (!want.live.includes(before.id)) expect(row?.state, before.name).toBe(before.state);
      }
      // And through the local API, as a user reads them.
      const api = readLocalApi(dataDir);
      if (!api) throw new Error('the daemon published no local API');
      const done = want.requests.find((r) => r.name === 'done');
      const answer = await fetch(`${api.url}/api/v1/jobs/${done?.id}`, {
        headers: { authorization: `Bearer ${api.token}` },
      });
      expect(answer.status).toBe(200);
      expect(await answer.json()).toMatchObject({ id: done?.id, name: 'done', state: 'completed' });

      // The live ones end: the waiting ones run once the holders' CPUs are free (the holders
      // died with the old daemon's embedded simulator: node_fail, as Slurm records a node down).
      const ended = await waitFor(
        async () => {
          const now = await Promise.all(want.live.map((id) => getRequest(store, id)));
          return now.every((row) => row && ['completed', 'failed', 'node_fail', 'cancelled'].includes(row.state))
            ? now
            : undefined;
        },
        { what: `the live requests of ${commit} to end`, timeoutMs: 45_000, intervalMs: 250 },
      );
      for (const row of ended) {
        if (row && want.waiting.includes(row.id)) expect(row.state, row.name).toBe('completed');
      }
    },
    90_000,
  );
});

describe.each(DIALECTS)('a history a newer release migrated, on %s', (dialect) => {
  it('is refused at start, saying which migration this release does not know and what to do', async () => {
    const root = mkdtempSync(join(tmpdir(), 'schedflow-newer-'));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    const dataDir = join(root, 'data');
    const databaseUrl = dialect === 'postgres' ? new Secret(await postgres.createDatabase('newer')) : undefined;
    const opened = await openHistory({ dataDir, ...(databaseUrl && { databaseUrl }) }, logger);
    await opened.close();
    // A migration after this release's last, as the next release's would be.
    const future = Date.UTC(2100, 0, 1);
    if (databaseUrl) {
      const client = new pg.Client({ connectionString: databaseUrl.reveal() });
      await client.connect();
      await client.query(
        `INSERT INTO "schedflow"."__drizzle_migrations" (hash, created_at) VALUES ('f00dfeedcafe0123', $1)`,
        [future],
      );
      await client.end();
    } else {
      const sqlite = new Database(join(dataDir, 'history.sqlite'));
      sqlite
        .prepare(`INSERT INTO "__drizzle_migrations" (hash, created_at) VALUES ('f00dfeedcafe0123', ?)`)
        .run(future);
      sqlite.close();
    }
    const refused = await openHistory({ dataDir, ...(databaseUrl && { databaseUrl }) }, logger).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(HistoryNewerError);
    expect((refused as HistoryNewerError).code).toBe('SCHEDFLOW_ERR_HISTORY_NEWER');
    expect((refused as Error).message).toMatch(
      /migrated by a newer schedflow: it has 1 migration\(s\) this release does not know \(made 2100-01-01T00:00:00\.000Z, hash f00dfeedcafe\); this release's last is 00\d\d_\w+\. Run the newer release on it, or restore the backup taken before the upgrade/,
    );
    // Nothing was written: the row count of the bookkeeping table is the one left.
  });
});
