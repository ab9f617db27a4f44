import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/http.js';

/**
 * The test set-up must know whether the munged the MUNGE tests use (the one on
 * the default socket) answers, not whether some munged runs: a test Slurm
 * cluster runs its own on another socket, and the init script's status took
 * that one for the default.
 */

const root = process.getuid?.() === 0;
const munge = spawnSync('id', ['-u', 'munge'], { encoding: 'utf8' });
const canRun = root && munge.status === 0 && spawnSync('sh', ['-c', 'command -v munged']).status === 0;
const DEFAULT_PID_FILE = '/run/munge/munged.pid';

const defaultAnswers = () => spawnSync('munge', ['-n'], { stdio: 'ignore' }).status === 0;

/**
 * The munged on the default socket: the one its pid file names, if that process is a munged,
 * and any munged started without a socket of its own (so on the default), whatever its pid
 * file says. Never another's: a test cluster's munged has `--socket=` on its command line.
 */
function defaultMungedPids(): number[] {
  const pids = new Set<number>();
  const commandOf = (pid: number): string | undefined => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
    } catch {
      return undefined; // gone, or never was
    }
  };
  const isMunged = (command: string | undefined) => command !== undefined && /(^|\/)munged( |$)/.test(command);
  try {
    const pid = Number(readFileSync(DEFAULT_PID_FILE, 'utf8').trim());
    if (pid > 0 && isMunged(commandOf(pid))) pids.add(pid);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const command = commandOf(Number(entry));
    if (isMunged(command) && !command?.includes('--socket')) pids.add(Number(entry));
  }
  return [...pids];
}

describe.skipIf(!canRun)('test set-up and munged (needs root and the munge package)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-munged-'));
  let other: ReturnType<typeof spawn> | null = null;

  afterAll(() => {
    other?.kill('SIGTERM');
    // Whatever happened above, the MUNGE tests after this file need the default munged.
    if (!defaultAnswers()) spawnSync('bash', ['test/setup.sh'], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  });

  it("starts the default munged when only another munged (a test cluster's, on its own socket) runs", async () => {
    const uid = Number(munge.stdout.trim());
    chownSync(dir, uid, uid);
    chmodSync(dir, 0o755); // munged refuses a socket in a folder others cannot enter
    const key = join(dir, 'munge.key');
    writeFileSync(key, Buffer.alloc(1024, 7), { mode: 0o400 });
    chownSync(key, uid, uid);
    const socket = join(dir, 'munge.sock');
    other = spawn(
      'runuser',
      [
        '-u',
        'munge',
        '--',
        '/usr/sbin/munged',
        '-F',
        `--socket=${socket}`,
        `--key-file=${key}`,
        `--pid-file=${join(dir, 'munged.pid')}`,
        `--log-file=${join(dir, 'munged.log')}`,
        `--seed-file=${join(dir, 'seed')}`,
      ],
      { stdio: 'ignore' },
    );
    await waitFor(
      async () => spawnSync('munge', ['-n', `--socket=${socket}`], { stdio: 'ignore' }).status === 0 || undefined,
      {
        what: 'the other munged',
      },
    );

    // The default munged stopped: only the other one is left. Its pid file may be missing or
    // name a process long gone (a munged killed without cleaning up): then none is stopped.
    for (const pid of defaultMungedPids()) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
      }
    }
    await waitFor(async () => !defaultAnswers() || undefined, { what: 'the default munged to stop' });

    const setup = spawnSync('bash', ['test/setup.sh'], { encoding: 'utf8', timeout: 60_000 });
    expect(setup.stderr + setup.stdout).toContain('test-setup: starting munged');
    expect(setup.status).toBe(0);
    expect(defaultAnswers()).toBe(true);
    // And the other munged was left alone.
    expect(spawnSync('munge', ['-n', `--socket=${socket}`], { stdio: 'ignore' }).status).toBe(0);
  });
});
