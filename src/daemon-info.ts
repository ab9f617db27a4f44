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
  /** The SQLite history; null when it is on PostgreSQL. */
  historyFile: string | null;
  /**
   * The PostgreSQL history's URL (DATABASE_URL, password included), for `schedflow jobs` on this
   * host: this file is its owner's alone, as the Redis URL in it and the webhook secret beside it.
   */
  historyUrl?: string;
  profiles: string[];
  defaultProfile: string;
  /**
   * What each profile can take, as known now (src/requests/door.ts decides from it): the CLI
   * refuses what the daemon would before anything is queued. Written again whenever the daemon
   * learns more. Absent in the file of a daemon older than this.
   */
  doors?: Record<string, ProfileDoor>;
}

/** What stands in the way of a submission to one profile, known before it is sent. */
export interface ProfileDoor {
  /** The account the proxy token is bound to; null: not bound. */
  boundAccount: string | null;
  /** The scopes submitting needs that the token lacks. */
  missingScopes: string[];
  /** How the missing scopes are known. Absent in an older daemon's file. */
  scopesFrom?: 'probe' | 'declared' | 'not-applicable';
  /** The account charged when a job names none (the profile's `account`). */
  defaultAccount?: string | null;
  /** The Slurm user whose associations `associatedAccounts` are. */
  user?: string | null;
  /** The accounts the user has an association with; null or absent: not known, nothing refused. */
  associatedAccounts?: string[] | null;
  /** The profile's `maxArraySize`. Absent in an older daemon's file: Slurm's default, 1001. */
  maxArraySize?: number;
  /**
   * Why the profile cannot work now, as the daemon's check of it found (src/sched/profile-check.ts):
   * `kind` and one sentence with the fix. Null or absent: nothing known against it.
   */
  problem?: { kind: string; sentence: string } | null;
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
