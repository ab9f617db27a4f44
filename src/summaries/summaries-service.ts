import type { History } from '../db/history.js';
import type { Clock } from '../lib/clock.js';
import { LlmClient } from '../llm/llm-client.js';
import { LlmModelError } from '../llm/llm-errors.js';
import { apiKeyOf, baseUrlOf } from '../llm/llm-settings.js';
import type { Logger } from '../logger.js';
import type { ClientRegistry } from '../sched/client-registry.js';
import { Semaphore } from './limiter.js';
import { type LlmGate, Summarizer } from './summarizer.js';
import type { SummarySettings } from './summary-settings.js';
import { SummaryTakeUp } from './summary-take-up.js';

/** How the daemon runs summaries, for the start banner and the local API. */
export interface SummariesStatus {
  /** The global setting: every ended request and run is summarized unless it says otherwise. */
  enabled: boolean;
  /** The endpoint and model; null: template summaries only. */
  llm: { url: string; model: string } | null;
}

/**
 * The settings the daemon runs with. The embedded demo (no scheduler profile)
 * turns summaries on and uses the simulator's LLM endpoint, unless an LLM
 * was configured or summaries were turned off.
 */
export function resolveSummarySettings(
  settings: SummarySettings,
  demo: { url: string; keyFile: string; model: string } | null,
): SummarySettings & { enabled: boolean } {
  if (!demo) return { ...settings, enabled: settings.enabled ?? false };
  return {
    ...settings,
    enabled: settings.enabled ?? true,
    llm: settings.llm ?? {
      url: demo.url,
      model: demo.model,
      apiKeyFile: demo.keyFile,
      timeoutMs: 30_000,
      maxOutputTokens: 400,
      maxTokensField: 'max_tokens',
      temperature: 0.2,
    },
  };
}

export function summariesStatus(settings: SummarySettings & { enabled: boolean }): SummariesStatus {
  return {
    enabled: settings.enabled,
    llm: settings.llm ? { url: baseUrlOf(settings.llm.url), model: settings.llm.model } : null,
  };
}

/**
 * What the summarize queue's worker (workers/start-workers.ts) runs: the LLM client (its key
 * read here, refused when others can read its file), the model check, the take-up of ended
 * requests and runs, and the summarizer. `close()` closes the LLM client, after the worker.
 */
export function createSummaryServices(deps: {
  settings: SummarySettings & { enabled: boolean };
  store: History;
  logger: Logger;
  clients: ClientRegistry;
  /** Folders no job output is read from (the data dir, the configuration). */
  protectedDirs: readonly string[];
  /** The daemon's clock. @defaultValue systemClock */
  clock?: Clock;
}): { summarizer: Summarizer; takeUp: SummaryTakeUp; logger: Logger; close(): Promise<void> } {
  const { settings } = deps;
  const logger = deps.logger.child({ component: 'summaries' });
  let gate: LlmGate | null = null;
  const secrets: string[] = [];
  if (settings.llm) {
    const key = apiKeyOf(settings.llm);
    secrets.push(key.reveal());
    const client = new LlmClient(settings.llm, key);
    gate = { client, semaphore: new Semaphore(settings.concurrency), disabledReason: null };
    const checked = gate;
    // In the background: an endpoint behind a VPN may not answer now, and the daemon's
    // other work must not wait for it. A model it does not serve turns the LLM off.
    void client.checkModel({ signal: AbortSignal.timeout(Math.min(settings.llm.timeoutMs, 15_000)) }).then(
      (models) =>
        logger.info(
          { url: client.baseUrl, model: client.model, listed: models !== null },
          models === null
            ? 'LLM endpoint offers no model list; summaries use model %s'
            : 'LLM endpoint serves model %s',
          client.model,
        ),
      (error: Error) => {
        if (error instanceof LlmModelError) {
          checked.disabledReason = error.message;
          logger.error({ url: client.baseUrl, available: error.available }, error.message);
        } else {
          logger.warn({ url: client.baseUrl, err: error }, 'LLM model check failed; summaries will try');
        }
      },
    );
  }
  const summarizer = new Summarizer({
    store: deps.store,
    logger,
    settings,
    llm: gate,
    secrets,
    protectedDirs: deps.protectedDirs,
    clock: deps.clock,
    fetchAccounting: async (profile, jobId) =>
      (await deps.clients.get(profile).getAccountingJob(jobId, { signal: AbortSignal.timeout(15_000) })).data,
  });
  return {
    summarizer,
    takeUp: new SummaryTakeUp({ store: deps.store, enabled: settings.enabled }),
    logger,
    close: async () => {
      await gate?.client.close();
    },
  };
}
