import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './free-port.js';

export interface TestPostgres {
  /** postgres://…/postgres: the server's own database, for creating others. */
  url: string;
  /** A new, empty database on this server; its URL. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

/**
 * A new, empty database `name` on the server of `serverUrl` (`admin` connected to it as a
 * superuser); its URL.
 */
export async function createDatabaseAt(
  admin: { query(text: string): Promise<unknown> },
  serverUrl: string,
  name: string,
): Promise<string> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a plain database name: ${name}`);
  await admin.query(`CREATE DATABASE "${name}"`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.href;
}

/** Debian's PostgreSQL (test/setup.sh installs package `postgresql`): the newest version there. */
function postgresBin(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions[0] === undefined) {
    throw new Error('PostgreSQL is not installed: bash test/setup.sh (or apt-get install postgresql)');
  }
  return join(root, versions[0], 'bin');
}

/**
 * PostgreSQL refuses to run as root: as root, the server and initdb run as Debian's `postgres`
 * user, in a directory it owns.
 */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

/**
 * A real PostgreSQL server of the test's own: a new cluster (initdb) in a temporary directory,
 * on a free loopback port, trusting local connections, without fsync (a crash of the machine
 * is not what the tests are about). Stopped with a fast shutdown, its directory removed.
 */
export async function startTestPostgres(): Promise<TestPostgres> {
  const bin = postgresBin();
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-pg-'));
  const user = runAs();
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  try {
    execFileSync(
      join(bin, 'initdb'),
      ['-D', data, '-A', 'trust', '-U', 'schedflow', '-E', 'UTF8', '--no-sync', '--no-instructions'],
      { stdio: ['ignore', 'ignore', 'pipe'], ...user },
    );
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${String((error as { stderr?: unknown }).stderr ?? error)}`);
  }
  const port = await freePort();
  const child: ChildProcess = spawn(
    join(bin, 'postgres'),
    [
      ...['-D', data, '-p', String(port), '-k', dir],
      ...['-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'synchronous_commit=off'],
      ...['-c', 'full_page_writes=off', '-c', 'max_connections=200'],
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], ...user },
  );
  // Its log, for the error when it does not start.
  let log = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    log = (log + chunk).slice(-4000);
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = `postgres://schedflow@127.0.0.1:${port}/postgres`;
  const admin = new pg.Pool({ connectionString: url, max: 1 });
  admin.on('error', () => {});
  const stop = async () => {
    await admin.end().catch(() => undefined);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGINT');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; ; i++) {
    try {
      await admin.query('SELECT 1');
      break;
    } catch (error) {
      if (i >= 200 || child.exitCode !== null || child.signalCode !== null) {
        await stop();
        throw new Error(`postgres did not start: ${(error as Error).message}\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url,
    createDatabase: (name) => createDatabaseAt(admin, url, name),
    stop,
  };
}
