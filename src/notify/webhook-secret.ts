import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError } from '../errors.js';
import { refuseSharedAccess } from '../lib/owner-only.js';
import { Secret } from '../lib/secret.js';

export const WEBHOOK_SECRET_ENV = 'SCHEDFLOW_WEBHOOK_SECRET';
export const WEBHOOK_SECRET_FILE = 'webhook-secret';

export interface WebhookSecret {
  secret: Secret;
  /** Where it came from, to tell receivers (never the value): the variable's name or the file's path. */
  source: string;
}

/**
 * The key webhooks are signed with: `SCHEDFLOW_WEBHOOK_SECRET` when set (given
 * here as `fromEnv`), else `<dataDir>/webhook-secret`, made at first start
 * from 32 random bytes (hex) and readable only by its owner. Receivers use the
 * file's text, trimmed, as the HMAC key. A file other users can read is
 * refused, as token files are.
 */
export function loadWebhookSecret(dataDir: string, fromEnv?: Secret): WebhookSecret {
  if (fromEnv) return { secret: fromEnv, source: WEBHOOK_SECRET_ENV };
  const file = join(dataDir, WEBHOOK_SECRET_FILE);
  mkdirSync(dataDir, { recursive: true });
  try {
    // `wx`: two processes starting at once on one data dir never overwrite each other's secret.
    writeFileSync(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      throw new ConfigError(`cannot create the webhook secret ${file}: ${(error as Error).message}`);
    }
  }
  refuseSharedAccess(file, statSync(file), 'webhook secret');
  const value = readFileSync(file, 'utf8').trim();
  if (!value) throw new ConfigError(`webhook secret ${file} is empty (delete it to have a new one made)`);
  return { secret: new Secret(value), source: file };
}
