import type { Stats } from 'node:fs';
import { ConfigError } from '../errors.js';

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
