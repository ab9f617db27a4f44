import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const DEMO_USER = 'demo';
export const DEMO_ACCOUNT = 'demo';

/**
 * The demo token lives in a file only its owner can read, and is never printed:
 * the banner shows how to use it without showing it.
 */
export function ensureDemoToken(dataDir: string): { tokenFile: string; tokensFile: string } {
  const simDir = join(dataDir, 'sim');
  mkdirSync(simDir, { recursive: true, mode: 0o700 });
  const tokenFile = join(dataDir, 'demo-token');
  const tokensFile = join(simDir, 'tokens.json');
  if (!existsSync(tokenFile)) writeFileSync(tokenFile, randomBytes(24).toString('base64url'), { mode: 0o600 });
  const token = readFileSync(tokenFile, 'utf8').trim();
  const tokens = {
    [token]: { user: DEMO_USER, account: DEMO_ACCOUNT, scopes: ['sched:read', 'scheddb:read', 'sched:jobs:manage'] },
  };
  writeFileSync(tokensFile, JSON.stringify(tokens, null, 2), { mode: 0o600 });
  return { tokenFile, tokensFile };
}
