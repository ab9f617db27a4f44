import { environmentMask, isSecretName, MIN_SECRET_LENGTH, SECRET_NAME_WORDS } from '../lib/secret-env.js';

/**
 * Redaction of everything a summary sends to the LLM (and stores), and of the
 * output a job's pages show: values of the job's environment, tokens and keys
 * in their usual shapes, and the site's own patterns. A known secret value is
 * also found base64-, URL- or hex-encoded, reversed, or with its characters
 * spaced apart (docs/summaries.md says what is still not found).
 */

export const REDACTED = '[redacted]';

/**
 * Encoded, reversed and spaced forms are searched for only from this length: a shorter value's
 * forms are short enough to turn up by chance in unrelated base64 or hex.
 */
export const MIN_ENCODED_SECRET_LENGTH = 6;

/**
 * Names worth a closer look (isSecretName decides): every word that makes a name a secret's,
 * anywhere in it, so the scan finds `DB_PASS` and `apiKey` as well as `API_TOKEN`.
 */
const CANDIDATE_NAME = `(?:${SECRET_NAME_WORDS}|pass|pw|auth|creds?|cookie|sessionid|signature|keys?)`;

/** Masks a `name=value` match only when `isSecretName` says the name is a secret's. */
const bySecretName =
  (prefix: (name: string) => string) =>
  (match: string, name: string, sep: string, quote: string): string =>
    isSecretName(prefix(name)) ? `${name}${sep}${quote}${REDACTED}${quote}` : match;

/**
 * Built-in shapes of secrets: `name=value` pairs whose name says secret,
 * bearer and basic credentials, user info in URLs, private key blocks, and the
 * token formats of common services.
 */
const BUILT_IN: readonly { pattern: RegExp; replace: string | ((match: string, ...groups: string[]) => string) }[] = [
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
    // NAME=value and NAME: value with a secret's name (API_TOKEN, db_password, apiKey, DB_PASS...).
    pattern: new RegExp(
      `\\b([A-Za-z0-9_.-]*${CANDIDATE_NAME}[A-Za-z0-9_.-]*)(\\s*[=:]\\s*)(["']?)(?!\\[redacted)([^\\s"',;]+)\\3`,
      'gi',
    ),
    replace: bySecretName((name) => name),
  },
  {
    // Command-line flags: --api-key VALUE, -password VALUE.
    pattern: new RegExp(
      `(\\s--?[A-Za-z0-9_-]*${CANDIDATE_NAME}[A-Za-z0-9_-]*)(\\s+)(["']?)(?!\\[redacted)([^\\s"']+)\\3`,
      'gi',
    ),
    replace: bySecretName((flag) => flag.trim().replace(/^-+/, '')),
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

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/** Where the base64 of a value starts to depend on its bytes alone, after 0, 1 or 2 bytes before it. */
const BASE64_FIRST_OWN_CHAR = [0, 2, 3] as const;

/**
 * The base64 forms of a value: its whole encoding (with and without padding), and the part of
 * the encoding that is the same wherever the value sits in a longer encoded text (three ways,
 * one for each position modulo 3 bytes), each also in the URL-safe alphabet.
 */
function base64Forms(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  const whole = bytes.toString('base64');
  const forms = [whole, whole.replace(/=+$/, '')];
  for (const [before, first] of BASE64_FIRST_OWN_CHAR.entries()) {
    const encoded = Buffer.concat([Buffer.alloc(before), bytes]).toString('base64');
    // The last character that holds none of the following bytes' bits.
    const end = Math.floor(((before + bytes.length) * 8) / 6);
    forms.push(encoded.slice(first, end));
  }
  return forms.flatMap((f) => [f, f.replaceAll('+', '-').replaceAll('/', '_')]);
}

/** A value's URL-encoded forms: as encodeURIComponent gives it, with lower-case escapes, and as a form field. */
function urlForms(value: string): string[] {
  const encoded = encodeURIComponent(value);
  return [encoded, encoded.replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()), encoded.replaceAll('%20', '+')];
}

