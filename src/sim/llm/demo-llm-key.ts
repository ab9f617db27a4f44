import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The model the embedded demo's LLM endpoint serves and the daemon asks for. */
export const DEMO_LLM_MODEL = 'sim-summarizer';

/**
 * The demo's LLM API key: in `<dataDir>/demo-llm-key`, readable only by its
 * owner and never printed, and the simulator's keys file holding it.
 */
export function ensureDemoLlmKey(dataDir: string): { keyFile: string; keysFile: string } {
  const simDir = join(dataDir, 'sim');
  mkdirSync(simDir, { recursive: true, mode: 0o700 });
  const keyFile = join(dataDir, 'demo-llm-key');
  const keysFile = join(simDir, 'llm-keys');
  if (!existsSync(keyFile)) writeFileSync(keyFile, `sk-demo-${randomBytes(24).toString('base64url')}`, { mode: 0o600 });
  writeFileSync(keysFile, `${readFileSync(keyFile, 'utf8').trim()}\n`, { mode: 0o600 });
  return { keyFile, keysFile };
}
