import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, expect, it } from 'vitest';
import { connectionOf, openDatabase } from '../../../src/db/database.js';
import { REPO, TSX } from '../../helpers/cli-process.js';

const PEER = fileURLToPath(new URL('../../fixtures/db/migrating-peer.ts', import.meta.url));

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

it('a history a peer process is migrating is opened once the peer is done, its migrations applied once', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-migrate-'));
  dirs.push(dir);
  const file = join(dir, 'history.sqlite');
  // Where two processes starting together both are: the bookkeeping table made, nothing applied.
  const setup = new Database(file);
  setup.pragma('journal_mode = WAL');
  setup.exec('CREATE TABLE "__drizzle_migrations" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)');
  setup.close();

  // Held well past the time this process needs to ask, well within its busy timeout (5 s).
  const peer = spawn(process.execPath, ['--import', TSX, PEER, file, '2000'], {
    cwd: REPO,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  peer.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  // 'close': its output read to the end.
  const exited = new Promise<number | null>((resolve) => peer.once('close', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    peer.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      if (stdout.includes('locked')) resolve();
    });
    peer.once('exit', () => reject(new Error(`the peer exited before taking the lock: ${stderr}`)));
  });

  // Waits for the peer's lock (busy_timeout), then finds everything applied.
  const openedAt = Date.now();
  const history = openDatabase(file);
  try {
    const connection = connectionOf(history.db);
    const applied = connection.prepare('SELECT count(*) AS n FROM "__drizzle_migrations"').get() as { n: number };
    const committed = readdirSync(join(REPO, 'migrations', 'sqlite')).filter((name) => name.endsWith('.sql')).length;
    expect(applied.n).toBe(committed);
    expect(await exited, stderr).toBe(0);
    // The open began while the peer held its lock, migrations not applied: the race was run.
    const committedAt = Number(/committed (\d+)/.exec(stdout)?.[1]);
    expect(openedAt).toBeLessThan(committedAt);
  } finally {
    history.close();
  }
});