/** Its UTF-8 bytes in hex, lower and upper case. */
function hexForms(value: string): string[] {
  const hex = Buffer.from(value, 'utf8').toString('hex');
  return [hex, hex.toUpperCase()];
}

/** Characters that may stand between the characters of a spaced-out copy (`h u n t e r 2`, `h-u-n-t-e-r-2`). */
const SPACERS = ' \t\n.,:;_|/-';

/**
 * A pattern for the value's characters with one to three spacers between each two. The
 * spacers it allows are those the value does not hold, so each character of a text is read one
 * way only: the match takes time linear in the text.
 */
function spacedPattern(value: string): string | null {
  const chars = [...value];
  const spacers = [...SPACERS].filter((c) => !chars.includes(c));
  if (spacers.length === 0) return null;
  const between = `[${spacers.map(escapeRegExp).join('')}]{1,3}`;
  return chars.map(escapeRegExp).join(between);
}

export class Redactor {
  /** One alternation of every known secret's forms, longest first, so a value containing another is replaced whole. */
  private readonly known: RegExp | null;
  /** What each form is replaced by. */
  private readonly labels = new Map<string, string>();
  /**
   * The spaced-out copies, a pattern each: one alternation of them all ran 20 times slower (too
   * large for V8 to compile, it is interpreted).
   */
  private readonly spaced: { pattern: RegExp; label: string }[] = [];
  private readonly patterns: readonly RegExp[];

  constructor(input: RedactorInput = {}) {
    const secrets = new Map<string, string>();
    for (const entry of input.environment ?? []) {
      const eq = entry.indexOf('=');
      if (eq <= 0) continue;
      const value = entry.slice(eq + 1);
      if (value.trim().length >= MIN_SECRET_LENGTH) secrets.set(value, environmentMask(entry.slice(0, eq)));
    }
    for (const value of input.literals ?? []) {
      if (value.length >= MIN_SECRET_LENGTH) secrets.set(value, REDACTED);
    }
    for (const [value, label] of secrets) {
      this.labels.set(value, label);
      if (value.length < MIN_ENCODED_SECRET_LENGTH) continue;
      const reversed = [...value].reverse().join('');
      for (const form of [...base64Forms(value), ...urlForms(value), ...hexForms(value), reversed]) {
        // A form another secret has as its own value keeps that secret's label.
        if (!this.labels.has(form)) this.labels.set(form, label);
      }
      const spaced = spacedPattern(value);
      if (spaced) this.spaced.push({ pattern: new RegExp(spaced, 'g'), label });
    }
    const forms = [...this.labels.keys()].sort((a, b) => b.length - a.length);
    this.known = forms.length ? new RegExp(forms.map(escapeRegExp).join('|'), 'g') : null;
    this.patterns = input.patterns ?? [];
  }

  redact(text: string): string {
    let out = this.known ? text.replace(this.known, (form) => this.labels.get(form) ?? REDACTED) : text;
    for (const { pattern, label } of this.spaced) out = out.replace(pattern, label);
    for (const { pattern, replace } of BUILT_IN) {
      out = typeof replace === 'string' ? out.replace(pattern, replace) : out.replace(pattern, replace);
    }
    for (const pattern of this.patterns) out = out.replace(pattern, REDACTED);
    return out;
  }
}

/**
 * The redactor of a job's output as its pages show it (API, UI, CLI): every value of the job's
 * own environment, in every form the redactor knows, and the built-in shapes.
 */
export function outputRedactor(spec: unknown): Redactor {
  const env = (spec as { environment?: unknown } | null)?.environment;
  const environment = Array.isArray(env)
    ? env.filter((e): e is string => typeof e === 'string')
    : env !== null && typeof env === 'object'
      ? Object.entries(env).map(([name, value]) => `${name}=${String(value)}`)
      : [];
  return new Redactor({ environment });
}
