import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { chooseDataDir } from '../../src/cli/data-dir.js';
import {
  type DaemonRegistration,
  otherProcessOf,
  registerDaemon,
  registryDirOf,
  registryDirsToRead,
  runningDaemons,
  SERVICE_REGISTRY_DIR,
  userRegistryDir,
} from '../../src/daemon-registry.js';
import { ConfigError } from '../../src/errors.js';

/** The registry of running daemons (src/daemon-registry.ts) and how a command chooses its data dir from it. */

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

function tempRoot(): string {
  const root = mkdtempSync(join(tmpdir(), 'schedflow-registry-'));
  roots.push(root);
  return root;
}

/** A pid no process has any more. */
function deadPid(): number {
  return spawnSync(process.execPath, ['-e', '0']).pid as number;
}

describe('the registry of running daemons', () => {
  it('lives in the user’s runtime folder, else its state folder; a systemd service registers in its RuntimeDirectory', () => {
    expect(userRegistryDir({ XDG_RUNTIME_DIR: '/run/user/1000' })).toBe('/run/user/1000/schedflow');
    expect(userRegistryDir({ XDG_STATE_HOME: '/home/a/.state', HOME: '/home/a' })).toBe('/home/a/.state/schedflow');
    expect(userRegistryDir({ HOME: '/home/a' })).toBe('/home/a/.local/state/schedflow');
    expect(registryDirOf({ RUNTIME_DIRECTORY: '/run/schedflow:/run/other', HOME: '/var/lib/schedflow' })).toBe(
      '/run/schedflow',
    );
    // Every command also reads the service's folder: an admin's shell is not the service user's.
    expect(registryDirsToRead({ HOME: '/home/a' })).toEqual(
      expect.arrayContaining(['/home/a/.local/state/schedflow', SERVICE_REGISTRY_DIR]),
    );
  });

  it('lists a registered daemon until it is removed; a dead pid is left out and pruned at the next registration', () => {
    const root = tempRoot();
    const env = { XDG_RUNTIME_DIR: root };
    const dir = join(root, 'schedflow');
    mkdirSync(dir, { mode: 0o700 });
    const stale = join(dir, `daemon-${deadPid()}-0123456789ab.json`);
    writeFileSync(stale, JSON.stringify({ pid: deadPid(), dataDir: '/srv/old', startedAt: 'then' }));
    expect(runningDaemons([dir])).toEqual([]);

    const registration = registerDaemon('/srv/data', env);
    expect(existsSync(stale)).toBe(false);
    expect(runningDaemons([dir])).toEqual([expect.objectContaining({ pid: process.pid, dataDir: '/srv/data' })]);
    // Two processes of one daemon (its roles, here this one and its parent) are one data dir.
    const other = join(dir, `daemon-${process.ppid}-aaaaaaaaaaaa.json`);
    writeFileSync(other, JSON.stringify({ pid: process.ppid, dataDir: '/srv/data', startedAt: 'now' }));
    expect(runningDaemons([dir])).toHaveLength(1);
    rmSync(other);
    registration.remove();
    expect(readdirSync(dir)).toEqual([]);
  });

  it('finds another live process of a data dir, registered or in its daemon.json, not this one nor a dead one', async () => {
    const root = tempRoot();
    const dir = join(root, 'schedflow');
    const dataDir = join(root, 'data');
    mkdirSync(dir, { mode: 0o700 });
    mkdirSync(dataDir);
    const registration = (pid: number, data: string) =>
      writeFileSync(
        join(dir, `daemon-${pid}-${String(pid).padStart(12, '0').slice(-12)}.json`),
        JSON.stringify({ pid, dataDir: data, startedAt: 'now' }),
      );
    registration(process.pid, dataDir);
    registration(deadPid(), dataDir);
    expect(otherProcessOf(dataDir, [dir])).toBeNull();

    const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
    try {
      const pid = other.pid as number;
      registration(pid, '/srv/elsewhere');
      expect(otherProcessOf(dataDir, [dir])).toBeNull();
      writeFileSync(join(dataDir, 'daemon.json'), JSON.stringify({ pid }));
      expect(otherProcessOf(dataDir, [dir])).toBe(pid);
      rmSync(join(dataDir, 'daemon.json'));
      registration(pid, dataDir);
      expect(otherProcessOf(`${dataDir}/`, [dir])).toBe(pid);
    } finally {
      other.kill();
    }
  });

  it('trusts only folders others cannot write into, and files of the folder’s owner', () => {
    const root = tempRoot();
    const dir = join(root, 'schedflow');
    registerDaemon('/srv/data', { XDG_RUNTIME_DIR: root });
    chmodSync(dir, 0o777);
    expect(runningDaemons([dir])).toEqual([]);
    chmodSync(dir, 0o755);
    expect(runningDaemons([dir])).toHaveLength(1);
    if (process.getuid?.() === 0) {
      const [name] = readdirSync(dir);
      chownSync(join(dir, name as string), 65534, 65534);
      expect(runningDaemons([dir])).toEqual([]);
    }
  });
});

describe('the data dir a command chooses', () => {
  const daemon = (dataDir: string, pid = 4242): DaemonRegistration => ({ pid, dataDir, startedAt: 'now' });

  it('is --data-dir, else SCHEDFLOW_DATA_DIR, else the one running daemon’s, else ./data', () => {
    const one = () => [daemon('/srv/daemon')];
    expect(chooseDataDir('rel', { SCHEDFLOW_DATA_DIR: '/env' }, one)).toEqual({ dir: resolve('rel'), from: 'flag' });
    expect(chooseDataDir(undefined, { SCHEDFLOW_DATA_DIR: '/env' }, one)).toEqual({ dir: '/env', from: 'env' });
    expect(chooseDataDir(undefined, {}, one)).toEqual({ dir: '/srv/daemon', from: 'daemon' });
    expect(chooseDataDir(undefined, {}, () => [])).toEqual({ dir: resolve('data'), from: 'default' });
  });

  it('with several daemons running: this folder’s, else none, naming them', () => {
    expect(chooseDataDir(undefined, {}, () => [daemon('/srv/a', 1), daemon(resolve('data'), 2)])).toEqual({
      dir: resolve('data'),
      from: 'daemon',
    });
    const choose = () => chooseDataDir(undefined, {}, () => [daemon('/srv/a', 1), daemon('/srv/b', 2)]);
    expect(choose).toThrow(ConfigError);
    expect(choose).toThrow(
      'several schedflow daemons are running for you (/srv/a, pid 1; /srv/b, pid 2): say which with --data-dir',
    );
  });
});
