import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DaemonConfigInput } from '../../../src/config/daemon-config.js';
import { getRequest, listRequests, transitionsOf } from '../../../src/db/requests.js';
import type { SummaryRow } from '../../../src/db/schema.js';
import { llmUsageOf, summaryOfRequest, utcDay } from '../../../src/db/summaries.js';
import { ConfigError } from '../../../src/errors.js';
import type { LlmSettingsInput } from '../../../src/llm/llm-settings.js';
import { type JobSpecInput, jobSpecSchema } from '../../../src/sched/job-spec.js';
import type { SummarySettingsInput } from '../../../src/summaries/summary-settings.js';
import { apiClient, errorOf } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import type { TestSim } from '../../helpers/sim.js';
import { startWebhookReceiver } from '../../helpers/webhook-receiver.js';
import { completionBodies, keyFile, LLM_MODEL, llmOf, llmSimConfig } from '../llm/llm-helpers.js';
import { openAiProblems } from '../llm/openai-schema.js';

/** Post-job summaries end to end: daemon, simulator (scheduler and LLM endpoint), Redis, SQLite. */

const env = daemonTestEnv();

function settings(
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

function spec(sim: TestSim, over: Partial<JobSpecInput> & { script: string }) {
  return jobSpecSchema.parse({
    name: 'job',
    current_working_directory: sim.workDir,
    time_limit: 5,
    memory_per_node: 512,
    environment: ['PATH=/usr/bin:/bin'],
    ...over,
  });
}

async function waitForSummary(td: TestDaemon, requestId: string, timeoutMs = 20_000): Promise<SummaryRow> {
  return waitFor(
    async () => {
      const s = summaryOfRequest(td.daemon.history.db, requestId);
      return s && s.state !== 'pending' ? s : undefined;
    },
    { what: `the summary of ${requestId}`, timeoutMs, intervalMs: 100 },
  );
}

describe('a finished job gets a summary', () => {
  it('a completed job: written by the LLM with model, usage and latency; secrets in the job never reach it; the webhook gets summary.ready', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim));
    const receiver = await startWebhookReceiver();
    env.defer(() => receiver.stop());
    const id = await td.daemon.submit({
      origin: 'api',
      webhookUrl: `${receiver.url}/hooks`,
      spec: spec(sim, {
        name: 'hello',
        environment: ['API_TOKEN=hunter2', 'PATH=/usr/bin:/bin'],
        script:
          '#!/bin/sh\n# uses $API_TOKEN\necho "hello, token is $API_TOKEN"\necho "Authorization: Bearer hunter2-bearer-0000"\nsleep 2\n',
      }),
    });
    await td.waitForState(id, 'completed');
    const summary = await waitForSummary(td, id);
    expect(summary).toMatchObject({ state: 'ready', kind: 'llm', model: LLM_MODEL, attempts: 1, error: null });
    expect(summary.promptTokens).toBeGreaterThan(50);
    expect(summary.completionTokens).toBeGreaterThan(5);
    expect(summary.latencyMs).toBeGreaterThanOrEqual(0);
    expect(summary.text).toMatch(
      /^Summary \(simulated model\): hello \(Slurm job \d+\)\. completed after \d+ s \(exit code 0\)/,
    );
    // The simulator measures no CPU time: the summary says so rather than "0 %".
    expect(summary.text).toContain('not known: accounting reports 0 CPU seconds');
    expect(summary.findings?.triage).toBeNull();
    expect(summary.suggestion).toBeNull();

    const bodies = completionBodies(sim);
    expect(bodies).toHaveLength(1);
    expect(openAiProblems('CreateChatCompletionRequest', bodies[0]?.body)).toEqual([]);
    const sent = JSON.stringify(bodies);
    expect(sent).not.toContain('hunter2');
    // The output tail did go, with the secret replaced: redaction, not omission.
    expect(sent).toContain('hello, token is [redacted:API_TOKEN]');
    expect(sent).toContain('API_TOKEN');

    const [call] = await receiver
      .waitForCalls(2)
      .then((calls) => calls.filter((c) => c.headers['schedflow-event'] === 'summary.ready'));
    const body = JSON.parse(call?.body ?? '{}');
    expect(body).toMatchObject({
      event: 'summary.ready',
      summary: { request_id: id, kind: 'llm', state: 'ready', model: LLM_MODEL, text: summary.text },
    });
    expect(call?.body).not.toContain('hunter2');
    // Nothing about the job itself changed.
    expect(td.states(id)).toEqual(['accepted', 'queued', 'submitting', 'submitted', 'running', 'completed']);
  }, 40_000);

  it('peak memory, measured while the job ran and reported by accounting, against the memory it requested', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim));
    const id = await td.daemon.submit({
      origin: 'api',
      spec: spec(sim, {
        name: 'hungry',
        memory_per_node: 256,
        script: '#!/bin/sh\npython3 -c "b = bytearray(60 * 1024 * 1024); import time; time.sleep(1.5)"\n',
      }),
    });
    await td.waitForState(id, 'completed');
    const summary = await waitForSummary(td, id);
    const memory = summary.findings?.efficiency?.memory;
    expect(memory).toMatchObject({ known: true, of: 256 });
    expect((memory as { used: number }).used).toBeGreaterThanOrEqual(60);
    expect((memory as { used: number }).used).toBeLessThan(256);
    expect(summary.text).toMatch(/peak \d+ MB of 256 MB requested/);
  });

  it('a failed job: triage and a suggested change, applied only by the explicit action (schedflow jobs resubmit --apply-suggestion)', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim));
    const id = await td.daemon.submit({
      origin: 'api',
      spec: spec(sim, {
        name: 'assemble',
        script: '#!/bin/sh\necho loading reads\necho "MemoryError: unable to allocate 3.2 GiB" >&2\nexit 137\n',
      }),
    });
    await td.waitForState(id, 'failed');
    const summary = await waitForSummary(td, id);
    expect(summary).toMatchObject({ state: 'ready', kind: 'llm' });
    expect(summary.findings?.triage).toMatchObject({
      classification: 'out_of_memory',
      reason: { code: 'NonZeroExitCode' },
      evidence: ['exit code 137', 'MemoryError: unable to allocate 3.2 GiB'],
    });
    expect(summary.suggestion).toMatchObject({
      changes: { memory_per_node: 1024 },
      previous: { memory_per_node: 512 },
    });
    expect(summary.text).toContain('memory_per_node 512 → 1024');
    // Nothing was re-submitted on its own.
    await new Promise((r) => setTimeout(r, 500));
    expect(listRequests(td.daemon.history.db)).toHaveLength(1);

    const shown = await runCli(['jobs', 'show', id, '--data-dir', td.dataDir]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`summary   ready, written by ${LLM_MODEL}`);
    expect(shown.stdout).toContain('triage    out of memory: it most likely ran out of memory');
    expect(shown.stdout).toContain(`apply it with: schedflow jobs resubmit ${id} --apply-suggestion`);

    const refused = await runCli(['jobs', 'resubmit', id, '--data-dir', td.dataDir]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('the suggested change is: memory_per_node 512 → 1024');

    const applied = await runCli(['jobs', 'resubmit', id, '--apply-suggestion', '--data-dir', td.dataDir]);
    expect(applied.code).toBe(0);
    const newId = /queued request (\S+), re-submitting/.exec(applied.stdout)?.[1] as string;
    expect(newId).toBeDefined();
    const again = await td.waitForState(newId, 'failed');
    expect(again).toMatchObject({ resubmitOf: id, name: 'assemble' });
    expect((again.spec as { memory_per_node: number }).memory_per_node).toBe(1024);
    expect(summaryOfRequest(td.daemon.history.db, id)?.appliedRequestId).toBe(newId);
    // Asked for by the CLI, queued by the summarize worker that ran its job (as a CLI submission
    // is queued by the submit worker), not `cli` twice.
    expect(
      transitionsOf(td.daemon.history.db, newId)
        .slice(0, 2)
        .map((t) => [t.toState, t.source]),
    ).toEqual([
      ['accepted', 'cli'],
      ['queued', 'summarize'],
    ]);
    // Applying again makes no second request.
    await expect(td.daemon.resubmitWithSuggestion(id)).resolves.toBe(newId);
    expect(listRequests(td.daemon.history.db)).toHaveLength(2);
  }, 60_000);
});

