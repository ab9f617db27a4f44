import { ConfigError } from '../errors.js';

/**
 * The one reader of whole-number settings from the environment (milliseconds, counts, bytes):
 * the daemon's tuning variables (src/config/daemon-config.ts) and the summaries' and LLM's
 * (src/summaries/summary-settings.ts). `names` maps each variable to the setting it feeds; a
 * variable unset or blank is left out, one set to anything but digits is refused naming the
 * variable, so the user knows which line of their environment to fix. Ranges (positive, at
 * most …) are the settings' schema's to check.
 */
export function readEnvWholeNumbers<K extends string>(
  env: NodeJS.ProcessEnv,
  names: Readonly<Record<string, K>>,
): Partial<Record<K, number>> {
  const out: Partial<Record<K, number>> = {};
  for (const [name, key] of Object.entries(names)) {
    const raw = env[name]?.trim();
    if (!raw) continue;
    if (!/^\d+$/.test(raw)) throw new ConfigError(`${name}: a whole number, not "${raw}"`);
    out[key] = Number(raw);
  }
  return out;
}
