import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { llmUsageOf, utcDay } from '../../../src/db/llm-budget.js';
import { getRequest, listRequests } from '../../../src/db/requests.js';
import type { SummaryRow } from '../../../src/db/schema.js';
import { summaryOfRequest } from '../../../src/db/summaries.js';
import { ConfigError } from '../../../src/errors.js';
import { apiClient, errorOf } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, startTestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { completionBodies, keyFile, LLM_MODEL, llmOf, llmSimConfig } from '../llm/llm-helpers.js';
import { settings, spec, waitForSummary } from './summaries-files.js';

/**
 * Post-job summaries end to end (summaries.test.ts has how one is made and shown): when the LLM
 * cannot help, the limits on its use, and who gets a summary.
 */

const env = daemonTestEnv();

describe('when the LLM cannot help', () => {
  it('the LLM down: the job history is intact, the summary is retried, then recorded failed with the reason, and the template stands', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim));
    llmOf(sim).setFault({ mode: 'down' });
    const id = await td.daemon.submit({
      owner: 'default',
      actor: 'test',
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
    expect(await td.states(id)).toEqual(['accepted', 'queued', 'submitting', 'submitted', 'running', 'completed']);
    expect(await getRequest(td.daemon.history.store, id)).toMatchObject({ state: 'completed', exitCode: 0 });
  }, 40_000);

  it('a model the endpoint does not serve: the start check names the models it has, and summaries are the template', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim, {}, { model: 'llama-9000' }));
    const id = await td.daemon.submit({
      owner: 'default',
      actor: 'test',
      origin: 'api',
      spec: spec(sim, { script: '#!/bin/sh\ntrue\n' }),
    });
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
      owner: 'default',
      actor: 'test',
      origin: 'api',
      spec: spec(sim, { name: 'one', script: '#!/bin/sh\ntrue\n' }),
    });
    expect(await waitForSummary(td, first)).toMatchObject({ kind: 'llm' });
    const second = await td.daemon.submit({
      owner: 'default',
      actor: 'test',
      origin: 'api',
      spec: spec(sim, { name: 'two', script: '#!/bin/sh\ntrue\n' }),
    });
    const s = await waitForSummary(td, second);
    expect(s).toMatchObject({ state: 'ready', kind: 'template', attempts: 0 });
    expect(s.note).toMatch(
      /^the LLM budget of the day \(UTC \d{4}-\d\d-\d\d: 1 requests, 1000000 tokens\) is spent \(1 requests/,
    );
    expect(completionBodies(sim)).toHaveLength(1);
    const usage = await llmUsageOf(td.daemon.history.store, utcDay(Date.now()));
    expect(usage.requests).toBe(1);
    // Settled to what the call used, as the endpoint counted it.
    const [stored] = [(await summaryOfRequest(td.daemon.history.store, first)) as SummaryRow];
    expect(usage.tokens).toBe((stored?.promptTokens ?? 0) + (stored?.completionTokens ?? 0));
  }, 40_000);

  it('the daily token budget holds: a prompt that could go over it is not sent', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim, { dailyTokenLimit: 500 }));
    const id = await td.daemon.submit({
      owner: 'default',
      actor: 'test',
      origin: 'api',
      spec: spec(sim, { script: '#!/bin/sh\ntrue\n' }),
    });
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
        td.daemon.submit({
          owner: 'default',
          actor: 'test',
          origin: 'api',
          spec: spec(sim, { name: `batch-${n}`, script: '#!/bin/sh\nsleep 1\n' }),
        }),
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
    const token = await api.token(['read', 'submit']);
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
      const row = await waitFor(
        async () => (await getRequest(td.daemon.history.store, id))?.summaryCheckedAt ?? undefined,
        {
          what: `request ${id} to be looked at`,
        },
      );
      expect(row).toBeGreaterThan(0);
      expect((await getRequest(td.daemon.history.store, id))?.summarize).toBe(false);
      expect(await summaryOfRequest(td.daemon.history.store, id)).toBeUndefined();
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
      owner: 'default',
      actor: 'test',
      origin: 'api',
      summarize: true,
      spec: spec(sim, { name: 'asked', script: '#!/bin/sh\ntrue\n' }),
    });
    const quiet = await td.daemon.submit({
      owner: 'default',
      actor: 'test',
      origin: 'api',
      spec: spec(sim, { name: 'quiet', script: '#!/bin/sh\ntrue\n' }),
    });
    expect(await waitForSummary(td, asked)).toMatchObject({ kind: 'llm' });
    await waitFor(async () => (await getRequest(td.daemon.history.store, quiet))?.summaryCheckedAt ?? undefined, {
      what: 'the quiet request to be looked at',
    });
    expect(await summaryOfRequest(td.daemon.history.store, quiet)).toBeUndefined();
    const shown = await runCli(['jobs', 'show', quiet, '--data-dir', td.dataDir]);
    expect(shown.stdout).toContain('summary   none (summaries are off for this request)');
  }, 40_000);

  it('a pipeline run gets one summary across its steps, and a recurring pipeline its trend', async () => {
    const sim = await env.sim(llmSimConfig());
    const pipeline = [
      'summarize: true',
      // A schedule that does not fire during the test: a run asked for by hand is still no scheduled run.
      'schedule: { cron: "0 3 1 1 *" }',
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
          const s = await summaryOfRun(td.daemon.history.store, runId);
          return s && s.state !== 'pending' ? s : undefined;
        },
        { what: `the summary of run ${runId}`, timeoutMs: 30_000, intervalMs: 100 },
      );
    const first = await td.daemon.pipelines.trigger('nightly', {
      actor: 'test',
      trigger: 'api',
      triggeredBy: 'API token "ci"',
      params: {},
    });
    const s1 = await runSummary(first.id);
    expect(s1).toMatchObject({ state: 'ready', kind: 'llm' });
    expect(s1.text).toMatch(/pipeline nightly, started by the API \(API token "ci"\) at /);
    expect(s1.text).not.toMatch(/scheduled|schedule's tick/);
    expect(s1.findings?.steps?.map((s) => [s.step, s.state])).toEqual([
      ['fetch', 'completed'],
      ['report', 'completed'],
    ]);
    expect(s1.findings?.trend).toBeNull();
    // The steps have no summaries of their own: the run's is shown for them.
    const [step] = (await listRequests(td.daemon.history.store)).filter((r) => r.runId === first.id);
    expect(await summaryOfRequest(td.daemon.history.store, step?.id ?? '')).toBeUndefined();
    const shown = await runCli(['jobs', 'show', step?.id ?? '', '--data-dir', td.dataDir]);
    expect(shown.stdout).toContain(`summary   of its pipeline run ${first.id} (nightly, succeeded): ready`);
    // The same in the API: the run's summary on the run and on its steps; a step's change goes in the file.
    const api = apiClient(td);
    const token = await api.token(['read', 'submit']);
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

    const second = await td.daemon.pipelines.trigger('nightly', { actor: 'test', trigger: 'api', params: {} });
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
