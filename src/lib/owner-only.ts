import { chmodSync, mkdirSync, type Stats, statSync, writeFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';

/**
 * Files and folders for their owner alone: secrets, and the data dir with the
 * job scripts, environment values and webhook URLs the history holds. A mode
 * given to mkdir or open passes through the process umask, which can only take
 * bits away, never make a file that already exists private: hence the chmod
 * after each.
 */

/**
 * Refuses a secret file or a private folder that other users can reach: any
 * permission bit for group or others, not only reading, since a writable or
 * traversable entry is as much a leak. The message says the command that fixes it.
 */
export function refuseSharedAccess(path: string, stats: Pick<Stats, 'mode' | 'isDirectory'>, what: string): void {
  if ((stats.mode & 0o077) === 0) return;
  const owner = stats.isDirectory() ? '700' : '600';
  throw new ConfigError(`refusing ${what} ${path}: other users can read it; run chmod ${owner} ${path}`);
}

/**
 * Makes a folder 0700, or checks an existing one: one that other users can
 * reach is refused rather than changed, as it may have been opened on purpose
 * and its owner should decide (and look at what was exposed).
 */
export function ensureOwnerOnlyDir(dir: string, what: string): void {
  let stats: Stats;
  try {
    stats = statSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new ConfigError(`cannot use the ${what} ${dir}: ${(error as Error).message}`);
    }
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    return;
  }
  if (!stats.isDirectory()) throw new ConfigError(`the ${what} ${dir} is not a folder`);
  refuseSharedAccess(dir, stats, what);
}

/** Writes a file readable and writable by its owner only, also when it existed with wider rights. */
export function writeOwnerOnlyFile(path: string, data: string): void {
  writeFileSync(path, data, { mode: 0o600 });
  chmodSync(path, 0o600);
}
