import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { readEnvWholeNumbers } from '../lib/env-numbers.js';
import { Secret } from '../lib/secret.js';
import { llmSettingsSchema } from '../llm/llm-settings.js';
import { compilePattern } from './redact.js';

/** Settings of post-job summaries and of the LLM endpoint that writes them. */
export const summarySettingsSchema = z.object({
  /**
   * Summarize every request and pipeline run that ends, unless its own setting
   * says otherwise. Unset: off, but on in the embedded demo (`npm start` without a profile).
   */
  enabled: z.boolean().optional(),
  /** The chat-completions endpoint; without it every summary is the template's. */
  llm: llmSettingsSchema.optional(),
  /** How often ended requests and runs are looked for, and pending summaries queued. @defaultValue 2000 */
  dispatchEveryMs: z.number().int().positive().default(2000),
  /** LLM attempts per summary before it is recorded failed (the template stays). @defaultValue 5 */
  attempts: z.number().int().positive().default(5),
  /** First retry delay; each next one doubles, with jitter, never sooner than Retry-After. @defaultValue 10000 */
  backoffMs: z.number().int().positive().default(10_000),
  /** LLM calls in flight at once, per worker process. @defaultValue 2 */
  concurrency: z.number().int().positive().default(2),
  /** LLM requests per UTC day; past it, summaries are the template's. @defaultValue 1000 */
  dailyRequestLimit: z.number().int().nonnegative().default(1000),
  /** LLM tokens (prompt + completion) per UTC day. @defaultValue 1000000 */
  dailyTokenLimit: z.number().int().nonnegative().default(1_000_000),
  /** Regular expressions whose matches are replaced before anything leaves (`/src/flags` or a plain source). */
  redactPatterns: z.array(z.string().min(1)).default([]),
  /** Lines of the script's head in a prompt. @defaultValue 40 */
  scriptHeadLines: z.number().int().nonnegative().default(40),
  /** Bytes of each output file's tail in a prompt. @defaultValue 4096 */
  outputTailBytes: z.number().int().nonnegative().default(4096),
  /** Earlier runs of a pipeline compared in its trend. @defaultValue 5 */
  trendRuns: z.number().int().nonnegative().default(5),
});
export type SummarySettings = z.output<typeof summarySettingsSchema>;
export type SummarySettingsInput = z.input<typeof summarySettingsSchema>;

/** Whole-number settings from the environment. */
const ENV_NUMBERS = {
  SCHEDFLOW_SUMMARY_EVERY_MS: 'dispatchEveryMs',
  SCHEDFLOW_SUMMARY_ATTEMPTS: 'attempts',
  SCHEDFLOW_SUMMARY_BACKOFF_MS: 'backoffMs',
  SCHEDFLOW_LLM_CONCURRENCY: 'concurrency',
  SCHEDFLOW_LLM_DAILY_REQUESTS: 'dailyRequestLimit',
  SCHEDFLOW_LLM_DAILY_TOKENS: 'dailyTokenLimit',
  SCHEDFLOW_SUMMARY_SCRIPT_LINES: 'scriptHeadLines',
  SCHEDFLOW_SUMMARY_OUTPUT_BYTES: 'outputTailBytes',
  SCHEDFLOW_SUMMARY_TREND_RUNS: 'trendRuns',
} as const satisfies Record<string, keyof SummarySettings>;

const LLM_ENV_NUMBERS = {
  SCHEDFLOW_LLM_TIMEOUT_MS: 'timeoutMs',
  SCHEDFLOW_LLM_MAX_TOKENS: 'maxOutputTokens',
} as const;

function onOff(name: string, raw: string): boolean {
  if (/^(on|true|1|yes)$/i.test(raw)) return true;
  if (/^(off|false|0|no)$/i.test(raw)) return false;
  throw new ConfigError(`${name}: on or off, not "${raw}"`);
}

/**
 * `SCHEDFLOW_REDACT_PATTERNS`: a JSON array of patterns, or one pattern a line.
 * Each must compile; the error names the one that does not.
 */
export function parseRedactPatterns(raw: string): string[] {
  let patterns: string[];
  if (raw.trim().startsWith('[')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch (error) {
      throw new ConfigError(`SCHEDFLOW_REDACT_PATTERNS: not a JSON array: ${(error as Error).message}`);
    }
    if (!Array.isArray(parsed) || !parsed.every((p) => typeof p === 'string')) {
      throw new ConfigError('SCHEDFLOW_REDACT_PATTERNS: a JSON array of strings');
    }
    patterns = parsed;
  } else {
    patterns = raw.split('\n');
  }
  patterns = patterns.map((p) => p.trim()).filter(Boolean);
  checkPatterns(patterns, 'SCHEDFLOW_REDACT_PATTERNS');
  return patterns;
}

export function checkPatterns(patterns: readonly string[], where: string): RegExp[] {
  return patterns.map((p, i) => {
    try {
      return compilePattern(p);
    } catch (error) {
      throw new ConfigError(
        `${where}: pattern #${i + 1} is not a valid regular expression: ${(error as Error).message}`,
      );
    }
  });
}

/**
 * The summary settings the environment gives, or undefined when it sets none.
 * A key file is only named here; it is read (and refused when others can
 * read it) when the daemon starts.
 */
export function summarySettingsFromEnv(env: NodeJS.ProcessEnv): SummarySettingsInput | undefined {
  const out: Record<string, unknown> = {};
  const enabled = env.SCHEDFLOW_SUMMARIES?.trim();
  if (enabled) out.enabled = onOff('SCHEDFLOW_SUMMARIES', enabled);
  Object.assign(out, readEnvWholeNumbers(env, ENV_NUMBERS));
  const patterns = env.SCHEDFLOW_REDACT_PATTERNS;
  if (patterns?.trim()) out.redactPatterns = parseRedactPatterns(patterns);

  const url = env.SCHEDFLOW_LLM_URL?.trim();
  const model = env.SCHEDFLOW_LLM_MODEL?.trim();
  if (url || model) {
    if (!url) throw new ConfigError('SCHEDFLOW_LLM_MODEL is set but SCHEDFLOW_LLM_URL is not: set the endpoint too');
    if (!model) {
      throw new ConfigError(
        `SCHEDFLOW_LLM_URL is set: set SCHEDFLOW_LLM_MODEL too (GET ${url.replace(/\/+$/, '')}/v1/models lists the models)`,
      );
    }
    const llm: Record<string, unknown> = { url, model };
    const key = env.SCHEDFLOW_LLM_API_KEY?.trim();
    if (key) llm.apiKey = new Secret(key);
    const keyFile = env.SCHEDFLOW_LLM_API_KEY_FILE?.trim();
    if (keyFile) llm.apiKeyFile = keyFile;
    Object.assign(llm, readEnvWholeNumbers(env, LLM_ENV_NUMBERS));
    const temperature = env.SCHEDFLOW_LLM_TEMPERATURE?.trim();
    if (temperature) {
      const value = Number(temperature);
      if (!Number.isFinite(value)) throw new ConfigError(`SCHEDFLOW_LLM_TEMPERATURE: a number, not "${temperature}"`);
      llm.temperature = value;
    }
    const field = env.SCHEDFLOW_LLM_MAX_TOKENS_FIELD?.trim();
    if (field) llm.maxTokensField = field;
    out.llm = llm;
  }
  return Object.keys(out).length ? (out as SummarySettingsInput) : undefined;
}
