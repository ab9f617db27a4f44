import { spawnSync } from 'node:child_process';
import type { Command } from 'commander';
import { ConfigError } from '../errors.js';
import { CREATE_JOB_USER, DEFAULT_JOB_USER, lookupHostUser } from '../sim/job-user.js';

/** Debian packages `schedflow start` needs on this machine, by the command that shows they are there. */
const NEEDED = [{ command: 'redis-server', pkg: 'redis-server', why: 'the queue store, when REDIS_URL is not set' }];

function has(command: string): boolean {
  return !spawnSync(command, ['--version'], { stdio: 'ignore' }).error;
}

/**
 * Installs what is missing with apt-get (as root, or through sudo), so the
 * README's first command works on a fresh Debian machine. With REDIS_URL set,
 * nothing is needed.
 */
export function ensureSystemPackages(env: NodeJS.ProcessEnv = process.env): string[] {
  if (env.REDIS_URL) return [];
  const missing = NEEDED.filter((n) => !has(n.command));
  if (missing.length === 0) return [];
  const pkgs = missing.map((m) => m.pkg);
  const root = process.getuid?.() === 0;
  const sudo = root ? [] : has('sudo') ? ['sudo'] : null;
  if (sudo === null || !has('apt-get')) {
    throw new ConfigError(
      `${missing.map((m) => `${m.command} (${m.why})`).join(', ')} is not installed; install it (Debian/Ubuntu: sudo apt-get install ${pkgs.join(' ')}) or set REDIS_URL`,
    );
  }
  process.stderr.write(`schedflow: installing ${pkgs.join(', ')} with apt-get\n`);
  for (const args of [
    ['apt-get', 'update', '-qq'],
    ['apt-get', 'install', '-y', '-qq', ...pkgs],
  ]) {
    const [cmd, ...rest] = [...sudo, ...args] as [string, ...string[]];
    const run = spawnSync(cmd, rest, {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    if (run.status !== 0) {
      throw new ConfigError(
        `${[...sudo, ...args].join(' ')} failed; install ${pkgs.join(' ')} yourself, or set REDIS_URL`,
      );
    }
  }
  return pkgs;
}

/**
 * As root, the embedded simulator runs job scripts as the unprivileged system user
 * schedflow-job (never as root, or any token that may submit would be root on the host): made
 * here when missing, without a home or a login shell. Returns whether it was made. Not root:
 * the simulator runs jobs as the daemon's own user, and nothing is needed.
 */
export function ensureJobUser(): boolean {
  if (process.getuid?.() !== 0 || lookupHostUser(DEFAULT_JOB_USER)) return false;
  const [cmd, ...args] = CREATE_JOB_USER;
  const run = spawnSync(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  if (run.error || run.status !== 0) {
    throw new ConfigError(
      `${CREATE_JOB_USER.join(' ')} failed (${run.error?.message ?? run.stderr.trim()}): create the user yourself, or set SCHEDFLOW_SIM_JOB_USER to an unprivileged user of this host`,
    );
  }
  return true;
}

export function registerSetupCommand(program: Command): void {
  program
    .command('setup')
    .description(
      'install the system packages schedflow start needs (redis-server) with apt-get, and as root the user the embedded simulator runs jobs as, when missing',
    )
    .action(() => {
      const installed = ensureSystemPackages();
      if (installed.length) process.stdout.write(`installed ${installed.join(', ')}\n`);
      if (ensureJobUser()) process.stdout.write(`created the user ${DEFAULT_JOB_USER}, whom simulated jobs run as\n`);
    });
}
