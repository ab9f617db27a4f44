/**
 * Which names say "secret", and how a secret environment value is shown: the
 * one rule the redaction of output and prompts (src/summaries/redact.ts) and
 * every view of a job spec (API, UI, CLI, webhooks) share, so a value masked
 * in a job's output is masked the same way in its spec. Here, in the
 * foundation, because the views sit below the summaries.
 */

/** Words that make a variable, key or flag name a secret's wherever they appear in it (`MYTOKEN`, `dbpassword`). */
export const SECRET_NAME_WORDS =
  '(?:token|secret|passw(?:or)?d|passwd|pwd|passphrase|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?|auth[_-]?key)';

const SECRET_WORDS_ANYWHERE = new RegExp(SECRET_NAME_WORDS, 'i');

/**
 * Words that say secret only as a whole part of the name (`DB_PASS`, `X_AUTH`), not inside
 * another word (`PASSAGE`, `AUTHOR`, `COMPASS_PASSES`).
 */
const SECRET_PARTS = new Set(['pass', 'pw', 'auth', 'cred', 'creds', 'cookie', 'sessionid', 'signature']);

/** `key` is a secret's in a longer name (`SSH_KEY`, `apiKey`), not alone (`key: id` in a tool's output). */
const KEY_PARTS = new Set(['key', 'keys']);

/** The parts of a name: split at `_`, `-`, `.` and lower-to-upper case changes (`dbPass` → db, pass). */
function nameParts(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .split(/[_.-]+/)
    .filter(Boolean);
}

/** True when a variable (or key, or flag) of this name most likely holds a secret. */
export function isSecretName(name: string): boolean {
  if (SECRET_WORDS_ANYWHERE.test(name)) return true;
  const parts = nameParts(name);
  return parts.some((p) => SECRET_PARTS.has(p) || (KEY_PARTS.has(p) && parts.length > 1));
}

/** What stands for the value of the environment variable `name` wherever it is masked. */
export function environmentMask(name: string): string {
  return `[redacted:${name}]`;
}

/** Environment values shorter than this are not searched for in text (`1`, `yes` would wreck it). */
export const MIN_SECRET_LENGTH = 4;

/** The `[name, value]` pairs of an environment (`NAME=value` entries, or a map as a job file may give it). */
function entriesOf(environment: unknown): [string, unknown][] {
  if (Array.isArray(environment)) {
    return environment.flatMap((entry): [string, unknown][] => {
      if (typeof entry !== 'string') return [];
      const eq = entry.indexOf('=');
      return eq > 0 ? [[entry.slice(0, eq), entry.slice(eq + 1)]] : [];
    });
  }
  return environment !== null && typeof environment === 'object' ? Object.entries(environment) : [];
}

/**
 * A job's `environment` with the values of secret-looking names masked, for showing. Never for
 * submitting: the history keeps the real values, which a retry or a re-submission sends again.
 */
export function maskedEnvironment(environment: unknown): unknown {
  if (Array.isArray(environment)) {
    return environment.map((entry) => {
      if (typeof entry !== 'string') return entry;
      const eq = entry.indexOf('=');
      const name = eq > 0 ? entry.slice(0, eq) : '';
      return name && isSecretName(name) ? `${name}=${environmentMask(name)}` : entry;
    });
  }
  if (environment !== null && typeof environment === 'object') {
    return Object.fromEntries(
      Object.entries(environment).map(([name, value]) => [name, isSecretName(name) ? environmentMask(name) : value]),
    );
  }
  return environment;
}

/**
 * A job spec as shown: its secret-looking environment values masked, in the environment and
 * wherever else the spec's texts hold them (a script that sets or echoes one), longest first.
 */
export function maskedSpec<T>(spec: T): T {
  if (spec === null || typeof spec !== 'object' || !('environment' in spec)) return spec;
  const secrets = entriesOf(spec.environment)
    .filter(([name, value]) => isSecretName(name) && String(value).length >= MIN_SECRET_LENGTH)
    .map(([name, value]) => ({ value: String(value), mask: environmentMask(name) }))
    .sort((a, b) => b.value.length - a.value.length);
  const masked = (text: string) => secrets.reduce((out, s) => out.split(s.value).join(s.mask), text);
  return Object.fromEntries(
    Object.entries(spec).map(([key, value]) => [
      key,
      key === 'environment' ? maskedEnvironment(value) : typeof value === 'string' ? masked(value) : value,
    ]),
  ) as T;
}
