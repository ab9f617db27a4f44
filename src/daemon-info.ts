import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from './errors.js';
import { writeOwnerOnlyFile } from './lib/owner-only.js';

/**
 * The running daemon's description of itself, written to its data dir at start so commands
 * (`schedflow jobs`) find its history and profiles (what they ask of it goes through its local
 * API, local-api.json): the contract between the two, here
 * rather than in main.ts, so the CLI imports no composition root.
 */
export interface DaemonInfo {
  pid: number;
  /** The SQLite history; null when it is on PostgreSQL. */
  historyFile: string | null;
  /**
   * The PostgreSQL history's URL (DATABASE_URL, password included), for `schedflow jobs` on this
   * host: this file is its owner's alone, as the webhook secret beside it.
   */
  historyUrl?: string;
  profiles: string[];
  defaultProfile: string;
}

export const DAEMON_INFO_FILE = 'daemon.json';

/** The data dir when nothing names one: `./data` of the folder a command runs in. */
export const DEFAULT_DATA_DIR = './data';

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

/**
 * Where the daemon's local API takes the CLI's requests (`schedflow jobs submit`, `cancel`,
 * `runs trigger` …), and the credential the CLI presents there: written by the process that
 * serves the API (the `web` role) once it listens, removed when it stops. The credential is
 * made afresh at each start and known otherwise only by its hash, in that process's memory;
 * the file is its owner's alone, as daemon.json (which names the Redis and PostgreSQL URLs).
 */
export interface LocalApi {
  /** The process serving the API. */
  pid: number;
  /** Its base URL as bound, `http://127.0.0.1:8080`. */
  url: string;
  /** The CLI's bearer token for this start (src/http/api/local-credential.ts). */
  token: string;
}

export const LOCAL_API_FILE = 'local-api.json';

const localApiSchema = z.object({
  pid: z.number().int().positive(),
  url: z.url({ protocol: /^https?$/ }),
  token: z.string().min(1),
});

/** Writes the file; `remove()` removes it at the stop, unless another start has written its own since. */
export function writeLocalApi(dataDir: string, api: LocalApi): { remove(): void } {
  const file = join(dataDir, LOCAL_API_FILE);
  writeOwnerOnlyFile(file, JSON.stringify(api, null, 2));
  return {
    remove: () => {
      if (readLocalApi(dataDir)?.token === api.token) rmSync(file, { force: true });
    },
  };
}

/** The local API of a data dir as its daemon published it; null when none is (stopped, or no `web` role). */
export function readLocalApi(dataDir: string): LocalApi | null {
  const file = join(resolve(dataDir), LOCAL_API_FILE);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null; // no daemon serves the API here now
  }
  try {
    const parsed = localApiSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null; // being written over (it is written whole, but a torn read costs nothing here)
  }
}
