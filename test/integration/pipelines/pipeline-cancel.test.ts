import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { getRun, stepRequests } from '../../../src/db/runs.js';
import type { JobRequestRow, PipelineRunRow } from '../../../src/db/schema.js';
import { apiClient, errorOf } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, type TestDaemon } from '../../helpers/daemon.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { waitFor } from '../../helpers/http.js';
import { startWebhookReceiver } from '../../helpers/webhook-receiver.js';

/**
 * Cancelling a pipeline run on the simulator, through the local API and the CLI: every step
 * not yet ended is withdrawn or cancelled upstream, one being submitted is cancelled once it
 * is, and the run ends `cancelled` with its webhook once.
 */

const env = daemonTestEnv();

async function latest(d: TestDaemon, runId: string): Promise<Record<string, JobRequestRow>> {
  const out: Record<string, JobRequestRow> = {};
  for (const row of await stepRequests(d.daemon.history.store, runId)) out[row.step as string] = row;
  return out;
}

const waitForRun = (d: TestDaemon, runId: string, state: string): Promise<PipelineRunRow> =>
  waitFor(
    async () => {
      const run = await getRun(d.daemon.history.store, runId);
      return run?.state === state ? run : undefined;
    },
    { what: `run ${runId} to be ${state}`, timeoutMs: 20_000, intervalMs: 50 },
  );

const waitForSteps = (d: TestDaemon, runId: string, ok: (s: Record<string, JobRequestRow>) => boolean) =>
  waitFor(async () => (ok(await latest(d, runId)) ? true : undefined), {
    what: `the steps of run ${runId}`,
    timeoutMs: 20_000,
    intervalMs: 50,
  }).catch(async (error: Error) => {
    const states = Object.entries(await latest(d, runId)).map(([step, row]) => `${step}: ${row.state}`);
    throw new Error(`${error.message} (${states.join(', ')})`);
  });

const step = (name: string, script: string, needs?: string) =>
  `  ${name}:\n    script: |\n      #!/bin/sh\n      echo ${name} >> order.txt\n      ${script}\n${needs ? `    needs: [${needs}]\n` : ''}`;