describe('in the local API', () => {
  it('GET /api/v1/jobs/{id}: null until the summary is made, then the summary as stored; POST …/resubmit applies its suggestion once', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim));
    const api = apiClient(td);
    const token = api.token(['read', 'submit']);
    const created = await api.call('POST', '/api/v1/jobs', {
      token,
      body: {
        spec: spec(sim, {
          name: 'assemble',
          environment: ['API_TOKEN=hunter2', 'PATH=/usr/bin:/bin'],
          script:
            '#!/bin/sh\necho "token $API_TOKEN"\necho "MemoryError: unable to allocate 3.2 GiB" >&2\nsleep 1\nexit 137\n',
        }),
      },
    });
    expect(created.status, created.text).toBe(201);
    const id = (created.json as { id: string }).id;
    const early = await api.call('GET', `/api/v1/jobs/${id}`, { token });
    expect(early.status).toBe(200);
    expect(early.json).toMatchObject({ id, summary: null });

    await td.waitForState(id, 'failed');
    const stored = await waitForSummary(td, id);
    const shown = await api.call('GET', `/api/v1/jobs/${id}`, { token });
    expect(shown.status, shown.text).toBe(200);
    const summary = (shown.json as { summary: Record<string, unknown> }).summary;
    expect(summary).toMatchObject({
      id: stored.id,
      of: 'request',
      request_id: id,
      run_id: null,
      state: 'ready',
      kind: 'llm',
      model: LLM_MODEL,
      text: stored.text,
      prompt_tokens: stored.promptTokens,
      completion_tokens: stored.completionTokens,
      latency_ms: stored.latencyMs,
      attempts: 1,
      error: null,
      findings: {
        triage: { classification: 'out_of_memory', reason: { code: 'NonZeroExitCode' } },
        efficiency: { time: { known: true } },
        steps: null,
        trend: null,
      },
      suggestion: { changes: { memory_per_node: 1024 }, previous: { memory_per_node: 512 }, step: null },
      applied_request_id: null,
      links: { resubmit: `/api/v1/jobs/${id}/resubmit` },
    });
    expect(summary.prompt_tokens).toBeGreaterThan(50);
    expect(summary.completed_at).toEqual(new Date(stored.completedAt ?? 0).toISOString());
    // Redacted where it was stored; the prompt is not there to leak.
    expect(JSON.stringify(summary)).not.toContain('hunter2');
    expect(Object.keys(summary)).not.toContain('prompt');

    const key = { 'idempotency-key': `resubmit-${id}` };
    const applied = await api.call('POST', `/api/v1/jobs/${id}/resubmit`, { token, headers: key });
    expect(applied.status, applied.text).toBe(201);
    const newId = (applied.json as { id: string }).id;
    expect(applied.json).toMatchObject({ resubmits: id, changes: { memory_per_node: 1024 } });
    expect(applied.headers.get('location')).toBe(`/api/v1/jobs/${newId}`);
    const replayed = await api.call('POST', `/api/v1/jobs/${id}/resubmit`, { token, headers: key });
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.json).toMatchObject({ id: newId });
    // Another key, or none: the request made the first time, not a second one.
    const again = await api.call('POST', `/api/v1/jobs/${id}/resubmit`, { token });
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({ id: newId });
    const made = await td.waitForState(newId, 'failed');
    expect(made).toMatchObject({ resubmitOf: id, origin: 'api' });
    expect((made.spec as { memory_per_node: number }).memory_per_node).toBe(1024);
    expect(listRequests(td.daemon.history.db)).toHaveLength(2);
    const after = await api.call('GET', `/api/v1/jobs/${id}`, { token });
    expect(after.json).toMatchObject({
      summary: { applied_request_id: newId, links: { applied: `/api/v1/jobs/${newId}` } },
    });
    expect((after.json as { summary: { links: object } }).summary.links).not.toHaveProperty('resubmit');

    // The refusals of the CLI: a request without a summary suggestion is a 409, an unknown one a 404.
    // (Not the new request: it failed too, and its own summary may already propose a change.)
    const unsummarized = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: spec(sim, { name: 'no-summary', script: '#!/bin/sh\ntrue\n' }), summarize: false },
    });
    expect(unsummarized.status, unsummarized.text).toBe(201);
    const none = await api.call('POST', `/api/v1/jobs/${(unsummarized.json as { id: string }).id}/resubmit`, { token });
    expect(none.status).toBe(409);
    expect(errorOf(none).code).toBe('SCHEDFLOW_ERR_NO_SUGGESTION');
    expect((await api.call('POST', '/api/v1/jobs/nope/resubmit', { token })).status).toBe(404);
  }, 60_000);
});

