import { chmodSync } from 'node:fs';
import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { Secret } from '../../../src/lib/secret.js';
import { type ChatMessage, LlmClient } from '../../../src/llm/llm-client.js';
import {
  LlmAuthError,
  LlmModelError,
  LlmRateLimitedError,
  LlmTimeoutError,
  LlmUnavailableError,
  LlmUnreachableError,
} from '../../../src/llm/llm-errors.js';
import { apiKeyOf, type LlmSettingsInput, llmSettingsSchema } from '../../../src/llm/llm-settings.js';
import { http } from '../../helpers/http.js';
import { startSim, type TestSim } from '../../helpers/sim.js';
import { completionBodies, keyFile, LLM_KEY, LLM_MODEL, llmOf, llmSimConfig } from './llm-helpers.js';
import { openAiProblems } from './openai-schema.js';

/** The chat-completions client against the simulator's OpenAI-compatible endpoint, over loopback. */

let sim: TestSim;
const clients: LlmClient[] = [];

beforeAll(async () => {
  sim = await startSim(llmSimConfig());
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await sim.stop();
});
beforeEach(() => {
  llmOf(sim).setFault({ mode: 'ok' });
  llmOf(sim).resetRecord();
});

function client(settings: Partial<LlmSettingsInput> = {}, key = LLM_KEY, url = sim.url): LlmClient {
  const parsed = llmSettingsSchema.parse({ url, model: LLM_MODEL, ...settings });
  const c = new LlmClient(parsed, new Secret(key));
  clients.push(c);
  return c;
}

const messages: ChatMessage[] = [
  { role: 'system', content: 'You summarise finished Slurm batch jobs.' },
  {
    role: 'user',
    content:
      'Job: hello (Slurm job 1000)\nOutcome: completed after 6 s (exit code 0)\nTime: 6 s of the 10 min limit (1%)',
  },
];

describe('chat completions', () => {
  it('sends model, messages, temperature and the output bound with the key as a bearer token; the request is a valid CreateChatCompletionRequest', async () => {
    const result = await client({ maxOutputTokens: 300, temperature: 0.1 }).chat(messages);
    expect(result.text).toBe(
      'Summary (simulated model): hello (Slurm job 1000). completed after 6 s (exit code 0). 6 s of the 10 min limit (1%).',
    );
    expect(result).toMatchObject({ model: LLM_MODEL, truncated: false });
    expect(result.promptTokens).toBeGreaterThan(10);
    expect(result.completionTokens).toBeGreaterThan(5);
    expect(result.latencyMs).toBeGreaterThanOrEqual(0);

    const [received] = completionBodies(sim);
    expect(received?.authorized).toBe(true);
    expect(received?.body).toEqual({ model: LLM_MODEL, messages, temperature: 0.1, max_tokens: 300 });
    expect(openAiProblems('CreateChatCompletionRequest', received?.body)).toEqual([]);
  });

  it('can carry the bound as max_completion_tokens, also a valid request', async () => {
    await client({ maxTokensField: 'max_completion_tokens', maxOutputTokens: 5 })
      .chat(messages)
      .then((r) => {
        // The simulated model stops at the bound, as a real one does.
        expect(r.truncated).toBe(true);
        expect(r.completionTokens).toBeLessThanOrEqual(5);
      });
    const body = completionBodies(sim)[0]?.body as Record<string, unknown>;
    expect(body.max_completion_tokens).toBe(5);
    expect(body).not.toHaveProperty('max_tokens');
    expect(openAiProblems('CreateChatCompletionRequest', body)).toEqual([]);
  });

  it("the simulator's answers are valid CreateChatCompletionResponse and ListModelsResponse documents", async () => {
    const headers = { authorization: `Bearer ${LLM_KEY}` };
    const completion = await http(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body: { model: LLM_MODEL, messages, temperature: 0.2, max_tokens: 100 },
    });
    expect(completion.status).toBe(200);
    expect(openAiProblems('CreateChatCompletionResponse', completion.json)).toEqual([]);
    const usage = (completion.json as { usage: Record<string, number> }).usage;
    expect(usage.total_tokens).toBe((usage.prompt_tokens ?? 0) + (usage.completion_tokens ?? 0));
    const models = await http(`${sim.url}/v1/models`, { headers });
    expect(openAiProblems('ListModelsResponse', models.json)).toEqual([]);
    // The same prompt, the same answer.
    const again = await http(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body: { model: LLM_MODEL, messages, temperature: 0.2, max_tokens: 100 },
    });
    expect((again.json as { choices: unknown }).choices).toEqual((completion.json as { choices: unknown }).choices);
  });
});

