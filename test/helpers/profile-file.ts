import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ALICE_TOKEN } from './sim.js';

/** Writes a profile for a scheduler URL with Alice's token (account lab) into a config dir. */
export function writeProfile(configDir: string, url: string, extra: Record<string, unknown> = {}): void {
  mkdirSync(join(configDir, 'profiles'), { recursive: true });
  const tokenFile = join(configDir, 'alice.token');
  writeFileSync(tokenFile, ALICE_TOKEN, { mode: 0o600 });
  const profile = { url, auth: { type: 'bearer', tokenFile }, account: 'lab', version: 'v0.0.44', ...extra };
  writeFileSync(join(configDir, 'profiles', 'test.yaml'), JSON.stringify(profile));
}
