import { readFileSync, type Stats, statSync } from 'node:fs';
import { ConfigError } from '../../errors.js';
import { refuseSharedAccess } from '../../lib/owner-only.js';
import { Secret } from '../../lib/secret.js';

/**
 * The OIDC client secret from the file the settings name (trimmed), read once at start: a file
 * other users can read is refused, as every secret file is; the value goes nowhere but to the
 * provider's token endpoint. No file named: a public client (PKCE alone), null.
 */
export function loadOidcClientSecret(file: string | undefined): Secret | null {
  if (file === undefined) return null;
  let stats: Stats;
  try {
    stats = statSync(file);
  } catch (error) {
    throw new ConfigError(
      `cannot read the OIDC client secret file ${file}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
    );
  }
  refuseSharedAccess(file, stats, 'OIDC client secret file');
  const value = readFileSync(file, 'utf8').trim();
  if (!value) throw new ConfigError(`OIDC client secret file ${file} is empty`);
  return new Secret(value);
}
