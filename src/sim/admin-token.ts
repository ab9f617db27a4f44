import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Secret } from '../lib/secret.js';
import { MIN_TOKEN_LENGTH, SimConfigError } from './sim-config.js';

/** The file in the state dir that holds the admin credential of the simulator's `/_sim` routes. */
export const ADMIN_TOKEN_FILE = 'admin-token';

/**
 * The credential of the simulator's `/_sim` routes (its switches, its statistics, every prompt
 * its LLM endpoint received): made on first start in `<stateDir>/admin-token`, readable only by
 * its owner, and kept across restarts, so whoever drives the simulator reads it from there.
 * Anyone else on the host, a job included, gets 401.
 */
export function ensureAdminToken(stateDir: string): { token: Secret; file: string } {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const file = join(stateDir, ADMIN_TOKEN_FILE);
  try {
    // 'wx': never through a link or over a file someone else put there.
    writeFileSync(file, randomBytes(32).toString('base64url'), { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const stat = statSync(file);
  if (!stat.isFile() || (stat.mode & 0o077) !== 0) {
    throw new SimConfigError(
      `the simulator's admin token file ${file} is readable by other users; remove it (a new one is made at start) or run: chmod 600 ${file}`,
    );
  }
  const token = readFileSync(file, 'utf8').trim();
  if (token.length < MIN_TOKEN_LENGTH) {
    throw new SimConfigError(
      `the simulator's admin token in ${file} is shorter than ${MIN_TOKEN_LENGTH} characters; remove the file, a new one is made at start`,
    );
  }
  return { token: new Secret(token), file };
}

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/** Whether an Authorization header carries the admin token, compared in constant time. */
export function isAdminCredential(authorization: string | undefined, token: Secret): boolean {
  const match = /^bearer\s+(\S+)\s*$/i.exec(authorization?.trim() ?? '');
  // Digests first, so the comparison takes the same time whatever the length presented.
  return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), digest(token.reveal()));
}