describe('when the LLM cannot help', () => {
  it('the LLM down: the job history is intact, the summary is retried, then recorded failed with the reason, and the template stands', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim));
    llmOf(sim).setFault({ mode: 'down' });
    const id = await td.daemon.submit({
      origin: 'api',
      spec: spec(sim, { name: 'offline', script: '#!/bin/sh\necho working\nsleep 1\n' }),
    });
    await td.waitForState(id, 'completed');
    const summary = await waitForSummary(td, id);
    expect(summary).toMatchObject({
      state: 'failed',
      kind: 'template',
      attempts: 3,
      errorCode: 'SCHEDFLOW_ERR_LLM_UNREACHABLE',
      note: 'the LLM failed after 3 attempt(s): the template summary stands',
    });
    expect(summary.error).toMatch(/VPN/);
    expect(summary.text).toMatch(/^offline completed after \d+ s \(exit code 0\) \(Slurm job \d+, partition debug/);
    expect(summary.text).toContain('Time: ');
    expect(completionBodies(sim)).toHaveLength(3);
    expect(td.states(id)).toEqual(['accepted', 'queued', 'submitting', 'submitted', 'running', 'completed']);
    expect(getRequest(td.daemon.history.db, id)).toMatchObject({ state: 'completed', exitCode: 0 });
  }, 40_000);

  it('a model the endpoint does not serve: the start check names the models it has, and summaries are the template', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim, {}, { model: 'llama-9000' }));
    const id = await td.daemon.submit({ origin: 'api', spec: spec(sim, { script: '#!/bin/sh\ntrue\n' }) });
    await td.waitForState(id, 'completed');
    const summary = await waitForSummary(td, id);
    expect(summary).toMatchObject({ state: 'ready', kind: 'template' });
    expect(summary.note).toBe(
      `the LLM is not used: the LLM endpoint at ${sim.url} has no model "llama-9000"; it offers "${LLM_MODEL}", "other-model": set SCHEDFLOW_LLM_MODEL to one of them`,
    );
    expect(completionBodies(sim)).toHaveLength(0);
  }, 30_000);

  it('a key file other users can read stops the start', async () => {
    const sim = await env.sim(llmSimConfig());
    const file = keyFile();
    chmodSync(file, 0o640);
    const start = startTestDaemon(sim.url, env.redis.url, settings(sim, {}, { apiKeyFile: file }));
    await expect(start).rejects.toThrow(ConfigError);
    await expect(start).rejects.toThrow(
      `refusing the LLM API key file ${file}: other users can read it; run chmod 600 ${file}`,
    );
  });
});

