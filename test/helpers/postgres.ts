import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './free-port.js';
import { onHost, type TestHost } from './netns.js';

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
export function postgresBin(): string {
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
 * is not what the tests are about). Stopped with a fast shutdown, its directory removed. On a
 * host of a test network (test/helpers/netns.ts) it listens on the host's address and, as a
 * shared server should, asks for a password (in the URL).
 */
export async function startTestPostgres(options: { host?: TestHost } = {}): Promise<TestPostgres> {
  const { host } = options;
  const bin = postgresBin();
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-pg-'));
  const user = runAs();
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  const password = host ? randomBytes(12).toString('hex') : undefined;
  const auth = ['-A', 'trust'];
  if (password) {
    const file = join(dir, 'password');
    writeFileSync(file, `${password}\n`, { mode: 0o600 });
    if (user) chownSync(file, user.uid, user.gid);
    auth.splice(0, 2, '--auth-local=trust', '--auth-host=scram-sha-256', `--pwfile=${file}`);
  }
  try {
    execFileSync(
      join(bin, 'initdb'),
      ['-D', data, ...auth, '-U', 'schedflow', '-E', 'UTF8', '--no-sync', '--no-instructions'],
      { stdio: ['ignore', 'ignore', 'pipe'], ...user },
    );
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${String((error as { stderr?: unknown }).stderr ?? error)}`);
  }
  // initdb lets password logins in from loopback alone: the other hosts of the network too.
  if (password) appendFileSync(join(data, 'pg_hba.conf'), 'host all all 0.0.0.0/0 scram-sha-256\n');
  // A host's ports are its own: PostgreSQL's usual one is free there.
  const port = host ? 5432 : await freePort();
  const address = host?.address ?? '127.0.0.1';
  const args = [
    ...['-D', data, '-p', String(port), '-k', dir],
    ...['-c', `listen_addresses=${address}`, '-c', 'fsync=off', '-c', 'synchronous_commit=off'],
    // Each test daemon's pool holds up to 10 connections; six files at once, some with several daemons.
    ...['-c', 'full_page_writes=off', '-c', 'max_connections=500'],
  ];
  // Into the host's namespace as root (`ip netns exec`), then as the server's user: setpriv
  // execs the server in its place, so signals reach it.
  const asUser = user ? ['setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--'] : [];
  const [command, argv] = host
    ? onHost(host, asUser[0] ?? join(bin, 'postgres'), [
        ...asUser.slice(1),
        ...(user ? [join(bin, 'postgres')] : []),
        ...args,
      ])
    : [join(bin, 'postgres'), args];
  const child: ChildProcess = spawn(command, argv, { stdio: ['ignore', 'ignore', 'pipe'], ...(host ? {} : user) });
  // Its log, for the error when it does not start.
  let log = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    log = (log + chunk).slice(-4000);
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = `postgres://schedflow${password ? `:${password}` : ''}@${address}:${port}/postgres`;
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
