import type { DaemonConfigInput } from '../../../src/config/daemon-config.js';
import type { SummaryRow } from '../../../src/db/schema.js';
import { summaryOfRequest } from '../../../src/db/summaries.js';
import type { LlmSettingsInput } from '../../../src/llm/llm-settings.js';
import { type JobSpecInput, jobSpecSchema } from '../../../src/sched/job-spec.js';
import type { SummarySettingsInput } from '../../../src/summaries/summary-settings.js';
import type { TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import type { TestSim } from '../../helpers/sim.js';
import { keyFile, LLM_MODEL } from '../llm/llm-helpers.js';

/** What the files of post-job summaries end to end (summaries*.test.ts) share. */

export function settings(
  sim: TestSim,
  extra: Partial<SummarySettingsInput> = {},
  llm: Partial<LlmSettingsInput> = {},
): DaemonConfigInput {
  return {
    summaries: {
      enabled: true,
      dispatchEveryMs: 200,
      backoffMs: 200,
      attempts: 3,
      llm: { url: sim.url, model: LLM_MODEL, apiKeyFile: keyFile(), timeoutMs: 5000, ...llm },
      ...extra,
    },
  };
}

export function spec(sim: TestSim, over: Partial<JobSpecInput> & { script: string }) {
  return jobSpecSchema.parse({
    name: 'job',
    current_working_directory: sim.workDir,
    time_limit: 5,
    memory_per_node: 512,
    environment: ['PATH=/usr/bin:/bin'],
    ...over,
  });
}

export async function waitForSummary(td: TestDaemon, requestId: string, timeoutMs = 20_000): Promise<SummaryRow> {
  return waitFor(
    async () => {
      const s = await summaryOfRequest(td.daemon.history.store, requestId);
      return s && s.state !== 'pending' ? s : undefined;
    },
    { what: `the summary of ${requestId}`, timeoutMs, intervalMs: 100 },
  );
}
