import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ReceivedLlmRequest } from '../../../src/sim/llm/llm-sim.js';
import type { SimConfigInput } from '../../../src/sim/sim-config.js';
import type { TestSim } from '../../helpers/sim.js';

export const LLM_KEY = 'sk-test-0123456789abcdefghijkl';
export const LLM_MODEL = 'sim-summarizer';

/** A 0600 file holding `key`, in a fresh temporary folder. */
export function keyFile(key = LLM_KEY, mode = 0o600): string {
  const file = join(mkdtempSync(join(tmpdir(), 'schedflow-llm-')), 'key');
  writeFileSync(file, `${key}\n`, { mode });
  return file;
}

/** Simulator settings that serve the LLM endpoint with LLM_KEY. */
export function llmSimConfig(extra: NonNullable<SimConfigInput['llm']> = {}): SimConfigInput {
  return { llm: { keysFile: keyFile(), models: [LLM_MODEL, 'other-model'], ...extra } };
}

export function llmOf(sim: TestSim) {
  const llm = sim.server.llm;
  if (!llm) throw new Error('the simulator serves no LLM endpoint');
  return llm;
}

/** The chat-completion bodies the endpoint received. */
export function completionBodies(sim: TestSim): ReceivedLlmRequest[] {
  return llmOf(sim).received.filter((r) => r.path === '/v1/chat/completions');
}