describe('cancelling a pipeline run', () => {
  it('withdraws what is not submitted, cancels the rest upstream (one being submitted once it is), ends cancelled, webhook once', async () => {
    // Room for `long`, `held` and `quick` at once (the test simulator has 2 CPUs).
    const sim = await env.sim({ cpus: 4 });
    const proxy = await startFlakyProxy(sim.url);
    env.defer(() => proxy.close());
    const receiver = await startWebhookReceiver();
    env.defer(() => receiver.stop());
    const yaml = [
      `webhook: ${receiver.url}/runs`,
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      step('quick', 'true'),
      step('long', 'sleep 60'),
      step('behind', 'true', 'long'),
      step('held', 'sleep 60'),
      step('after_held', 'true', 'held'),
    ].join('\n');
    // The submission of `held` reaches the scheduler, whose answer is held back: it is `submitting`.
    const reached = proxy.holdAnswerOnce((r) => r.method === 'POST' && r.body.includes('echo held >>'));
    const td = await env.daemon(
      proxy.url,
      { pipelineTickMs: 200, notifyEveryMs: 200 },
      {
        'cancel-me.yaml': yaml,
        'ok.yaml': ['defaults:', `  current_working_directory: ${sim.workDir}`, 'steps:', step('only', 'true')].join(
          '\n',
        ),
      },
    );
    const api = apiClient(td);
    const token = await api.token(['read', 'cancel']);
    const run = await td.daemon.pipelines.trigger('cancel-me', { actor: 'test', trigger: 'api' });
    await reached;
    await waitForSteps(
      td,
      run.id,
      (s) =>
        s.quick?.state === 'completed' &&
        s.long?.state === 'running' &&
        s.behind?.state === 'pending' &&
        s.held?.state === 'submitting' &&
        s.after_held?.state === 'queued',
    );

    const cancel = await api.call('POST', `/api/v1/runs/${run.id}/cancel`, { token });
    expect(cancel.status).toBe(202);
    const body = cancel.json as {
      state: string;
      message: string;
      cancel: { by: string };
      steps: { step: string; outcome: string }[];
    };
    expect(body.state).toBe('running');
    expect(body.cancel.by).toMatch(/^API token/);
    expect(Object.fromEntries(body.steps.map((s) => [s.step, s.outcome]))).toEqual({
      long: 'cancel_sent',
      behind: 'cancel_sent',
      held: 'submitting',
      after_held: 'withdrawn',
    });
    // The scheduler's answer for `held` arrives: the pipeline tick cancels it now that it has a job.
    proxy.release();
    const ended = await waitForRun(td, run.id, 'cancelled');
    const s = await latest(td, run.id);
    expect(s.quick?.state).toBe('completed');
    for (const name of ['long', 'behind', 'held']) expect(s[name]?.state, name).toBe('cancelled');
    expect(s.held?.jobId).not.toBeNull();
    // Waiting on a step with no job yet: never submitted.
    expect(s.after_held).toMatchObject({ state: 'cancelled', jobId: null });
    expect(proxy.requests.filter((r) => r.body.includes('echo after_held >>'))).toEqual([]);
    expect(ended.detail).toMatch(/^cancelled by API token/);

    // The webhook, once: one delivery recorded for the run, and it arrives.
    const [call] = await receiver.waitForCalls(1);
    expect(JSON.parse(call?.body ?? '{}')).toMatchObject({ run: { id: run.id, state: 'cancelled' } });
    const history = td.daemon.history.store;
    const { webhookDeliveries } = history.t;
    const deliveries = await history.all(
      history.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.runId, run.id)),
    );
    expect(deliveries).toHaveLength(1);

    // Again: what happened, not an error.
    const again = await api.call('POST', `/api/v1/runs/${run.id}/cancel`, { token });
    expect(again.status).toBe(200);
    expect(again.json).toMatchObject({
      state: 'cancelled',
      message: expect.stringMatching(/^already cancelled by API token/),
    });
    // The run's state changes, each logged with who made it: made by the API, ended by the pipeline tick.
    const detail = await api.call('GET', `/api/v1/runs/${run.id}`, { token });
    expect((detail.json as { transitions: unknown[] }).transitions).toEqual([
      { from: null, to: 'running', at: expect.any(String), source: 'api', detail: null },
      {
        from: 'running',
        to: 'cancelled',
        at: expect.any(String),
        source: 'pipeline',
        detail: expect.stringMatching(/^cancelled by API token/),
      },
    ]);
    const ok = await td.daemon.pipelines.trigger('ok', { actor: 'test', trigger: 'api' });
    await waitForRun(td, ok.id, 'succeeded');
    const okDetail = await api.call('GET', `/api/v1/runs/${ok.id}`, { token });
    expect(
      (okDetail.json as { transitions: { from: string | null; to: string; source: string }[] }).transitions,
    ).toEqual([
      expect.objectContaining({ from: null, to: 'running', source: 'api' }),
      expect.objectContaining({ from: 'running', to: 'succeeded', source: 'pipeline' }),
    ]);
    const over = await api.call('POST', `/api/v1/runs/${ok.id}/cancel`, { token });
    expect(over.status).toBe(409);
    expect(errorOf(over)).toMatchObject({ code: 'SCHEDFLOW_ERR_RUN_ENDED', state: 'succeeded' });
    const missing = await api.call('POST', '/api/v1/runs/no-such-run/cancel', { token });
    expect(missing.status).toBe(404);
    const readOnly = await api.call('POST', `/api/v1/runs/${run.id}/cancel`, { token: await api.token(['read']) });
    expect(readOnly.status).toBe(403);
  }, 40_000);

  it('through the CLI, as processes: runs cancel of a running run, jobs cancel of a running job', async () => {
    const sim = await env.sim();
    const yaml = ['defaults:', `  current_working_directory: ${sim.workDir}`, 'steps:', step('only', 'sleep 60')].join(
      '\n',
    );
    const td = await env.daemon(sim.url, { pipelineTickMs: 200 }, { 'slow.yaml': yaml });
    // A process takes seconds to start on a busy machine: the default 20 s is not always enough.
    const cli = (...args: string[]) => runCli([...args, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    const run = await td.daemon.pipelines.trigger('slow', { actor: 'test', trigger: 'api' });
    const id = await td.daemon.submit({
      spec: { name: 'cli-cancel', script: '#!/bin/sh\nsleep 60\n', current_working_directory: sim.workDir },
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await waitForSteps(td, run.id, (s) => s.only?.state === 'running');
    await td.waitForState(id, 'running');

    // Two processes at once (each takes seconds to start on a busy machine).
    const [cancelled, job] = await Promise.all([cli('runs', 'cancel', run.id), cli('jobs', 'cancel', id, '--wait')]);
    expect(cancelled.stderr).toBe('');
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toMatch(new RegExp(`^(cancelling|cancelled) run ${run.id}`));
    expect(cancelled.stdout).toMatch(/only: cancel sent/);
    expect(job.stderr).toBe('');
    expect(job.code).toBe(0);
    expect(job.stdout).toMatch(/cancel of job \d+ sent to the scheduler/);
    expect(job.stdout).toMatch(/cancelled\n$/);
    await waitForRun(td, run.id, 'cancelled');

    const [again, ended] = await Promise.all([cli('runs', 'cancel', run.id), cli('jobs', 'cancel', id)]);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/was already cancelled by CLI/);
    expect(ended.code).toBe(3);
    expect(ended.stderr).toMatch(/already ended: cancelled/);
  }, 90_000);
});
