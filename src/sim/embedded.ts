import { join } from 'node:path';
import type { Logger } from '../logger.js';
import { parseProfile } from '../sched/profile.js';
import { ensureDemoToken } from './demo-token.js';
import { DEMO_LLM_MODEL, ensureDemoLlmKey } from './llm/demo-llm-key.js';
import { parseSimConfig } from './sim-config.js';
import { SimServer } from './sim-server.js';

/**
 * With no profile configured, schedflow runs against its simulator, with a demo token and
 * profile, and the simulator's LLM endpoint with a demo key, so summaries show out of the box.
 */
export async function startEmbeddedSimulator(
  options: { dataDir: string; simPort: number; simJobUser?: string | undefined },
  logger: Logger,
) {
  const { tokenFile, tokensFile } = ensureDemoToken(options.dataDir);
  const llmKey = ensureDemoLlmKey(options.dataDir);
  const server = new SimServer({
    config: parseSimConfig({
      port: options.simPort,
      jobUser: options.simJobUser,
      tokensFile,
      stateDir: join(options.dataDir, 'sim'),
      llm: { keysFile: llmKey.keysFile, models: [DEMO_LLM_MODEL] },
    }),
    logger,
  });
  const url = await server.start();
  const profile = parseProfile('demo', {
    url,
    auth: { type: 'bearer', tokenFile },
    account: 'demo',
    version: 'latest',
    // The simulator is local: poll and submit without holding back.
    rateLimit: { capacity: 50, refillPerSecond: 50 },
  });
  return { server, url, profile, llm: { url, keyFile: llmKey.keyFile, model: DEMO_LLM_MODEL } };
}
