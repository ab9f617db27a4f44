/**
 * Redaction of everything a summary sends to the LLM (and stores): values of
 * the job's environment, tokens and keys in their usual shapes, and the
 * site's own patterns. Applied to the whole prompt as a last step, so no part
 * of it (script, output, name, reason) can carry a secret out.
 */

export const REDACTED = '[redacted]';

/** Environment values shorter than this are not searched for in text (`1`, `yes` would wreck it). */
export const MIN_SECRET_LENGTH = 4;

/** Words that make a variable, key or flag name a secret's. */
const SECRET_NAME =
  '(?:token|secret|passw(?:or)?d|passwd|pwd|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?|auth[_-]?key)';

/**
 * Built-in shapes of secrets: `name=value` pairs whose name says secret,
 * bearer and basic credentials, user info in URLs, private key blocks, and the
 * token formats of common services.
 */
const BUILT_IN: readonly { pattern: RegExp; replace: string }[] = [
  {
    pattern: /-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g,
    replace: REDACTED,
  },
  { pattern: /\b(Bearer|Basic|Token)(\s+)[A-Za-z0-9._~+/=-]{8,}/gi, replace: `$1$2${REDACTED}` },
  {
    pattern: /\b((?:proxy-)?authorization|x-[a-z-]*(?:token|key|secret))(\s*[:=]\s*)("?)[^\s"]+/gi,
    replace: `$1$2$3${REDACTED}`,
  },
  {
    // NAME=value and NAME: value with a secret-sounding name (API_TOKEN, db_password, apiKey...).
    pattern: new RegExp(
      `\\b([A-Za-z0-9_.-]*${SECRET_NAME}[A-Za-z0-9_.-]*)(\\s*[=:]\\s*)(["']?)(?!\\[redacted)([^\\s"',;]+)\\3`,
      'gi',
    ),
    replace: `$1$2$3${REDACTED}$3`,
  },
  {
    // Command-line flags: --api-key VALUE, -password VALUE.
    pattern: new RegExp(
      `(\\s--?[A-Za-z0-9_-]*${SECRET_NAME}[A-Za-z0-9_-]*)(\\s+)(["']?)(?!\\[redacted)([^\\s"']+)\\3`,
      'gi',
    ),
    replace: `$1$2$3${REDACTED}$3`,
  },
  { pattern: /\b([a-z][a-z0-9+.-]*:\/\/)[^/\s:@]+:[^/\s@]+@/gi, replace: `$1${REDACTED}@` },
  { pattern: /\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}/g, replace: REDACTED },
  { pattern: /\bgh[pousr]_[A-Za-z0-9]{20,}/g, replace: REDACTED },
  { pattern: /\bgithub_pat_[A-Za-z0-9_]{20,}/g, replace: REDACTED },
  { pattern: /\bglpat-[A-Za-z0-9_-]{20,}/g, replace: REDACTED },
  { pattern: /\bxox[abposr]-[A-Za-z0-9-]{10,}/g, replace: REDACTED },
  { pattern: /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, replace: REDACTED },
  { pattern: /\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g, replace: REDACTED },
];

/** Parses a configured pattern: `/source/flags`, or a plain source (case-sensitive). `g` is always added. */
export function compilePattern(text: string): RegExp {
  const literal = /^\/(.+)\/([a-z]*)$/s.exec(text);
  const source = literal ? (literal[1] as string) : text;
  const flags = new Set((literal?.[2] ?? '').split('').filter(Boolean));
  flags.add('g');
  return new RegExp(source, [...flags].join(''));
}

export interface RedactorInput {
  /** `NAME=value` entries of the job's environment: every value is a secret. */
  environment?: readonly string[];
  /** Other literal secrets (the LLM key, tokens). */
  literals?: readonly string[];
  /** The site's patterns (`SCHEDFLOW_REDACT_PATTERNS`): every match is replaced. */
  patterns?: readonly RegExp[];
}

export class Redactor {
  private readonly literals: { value: string; label: string }[];
  private readonly patterns: readonly RegExp[];

  constructor(input: RedactorInput = {}) {
    const literals = new Map<string, string>();
    for (const entry of input.environment ?? []) {
      const eq = entry.indexOf('=');
      if (eq <= 0) continue;
      const value = entry.slice(eq + 1);
      if (value.trim().length >= MIN_SECRET_LENGTH) literals.set(value, `[redacted:${entry.slice(0, eq)}]`);
    }
    for (const value of input.literals ?? []) {
      if (value.length >= MIN_SECRET_LENGTH) literals.set(value, REDACTED);
    }
    // Longest first, so a value containing another is replaced whole.
    this.literals = [...literals]
      .map(([value, label]) => ({ value, label }))
      .sort((a, b) => b.value.length - a.value.length);
    this.patterns = input.patterns ?? [];
  }

  redact(text: string): string {
    let out = text;
    for (const { value, label } of this.literals) out = out.split(value).join(label);
    for (const { pattern, replace } of BUILT_IN) out = out.replace(pattern, replace);
    for (const pattern of this.patterns) out = out.replace(pattern, REDACTED);
    return out;
  }
}
