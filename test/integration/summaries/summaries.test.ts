import { describe, expect, it } from 'vitest';
import { listRequests, transitionsOf } from '../../../src/db/requests.js';
import { summaryOfRequest } from '../../../src/db/summaries.js';
import { apiClient, errorOf } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { startWebhookReceiver } from '../../helpers/webhook-receiver.js';
import { completionBodies, LLM_MODEL, llmSimConfig } from '../llm/llm-helpers.js';
import { openAiProblems } from '../llm/openai-schema.js';
import { settings, spec, waitForSummary } from './summaries-files.js';

/** Post-job summaries end to end: daemon, simulator (scheduler and LLM endpoint), Redis, SQLite. */

const env = daemonTestEnv();

describe('a finished job gets a summary', () => {
  it('a completed job: written by the LLM with model, usage and latency; secrets in the job never reach it; the webhook gets summary.ready', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim));
    const receiver = await startWebhookReceiver();
    env.defer(() => receiver.stop());
    const id = await td.daemon.submit({
      owner: 'default',
      actor: 'test',
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
    // The simulator measures the script's CPU time: a shell that sleeps uses a few ms, which
    // accounting reports as 0 on a quiet machine (the summary then says "not known" rather than
    // "0 %") and as a figure on a busy one.
    expect(summary.text).toMatch(
      /not known: accounting reports 0 CPU seconds|\d+ s CPU time of \d+ s allocated \(\d+(\.\d+)?%\)/,
    );
    expect(summary.text).not.toMatch(/\b0 %/);
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
    expect(await td.states(id)).toEqual(['accepted', 'queued', 'submitting', 'submitted', 'running', 'completed']);
  }, 40_000);

  it('peak memory, measured while the job ran and reported by accounting, against the memory it requested', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim));
    const id = await td.daemon.submit({
      owner: 'default',
      actor: 'test',
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
      owner: 'default',
      actor: 'test',
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
    expect(await listRequests(td.daemon.history.store)).toHaveLength(1);

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
    expect((await summaryOfRequest(td.daemon.history.store, id))?.appliedRequestId).toBe(newId);
    // Asked for by the CLI through the daemon's API: accepted and queued at its one door.
    expect((await transitionsOf(td.daemon.history.store, newId)).slice(0, 2).map((t) => [t.toState, t.source])).toEqual(
      [
        ['accepted', 'cli'],
        ['queued', 'cli'],
      ],
    );
    // Applying again makes no second request.
    await expect(td.daemon.resubmitWithSuggestion({ requestId: id, origin: 'api', actor: 'test' })).resolves.toBe(
      newId,
    );
    expect(await listRequests(td.daemon.history.store)).toHaveLength(2);
  }, 60_000);
});

describe('in the local API', () => {
  it('GET /api/v1/jobs/{id}: null until the summary is made, then the summary as stored; POST …/resubmit applies its suggestion once', async () => {
    const sim = await env.sim(llmSimConfig());
    const td = await env.daemon(sim.url, settings(sim));
    const api = apiClient(td);
    const token = await api.token(['read', 'submit']);
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
    expect(await listRequests(td.daemon.history.store)).toHaveLength(2);
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
