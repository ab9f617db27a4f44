import { readFileSync, type Stats, statSync } from 'node:fs';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { refuseSharedAccess } from '../lib/owner-only.js';
import { Secret } from '../lib/secret.js';

/** Where the chat-completions endpoint is, which model, and the bounds of one call. */
export const llmSettingsSchema = z.object({
  /**
   * The service's base address `{llm_url}`; requests go to `{llm_url}/v1/chat/completions`.
   * A trailing `/v1` is accepted and dropped.
   */
  url: z.url({ protocol: /^https?$/ }),
  /** A model from the endpoint's list (`GET /v1/models`). */
  model: z.string().min(1),
  /** The key itself (SCHEDFLOW_LLM_API_KEY). */
  apiKey: z.instanceof(Secret).optional(),
  /** A file holding the key, readable by its owner only (SCHEDFLOW_LLM_API_KEY_FILE). */
  apiKeyFile: z.string().min(1).optional(),
  /** One call, connection to the end of the answer. @defaultValue 60000 */
  timeoutMs: z.number().int().positive().default(60_000),
  /** Bound on the tokens of one completion. @defaultValue 400 */
  maxOutputTokens: z.number().int().positive().default(400),
  /**
   * The request member that carries the bound: `max_tokens` (what local servers such as
   * vLLM, llama.cpp and Ollama read) or `max_completion_tokens` (OpenAI's newer name).
   * @defaultValue 'max_tokens'
   */
  maxTokensField: z.enum(['max_tokens', 'max_completion_tokens']).default('max_tokens'),
  /** @defaultValue 0.2 */
  temperature: z.number().min(0).max(2).default(0.2),
});
export type LlmSettings = z.output<typeof llmSettingsSchema>;
export type LlmSettingsInput = z.input<typeof llmSettingsSchema>;

/** The base address without a trailing slash or `/v1`. */
export function baseUrlOf(url: string): string {
  return url.replace(/\/+$/, '').replace(/\/v1$/, '');
}

/**
 * Reads a key file, refusing one other users can read (like scheduler token
 * files). The key is trimmed and never appears in a message.
 */
export function readKeyFile(file: string, what = 'LLM API key file'): Secret {
  let stats: Stats;
  try {
    stats = statSync(file);
  } catch (error) {
    throw new ConfigError(`cannot read the ${what} ${file}: ${(error as Error).message}`);
  }
  refuseSharedAccess(file, stats, `the ${what}`);
  const value = readFileSync(file, 'utf8').trim();
  if (!value) throw new ConfigError(`the ${what} ${file} is empty`);
  return new Secret(value);
}

/** The API key: given directly, or read from its file. */
export function apiKeyOf(settings: Pick<LlmSettings, 'apiKey' | 'apiKeyFile'>): Secret {
  if (settings.apiKey && settings.apiKeyFile) {
    throw new ConfigError('give the LLM API key once: SCHEDFLOW_LLM_API_KEY or SCHEDFLOW_LLM_API_KEY_FILE, not both');
  }
  if (settings.apiKey) return settings.apiKey;
  if (settings.apiKeyFile) return readKeyFile(settings.apiKeyFile);
  throw new ConfigError(
    'the LLM endpoint needs an API key (from the service portal): set SCHEDFLOW_LLM_API_KEY_FILE to a file only you can read, or SCHEDFLOW_LLM_API_KEY',
  );
}