describe('limits', () => {
  it('the daily request budget holds: past it, summaries are the template, saying why', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim, { dailyRequestLimit: 1 }));
    const first = await td.daemon.submit({
      origin: 'api',
      spec: spec(sim, { name: 'one', script: '#!/bin/sh\ntrue\n' }),
    });
    expect(await waitForSummary(td, first)).toMatchObject({ kind: 'llm' });
    const second = await td.daemon.submit({
      origin: 'api',
      spec: spec(sim, { name: 'two', script: '#!/bin/sh\ntrue\n' }),
    });
    const s = await waitForSummary(td, second);
    expect(s).toMatchObject({ state: 'ready', kind: 'template', attempts: 0 });
    expect(s.note).toMatch(
      /^the LLM budget of the day \(UTC \d{4}-\d\d-\d\d: 1 requests, 1000000 tokens\) is spent \(1 requests/,
    );
    expect(completionBodies(sim)).toHaveLength(1);
    const usage = llmUsageOf(td.daemon.history.db, utcDay(Date.now()));
    expect(usage.requests).toBe(1);
    // Settled to what the call used, as the endpoint counted it.
    const [stored] = [summaryOfRequest(td.daemon.history.db, first) as SummaryRow];
    expect(usage.tokens).toBe((stored?.promptTokens ?? 0) + (stored?.completionTokens ?? 0));
  }, 40_000);

  it('the daily token budget holds: a prompt that could go over it is not sent', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim, { dailyTokenLimit: 500 }));
    const id = await td.daemon.submit({ origin: 'api', spec: spec(sim, { script: '#!/bin/sh\ntrue\n' }) });
    const s = await waitForSummary(td, id);
    expect(s).toMatchObject({ kind: 'template' });
    expect(s.note).toMatch(/500 tokens\) is spent \(0 requests, 0 tokens used; this prompt may need up to \d+\)/);
    expect(completionBodies(sim)).toHaveLength(0);
  }, 30_000);

  it('the concurrency limit holds: no more LLM calls in flight than allowed, and every summary is written', async () => {
    const sim = await env.sim({ ...llmSimConfig(), cpus: 4 });
    const td = await env.daemon(sim.url, settings(sim, { concurrency: 2 }));
    llmOf(sim).setFault({ mode: 'slow', delayMs: 1500 });
    const ids = await Promise.all(
      [1, 2, 3, 4].map((n) =>
        td.daemon.submit({ origin: 'api', spec: spec(sim, { name: `batch-${n}`, script: '#!/bin/sh\nsleep 1\n' }) }),
      ),
    );
    const summaries = await Promise.all(ids.map((id) => waitForSummary(td, id, 30_000)));
    expect(summaries.map((s) => s.kind)).toEqual(['llm', 'llm', 'llm', 'llm']);
    expect(llmOf(sim).stats.maxInFlight).toBe(2);
  }, 45_000);
});

