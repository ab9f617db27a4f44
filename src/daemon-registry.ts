import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { z } from 'zod';
import { DAEMON_INFO_FILE } from './daemon-info.js';
import { pidAlive } from './lib/pid-lock.js';

/**
 * Where a running daemon says which data dir it works on, so that a command started in any
 * folder (`schedflow tokens create`, `schedflow jobs list`) finds it rather than opening, or
 * making, a history of its own in `./data`. A daemon writes one file at start and removes it at
 * a clean stop; one that was killed leaves its file behind, which is ignored once its pid is
 * gone (and removed by the next daemon that registers there).
 *
 * The places, in the XDG base directory spec's words:
 * - a user's own: `$XDG_RUNTIME_DIR/schedflow` (a tmpfs emptied at logout and reboot, as the
 *   registrations should be), else `$XDG_STATE_HOME/schedflow`, else `~/.local/state/schedflow`;
 * - a service's: `$RUNTIME_DIRECTORY` when systemd sets it (a unit's `RuntimeDirectory=schedflow`
 *   makes `/run/schedflow`, owned by the service user), so the admin's shell, another user's,
 *   finds the service's daemon there.
 * Root's commands also read every user's `/run/user/<uid>/schedflow`: an admin running the CLI
 * as root finds a daemon its user started by hand.
 */

/** The folder systemd makes for a unit with `RuntimeDirectory=schedflow`: read by every command. */
export const SERVICE_REGISTRY_DIR = '/run/schedflow';

export interface DaemonRegistration {
  pid: number;
  /** Absolute. */
  dataDir: string;
  /** ISO 8601, for messages. */
  startedAt: string;
}

const registrationSchema = z.object({
  pid: z.number().int().positive(),
  dataDir: z.string().refine(isAbsolute, 'an absolute path'),
  startedAt: z.string(),
});

const FILE = /^daemon-\d+-[0-9a-f]{12}\.json$/;

/** The user's own registry folder (see the file's comment). */
export function userRegistryDir(env: NodeJS.ProcessEnv): string {
  const runtime = env.XDG_RUNTIME_DIR?.trim();
  if (runtime && isAbsolute(runtime)) return join(runtime, 'schedflow');
  const state = env.XDG_STATE_HOME?.trim();
  return join(state && isAbsolute(state) ? state : join(env.HOME?.trim() || homedir(), '.local', 'state'), 'schedflow');
}

/** Where a daemon started with `env` registers: systemd's runtime folder for a service, else its user's. */
export function registryDirOf(env: NodeJS.ProcessEnv): string {
  // systemd joins several RuntimeDirectory= folders with ':'; the first is the unit's own.
  const service = env.RUNTIME_DIRECTORY?.split(':')[0]?.trim();
  return service && isAbsolute(service) ? service : userRegistryDir(env);
}

/** The folders a command looks in, its user's own first. */
export function registryDirsToRead(env: NodeJS.ProcessEnv): string[] {
  const dirs = [userRegistryDir(env), registryDirOf(env), SERVICE_REGISTRY_DIR];
  if (process.getuid?.() === 0) {
    for (const uid of safeReaddir('/run/user')) dirs.push(join('/run/user', uid, 'schedflow'));
  }
  return [...new Set(dirs)];
}

/**
 * Registers this process's daemon of `dataDir`; `remove()` at its clean stop. One file per
 * process and data dir: daemons started in one test process share a pid.
 */
export function registerDaemon(dataDir: string, env: NodeJS.ProcessEnv): { file: string; remove(): void } {
  const dir = registryDirOf(env);
  // Made private when it is ours to make; systemd's folder is left as the unit made it.
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const name of safeReaddir(dir).filter((n) => FILE.test(n))) {
    const stale = readRegistration(join(dir, name));
    if (stale && !pidAlive(stale.pid)) rmSync(join(dir, name), { force: true });
  }
  const key = createHash('sha256').update(dataDir).digest('hex').slice(0, 12);
  const file = join(dir, `daemon-${process.pid}-${key}.json`);
  const registration: DaemonRegistration = { pid: process.pid, dataDir, startedAt: new Date().toISOString() };
  // Renamed into place: a command reading the folder meanwhile sees the whole file or none.
  const partial = `${file}.partial`;
  writeFileSync(partial, JSON.stringify(registration), { mode: 0o600 });
  renameSync(partial, file);
  return { file, remove: () => rmSync(file, { force: true }) };
}

/**
 * The data dirs of the daemons running now, from the registrations in `dirs`, one entry per
 * data dir (the processes of one daemon's roles share one). A registration whose pid is gone
 * is a daemon that was killed, and is left out.
 */
export function runningDaemons(dirs: readonly string[]): DaemonRegistration[] {
  const byDataDir = new Map<string, DaemonRegistration>();
  for (const dir of dirs) {
    const owner = trustedOwner(dir);
    if (owner === undefined) continue;
    for (const name of safeReaddir(dir)) {
      const file = join(dir, name);
      // Only what the folder's owner wrote: a registration is where a command may write a token.
      if (!FILE.test(name) || fileOwner(file) !== owner) continue;
      const registration = readRegistration(file);
      if (registration && pidAlive(registration.pid) && !byDataDir.has(registration.dataDir)) {
        byDataDir.set(registration.dataDir, registration);
      }
    }
  }
  return [...byDataDir.values()];
}

/**
 * A live process other than this one working on `dataDir` (another role of the same
 * deployment, or a daemon there before), from the registrations in `dirs` and the data dir's
 * daemon.json: its pid, or null. A role still starting has not registered yet: not seen.
 */
export function otherProcessOf(dataDir: string, dirs: readonly string[]): number | null {
  const target = resolve(dataDir);
  const pids: number[] = [];
  for (const dir of dirs) {
    for (const name of safeReaddir(dir).filter((n) => FILE.test(n))) {
      const registration = readRegistration(join(dir, name));
      if (registration && resolve(registration.dataDir) === target) pids.push(registration.pid);
    }
  }
  try {
    const info = z
      .object({ pid: z.number().int().positive() })
      .safeParse(JSON.parse(readFileSync(join(target, DAEMON_INFO_FILE), 'utf8')));
    if (info.success) pids.push(info.data.pid);
  } catch {
    // No daemon.json (a new data dir), or unreadable: the registrations alone.
  }
  return pids.find((pid) => pid !== process.pid && pidAlive(pid)) ?? null;
}

/** The owner of a registry folder only others cannot write into; undefined otherwise (or missing). */
function trustedOwner(dir: string): number | undefined {
  try {
    const stats = statSync(dir);
    return stats.isDirectory() && (stats.mode & 0o022) === 0 ? stats.uid : undefined;
  } catch {
    return undefined;
  }
}

function fileOwner(file: string): number | undefined {
  try {
    return statSync(file).uid;
  } catch {
    return undefined;
  }
}

function readRegistration(file: string): DaemonRegistration | undefined {
  try {
    const parsed = registrationSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined; // gone meanwhile, unreadable, or not JSON: not a registration
  }
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