describe('typed errors', () => {
  it('401: a refused key, not retryable, with the endpoint message and never the key', async () => {
    const wrong = 'sk-wrong-key-000000000000';
    const error = await client({}, wrong)
      .chat(messages)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmAuthError);
    expect(error).toMatchObject({ retryable: false, status: 401, code: 'SCHEDFLOW_ERR_LLM_UNAUTHORIZED' });
    expect((error as LlmAuthError).detail.message).toMatch(/Incorrect API key/);
    expect((error as Error).message).toMatch(/SCHEDFLOW_LLM_API_KEY_FILE/);
    expect(JSON.stringify({ m: (error as Error).message, d: (error as LlmAuthError).detail })).not.toContain(wrong);
    expect(completionBodies(sim)[0]?.authorized).toBe(false);
  });

  it('404 for the model: not retryable, names the model', async () => {
    const error = await client({ model: 'no-such-model' })
      .chat(messages)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmModelError);
    expect(error).toMatchObject({ retryable: false, status: 404, model: 'no-such-model' });
    expect((error as Error).message).toMatch(/does not serve model "no-such-model"/);
  });

  it('429: retryable, with the Retry-After the endpoint sent', async () => {
    llmOf(sim).setFault({ mode: '429', retryAfterSec: 7 }, 1);
    const error = await client()
      .chat(messages)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmRateLimitedError);
    expect(error).toMatchObject({ retryable: true, status: 429, retryAfterMs: 7000 });
    // The fault was for one answer: the next call succeeds.
    await expect(client().chat(messages)).resolves.toMatchObject({ model: LLM_MODEL });
  });

  it('5xx: retryable, with the upstream message', async () => {
    llmOf(sim).setFault({ mode: '500' }, 1);
    const error = await client()
      .chat(messages)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmUnavailableError);
    expect(error).toMatchObject({ retryable: true, status: 500 });
    expect((error as LlmUnavailableError).detail.message).toMatch(/server had an error/);
  });

  it('a connection reset or refused: unreachable, retryable, and the message names the VPN', async () => {
    llmOf(sim).setFault({ mode: 'down' }, 1);
    const reset = await client()
      .chat(messages)
      .catch((e: unknown) => e);
    expect(reset).toBeInstanceOf(LlmUnreachableError);
    expect(reset).toMatchObject({ retryable: true, status: null });
    expect((reset as Error).message).toMatch(/institution’s network, on site or through its VPN/);

    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const refused = await client({}, LLM_KEY, `http://127.0.0.1:${port}`)
      .chat(messages)
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LlmUnreachableError);
    expect((refused as Error).message).toMatch(/ECONNREFUSED.*VPN/);
  });

  it('no answer in time: a retryable time-out', async () => {
    llmOf(sim).setFault({ mode: 'slow', delayMs: 3000 }, 1);
    const error = await client({ timeoutMs: 300 })
      .chat(messages)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmTimeoutError);
    expect(error).toMatchObject({ retryable: true });
    expect((error as Error).message).toMatch(/within 300 ms/);
    llmOf(sim).releaseWaiting();
  });
});

describe('the model check', () => {
  it('passes for a listed model and names the available ones otherwise', async () => {
    await expect(client().checkModel()).resolves.toEqual([LLM_MODEL, 'other-model']);
    const error = await client({ model: 'gpt-nonexistent' })
      .checkModel()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmModelError);
    expect((error as LlmModelError).available).toEqual([LLM_MODEL, 'other-model']);
    expect((error as Error).message).toBe(
      `the LLM endpoint at ${sim.url} has no model "gpt-nonexistent"; it offers "${LLM_MODEL}", "other-model": set SCHEDFLOW_LLM_MODEL to one of them`,
    );
  });

  it('is skipped when the endpoint offers no model list', async () => {
    const bare = await startSim(llmSimConfig({ listModels: false }));
    try {
      await expect(client({ model: 'anything' }, LLM_KEY, bare.url).checkModel()).resolves.toBeNull();
    } finally {
      await bare.stop();
    }
  });

  it('accepts the base address with /v1 too', async () => {
    await expect(client({}, LLM_KEY, `${sim.url}/v1/`).checkModel()).resolves.toContain(LLM_MODEL);
  });
});

describe('the API key', () => {
  it('is read from a file only its owner can read, and refused otherwise', () => {
    const file = keyFile('sk-from-file-0000000000');
    expect(apiKeyOf({ apiKeyFile: file }).reveal()).toBe('sk-from-file-0000000000');
    chmodSync(file, 0o644);
    expect(() => apiKeyOf({ apiKeyFile: file })).toThrow(ConfigError);
    expect(() => apiKeyOf({ apiKeyFile: file })).toThrow(`other users can read it; run chmod 600 ${file}`);
    expect(() => apiKeyOf({})).toThrow(/needs an API key/);
    expect(() => apiKeyOf({ apiKey: new Secret('x'), apiKeyFile: file })).toThrow(/not both/);
  });

  it('never shows in logs or JSON: it is a Secret', () => {
    const key = apiKeyOf({ apiKey: new Secret(LLM_KEY) });
    expect(JSON.stringify({ key })).not.toContain(LLM_KEY);
    expect(`${key}`).toBe('[redacted]');
  });
});
