import { readFileSync, type Stats, statSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../../errors.js';
import { refuseSharedAccess } from '../../lib/owner-only.js';
import { Secret } from '../../lib/secret.js';

export const UI_PASSWORD_FILE = 'ui-password';

/**
 * The web UI's password: SCHEDFLOW_UI_PASSWORD, else the text of
 * `<dataDir>/ui-password` (trimmed) when that file exists, else none (log in
 * with a token). A file other users can read is refused, as secrets are.
 */
export function loadUiPassword(dataDir: string, fromEnv?: Secret): Secret | null {
  if (fromEnv) return fromEnv.reveal() ? fromEnv : null;
  const file = join(dataDir, UI_PASSWORD_FILE);
  let stats: Stats;
  try {
    stats = statSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ConfigError(`cannot read the UI password file ${file}: ${(error as Error).message}`);
  }
  refuseSharedAccess(file, stats, 'UI password file');
  const value = readFileSync(file, 'utf8').trim();
  if (!value) throw new ConfigError(`UI password file ${file} is empty`);
  return new Secret(value);
}