describe('who gets a summary', () => {
  it('global on: `summarize: false` through the API and `--no-summarize` through the CLI get none; a request without either does', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim));
    const api = apiClient(td);
    const token = api.token(['read', 'submit']);
    const post = async (body: Record<string, unknown>) => {
      const r = await api.call('POST', '/api/v1/jobs', { token, body });
      expect(r.status, r.text).toBe(201);
      return (r.json as { id: string }).id;
    };
    const off = await post({ summarize: false, spec: spec(sim, { name: 'off', script: '#!/bin/sh\ntrue\n' }) });
    const usual = await post({ spec: spec(sim, { name: 'usual', script: '#!/bin/sh\ntrue\n' }) });
    const file = join(td.configDir, 'quiet.json');
    writeFileSync(file, JSON.stringify(spec(sim, { name: 'quiet', script: '#!/bin/sh\ntrue\n' })));
    const cli = await runCli(['jobs', 'submit', file, '--no-summarize', '--json', '--data-dir', td.dataDir]);
    expect(cli.code, cli.stderr).toBe(0);
    const quiet = (JSON.parse(cli.stdout) as { requestId: string }).requestId;

    expect(await waitForSummary(td, usual)).toMatchObject({ kind: 'llm' });
    for (const id of [off, quiet]) {
      const row = await waitFor(async () => getRequest(td.daemon.history.db, id)?.summaryCheckedAt ?? undefined, {
        what: `request ${id} to be looked at`,
      });
      expect(row).toBeGreaterThan(0);
      expect(getRequest(td.daemon.history.db, id)?.summarize).toBe(false);
      expect(summaryOfRequest(td.daemon.history.db, id)).toBeUndefined();
      const shown = await api.call('GET', `/api/v1/jobs/${id}`, { token });
      expect(shown.json).toMatchObject({ id, state: 'completed', summary: null });
    }
    const bad = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { summarize: 'no', spec: spec(sim, { script: '#!/bin/sh\ntrue\n' }) },
    });
    expect(bad.status).toBe(400);
    expect(errorOf(bad).fields).toEqual([expect.objectContaining({ in: 'body', path: 'summarize' })]);
  }, 40_000);

  it('global off: only a request that asks gets one; every ended request is looked at once', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim, { enabled: false }));
    const asked = await td.daemon.submit({
      origin: 'api',
      summarize: true,
      spec: spec(sim, { name: 'asked', script: '#!/bin/sh\ntrue\n' }),
    });
    const quiet = await td.daemon.submit({
      origin: 'api',
      spec: spec(sim, { name: 'quiet', script: '#!/bin/sh\ntrue\n' }),
    });
    expect(await waitForSummary(td, asked)).toMatchObject({ kind: 'llm' });
    await waitFor(async () => getRequest(td.daemon.history.db, quiet)?.summaryCheckedAt ?? undefined, {
      what: 'the quiet request to be looked at',
    });
    expect(summaryOfRequest(td.daemon.history.db, quiet)).toBeUndefined();
    const shown = await runCli(['jobs', 'show', quiet, '--data-dir', td.dataDir]);
    expect(shown.stdout).toContain('summary   none (summaries are off for this request)');
  }, 40_000);

  it('a pipeline run gets one summary across its steps, and a recurring pipeline its trend', async () => {
    const sim = await env.sim(llmSimConfig());
    const pipeline = [
      'summarize: true',
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      '  time_limit: 10',
      'steps:',
      '  fetch:',
      '    script: "#!/bin/sh\\necho fetched\\nsleep 1\\n"',
      '  report:',
      '    needs: [fetch]',
      '    script: "#!/bin/sh\\necho reported\\n"',
    ].join('\n');
    const td = await env.daemon(
      sim.url,
      { ...settings(sim, { enabled: false }), pipelineTickMs: 300 },
      { 'nightly.yaml': pipeline },
    );
    const { summaryOfRun } = await import('../../../src/db/summaries.js');
    const runSummary = (runId: string) =>
      waitFor(
        async () => {
          const s = summaryOfRun(td.daemon.history.db, runId);
          return s && s.state !== 'pending' ? s : undefined;
        },
        { what: `the summary of run ${runId}`, timeoutMs: 30_000, intervalMs: 100 },
      );
    const first = await td.daemon.pipelines.trigger('nightly', { trigger: 'api', params: {} });
    const s1 = await runSummary(first.id);
    expect(s1).toMatchObject({ state: 'ready', kind: 'llm' });
    expect(s1.text).toMatch(/pipeline nightly, triggered by api/);
    expect(s1.findings?.steps?.map((s) => [s.step, s.state])).toEqual([
      ['fetch', 'completed'],
      ['report', 'completed'],
    ]);
    expect(s1.findings?.trend).toBeNull();
    // The steps have no summaries of their own: the run's is shown for them.
    const [step] = listRequests(td.daemon.history.db).filter((r) => r.runId === first.id);
    expect(summaryOfRequest(td.daemon.history.db, step?.id ?? '')).toBeUndefined();
    const shown = await runCli(['jobs', 'show', step?.id ?? '', '--data-dir', td.dataDir]);
    expect(shown.stdout).toContain(`summary   of its pipeline run ${first.id} (nightly, succeeded): ready`);
    // The same in the API: the run's summary on the run and on its steps; a step's change goes in the file.
    const api = apiClient(td);
    const token = api.token(['read', 'submit']);
    const run = await api.call('GET', `/api/v1/runs/${first.id}`, { token });
    expect(run.json).toMatchObject({
      summary: { id: s1.id, of: 'run', run_id: first.id, request_id: null, kind: 'llm', text: s1.text, links: {} },
    });
    const steps = (run.json as { summary: { findings: { steps: { step: string; request_id: string }[] } } }).summary
      .findings.steps;
    expect(steps.map((s) => s.step)).toEqual(['fetch', 'report']);
    expect(steps.map((s) => s.request_id)).toContain(step?.id);
    const stepShown = await api.call('GET', `/api/v1/jobs/${step?.id}`, { token });
    expect(stepShown.json).toMatchObject({ summary: { id: s1.id, of: 'run', run_id: first.id } });
    const refused = await api.call('POST', `/api/v1/jobs/${step?.id}/resubmit`, { token });
    expect(refused.status).toBe(409);
    expect(errorOf(refused).message).toMatch(/step "(fetch|report)" of a pipeline run/);

    const second = await td.daemon.pipelines.trigger('nightly', { trigger: 'api', params: {} });
    const s2 = await runSummary(second.id);
    expect(s2.findings?.trend).toMatchObject({ runs: [{ runId: second.id }, { runId: first.id }] });
    expect(s2.findings?.trend?.comparison).toMatch(
      /than the median of the 1 earlier run|about as long as the median of the 1 earlier run/,
    );
    const body = JSON.stringify(completionBodies(sim).at(-1)?.body);
    expect(body).toContain('Trend: 1 earlier run(s)');
    expect(body).toContain('- fetch: completed');
  }, 60_000);
});
