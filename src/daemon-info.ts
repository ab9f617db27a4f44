import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError } from './errors.js';
import { writeOwnerOnlyFile } from './lib/owner-only.js';
import type { RedisTarget } from './redis/redis-server.js';

/**
 * The running daemon's description of itself, written to its data dir at start so commands
 * (`schedflow jobs`) find its Redis, queues and history: the contract between the two, here
 * rather than in main.ts, so the CLI imports no composition root.
 */
export interface DaemonInfo {
  pid: number;
  redis: RedisTarget;
  queuePrefix: string;
  historyFile: string;
  profiles: string[];
  defaultProfile: string;
  /**
   * What each profile can take, as known at start (src/requests/door.ts): the account its token
   * is bound to (null: not bound) and the scopes submitting needs that it lacks. Absent in the
   * file of a daemon older than this.
   */
  doors?: Record<string, { boundAccount: string | null; missingScopes: string[] }>;
}

export const DAEMON_INFO_FILE = 'daemon.json';

/** Owner-only: it names the Redis socket and the history file. */
export function writeDaemonInfo(dataDir: string, info: DaemonInfo): void {
  writeOwnerOnlyFile(join(dataDir, DAEMON_INFO_FILE), JSON.stringify(info, null, 2));
}

/** The running daemon of a data dir, as it described itself at start. */
export function readDaemonInfo(dataDir: string): DaemonInfo {
  const file = join(resolve(dataDir), DAEMON_INFO_FILE);
  if (!existsSync(file)) {
    throw new ConfigError(
      `no schedflow daemon has run with data dir ${resolve(dataDir)}: start one (npm start, or schedflow start --data-dir ${dataDir})`,
    );
  }
  return JSON.parse(readFileSync(file, 'utf8')) as DaemonInfo;
}
