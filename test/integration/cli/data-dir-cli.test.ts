import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanEnv, runCli, spawnDaemon } from '../../helpers/cli-process.js';
import { bearer, http } from '../../helpers/http.js';
import { daemonProcessEnv } from '../daemon-process/daemon-process-env.js';

/**
 * Which data dir a command of the shell works on when it is not told (src/cli/data-dir.ts):
 * the running daemon's, found through its registration, from any folder; and never a new,
 * empty history of the command's own, whose tokens the daemon refused (401).
 */

const dproc = daemonProcessEnv();

/** A folder of the test's for the registrations (XDG_RUNTIME_DIR), the daemon's and the commands' alike. */
function runtimeDir(root: string): string {
  const dir = join(root, 'xdg-runtime');
  mkdirSync(dir, { mode: 0o700 });
  return dir;
}

describe('the data dir of a command with no --data-dir', () => {
  it('is the running daemon’s: tokens create in another folder makes a token the daemon takes', async () => {
    const t = await dproc.setUp();
    const env = cleanEnv({ REDIS_URL: t.redisUrl, XDG_RUNTIME_DIR: runtimeDir(t.root) });
    const daemonFolder = join(t.root, 'where-the-daemon-runs');
    const elsewhere = join(t.root, 'somewhere-else');
    mkdirSync(daemonFolder);
    mkdirSync(elsewhere);
    const daemon = spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env, cwd: daemonFolder });
    await daemon.ready();
    const apiUrl = /local API: (http:\/\/[^/\s]+)/.exec(daemon.stdout)?.[1];
    expect(apiUrl).toBeDefined();

    const made = await runCli(['tokens', 'create', '--name', 'lims', '--scopes', 'read'], { env, cwd: elsewhere });
    expect(made.stderr).toContain('token "lims" (read) created');
    expect(made.code).toBe(0);
    const token = made.stdout.trim();
    expect((await http(`${apiUrl}/api/v1/jobs`, { headers: bearer(token) })).status).toBe(200);
    // Nothing was made where the command ran.
    expect(readdirSync(elsewhere)).toEqual([]);
    // Reading commands find it too.
    const list = await runCli(['tokens', 'list'], { env, cwd: elsewhere });
    expect(list.code).toBe(0);
    expect(list.stdout).toContain('lims');
    expect((await runCli(['jobs', 'list'], { env, cwd: elsewhere })).code).toBe(0);

    // SCHEDFLOW_DATA_DIR wins, and a data dir with no history is refused, naming the daemon's.
    const astray = await runCli(['tokens', 'create', '--name', 'x', '--scopes', 'read'], {
      env: { ...env, SCHEDFLOW_DATA_DIR: join(elsewhere, 'data') },
      cwd: elsewhere,
    });
    expect(astray.code).toBe(2);
    expect(astray.stdout).toBe('');
    expect(astray.stderr).toContain(`no schedflow history in ${join(elsewhere, 'data')} (SCHEDFLOW_DATA_DIR)`);
    expect(astray.stderr).toContain(`keeps its history in ${t.dataDir}: run this again with --data-dir ${t.dataDir}`);
    expect(readdirSync(elsewhere)).toEqual([]);
    // Named by --data-dir, the command's own choice: a token for a second deployment, made
    // before its first start while this one runs.
    const second = join(t.root, 'second');
    mkdirSync(second, { mode: 0o700 });
    const provisioned = await runCli(['tokens', 'create', '--name', 'x', '--scopes', 'read', '--data-dir', second], {
      env,
      cwd: elsewhere,
    });
    expect(provisioned.code, provisioned.stderr).toBe(0);
    expect(existsSync(join(second, 'history.sqlite'))).toBe(true);

    // Stopped cleanly, it is no longer registered: the command refuses rather than guess.
    await daemon.stop('SIGTERM');
    expect(readdirSync(join(env.XDG_RUNTIME_DIR as string, 'schedflow'))).toEqual([]);
    const after = await runCli(['tokens', 'list'], { env, cwd: elsewhere });
    expect(after.code).toBe(2);
    expect(after.stderr).toContain('no schedflow daemon is running for you: start one');
  }, 90_000);

  it('with no daemon running and no history: refuses, says what to do, and makes nothing', async () => {
    const root = dproc.newRoot();
    const xdg = runtimeDir(root);
    const folder = join(root, 'project');
    mkdirSync(folder);
    // A registration left by a daemon that was killed: its pid is gone, so it is no daemon.
    const dead = spawnSync(process.execPath, ['-e', '0']).pid as number;
    mkdirSync(join(xdg, 'schedflow'), { mode: 0o700 });
    writeFileSync(
      join(xdg, 'schedflow', `daemon-${dead}-0123456789ab.json`),
      JSON.stringify({ pid: dead, dataDir: join(root, 'old-data'), startedAt: new Date().toISOString() }),
    );
    mkdirSync(join(root, 'old-data'));
    writeFileSync(join(root, 'old-data', 'daemon.json'), '{}');
    const env = cleanEnv({ XDG_RUNTIME_DIR: xdg });
    for (const args of [
      ['tokens', 'create', '--name', 'x', '--scopes', 'read'],
      ['jobs', 'list'],
      ['runs', 'cancel', 'r1'],
    ]) {
      const result = await runCli(args, { env, cwd: folder });
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stdout).toBe('');
      expect(result.stderr).toContain(`no schedflow history in ${join(folder, 'data')} (the default, ./data)`);
      expect(result.stderr).toContain('no schedflow daemon is running for you: start one');
      expect(result.stderr).not.toContain(' at ');
    }
    expect(existsSync(join(folder, 'data'))).toBe(false);
    // --data-dir to an empty folder: refused alike, nothing written into it…
    const empty = join(root, 'empty');
    mkdirSync(empty, { mode: 0o700 });
    const flagged = await runCli(['jobs', 'list', '--data-dir', empty], { env, cwd: folder });
    expect(flagged.code).toBe(2);
    expect(flagged.stderr).toContain(`no schedflow history in ${empty} (--data-dir)`);
    expect(readdirSync(empty)).toEqual([]);
    // …but for a token, made there before a first start (no daemon running anywhere), as asked.
    const early = await runCli(['tokens', 'create', '--name', 'x', '--scopes', 'read', '--data-dir', empty], {
      env,
      cwd: folder,
    });
    expect(early.code, early.stderr).toBe(0);
    expect(existsSync(join(empty, 'history.sqlite'))).toBe(true);
  }, 90_000);
});
