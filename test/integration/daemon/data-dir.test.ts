import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../../src/config/daemon-config.js';
import { getRequest } from '../../../src/db/requests.js';
import { ConfigError } from '../../../src/errors.js';
import { createLogger } from '../../../src/logger.js';
import { type Daemon, startDaemon } from '../../../src/main.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { cleanEnv, runCli } from '../../helpers/cli-process.js';
import { waitFor } from '../../helpers/http.js';
import { giveToJobUser } from '../../helpers/sim.js';

/**
 * The data dir holds job scripts, environment values and webhook URLs: it is
 * the owner's alone, whatever the umask the daemon was started with. The all-in-one
 * start without a profile is used, so every writer is there: the history (and
 * SQLite's -wal and -shm), the private redis-server, the embedded simulator,
 * the demo keys, the webhook secret and daemon.json.
 */

const roots: string[] = [];
let daemon: Daemon | undefined;
const umaskBefore = process.umask();

afterEach(async () => {
  await daemon?.stop();
  daemon = undefined;
  process.umask(umaskBefore);
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

function tempRoot(): string {
  const root = mkdtempSync(join(tmpdir(), 'schedflow-datadir-'));
  roots.push(root);
  return root;
}

function configFor(root: string, dataDir: string) {
  mkdirSync(join(root, 'config'), { recursive: true });
  return loadDaemonConfig(
    {},
    {
      dataDir,
      configDir: join(root, 'config'),
      simPort: 0,
      listen: '127.0.0.1:0',
      pollFloorMs: 500,
      shutdownGraceMs: 2000,
      queuePrefix: `test-${Math.random().toString(36).slice(2, 10)}`,
    },
  );
}

/** Every entry under `dir` (itself included) with its permission bits. */
function modesUnder(dir: string): Map<string, number> {
  const modes = new Map<string, number>([[dir, lstatSync(dir).mode & 0o777]]);
  for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const path = join(dir, name);
    modes.set(path, lstatSync(path).mode & 0o777);
  }
  return modes;
}

describe('the data dir', () => {
  it('is made 0700 and every file in it 0600, even under umask 000', async () => {
    const root = tempRoot();
    const dataDir = join(root, 'data');
    const workDir = join(root, 'work');
    mkdirSync(workDir);
    giveToJobUser(workDir, [root]);
    process.umask(0o000);
    daemon = await startDaemon(configFor(root, dataDir), createLogger({ level: process.env.LOG_LEVEL ?? 'silent' }));
    // A job through the embedded simulator, so the history, Redis and the simulator all write.
    const spec = jobSpecSchema.parse({
      name: 'data-dir',
      script: '#!/bin/sh\necho secret-ish\n',
      current_working_directory: workDir,
    });
    const id = await daemon.submit({ spec, owner: 'default', actor: 'test', origin: 'cli' });
    const store = daemon.history.store;
    await waitFor(async () => ((await getRequest(store, id))?.state === 'completed' ? true : undefined), {
      what: 'the job to complete',
      timeoutMs: 20_000,
    });

    const modes = modesUnder(dataDir);
    for (const name of [
      'history.sqlite',
      'history.sqlite-wal',
      'history.sqlite-shm',
      'daemon.json',
      'webhook-secret',
    ]) {
      expect(modes.get(join(dataDir, name)), name).toBe(0o600);
    }
    expect(modes.get(dataDir)).toBe(0o700);
    // Redis's own files (append-only files, log, pid) and the simulator's state are there too.
    const redisFiles = [...modes.keys()].filter((p) => p.startsWith(join(dataDir, 'redis', '')));
    expect(redisFiles.some((p) => p.includes('appendonly'))).toBe(true);
    expect(modes.has(join(dataDir, 'sim', 'jobs.json'))).toBe(true);
    const shared = [...modes].filter(([, mode]) => (mode & 0o077) !== 0).map(([p, mode]) => `${p} ${mode.toString(8)}`);
    expect(shared).toEqual([]);
  });

  it('refuses to start on a data dir other users can read, saying what to run', async () => {
    const root = tempRoot();
    const dataDir = join(root, 'data');
    mkdirSync(dataDir);
    chmodSync(dataDir, 0o755);
    const logger = createLogger({ level: 'silent' });
    // Not handed to expect(): a daemon that did start would be stopped rather than printed.
    const outcome = await startDaemon(configFor(root, dataDir), logger).then(
      (started) => {
        daemon = started;
        return 'started';
      },
      (error: unknown) => error,
    );
    expect(outcome).toBeInstanceOf(ConfigError);
    expect((outcome as Error).message).toContain(`other users can read it; run chmod 700 ${dataDir}`);
    // Nothing was written into it.
    expect(readdirSync(dataDir)).toEqual([]);
    // Making a token (before the first start) refuses it too.
    const made = await runCli(['tokens', 'create', '--name', 'x', '--scopes', 'read', '--data-dir', dataDir], {
      env: cleanEnv(),
    });
    expect(made.code).not.toBe(0);
    expect(made.stderr).toContain(`run chmod 700 ${dataDir}`);
    expect(readdirSync(dataDir)).toEqual([]);
  });
});
