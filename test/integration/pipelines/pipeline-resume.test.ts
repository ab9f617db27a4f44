import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { SchedflowApiError, SchedflowClient } from '../../../src/client/index.js';
import { getRun, stepRequests } from '../../../src/db/runs.js';
import type { PipelineRunRow } from '../../../src/db/schema.js';
import { apiClient, errorOf } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { startWebhookReceiver } from '../../helpers/webhook-receiver.js';

/**
 * Resuming a pipeline run on the simulator (issue 36): a 5-step run that fails at its fourth
 * step (its script fails until the test writes a marker file) is resumed through the CLI; only
 * steps 4 and 5 are submitted again, one job each, with no dependency on the kept steps' jobs,
 * and the run ends succeeded in its second attempt. Resuming a run still active, or one that
 * succeeded, is refused with the reason; of two resumes at once, one wins.
 */

const env = daemonTestEnv();

const waitForRun = (d: TestDaemon, runId: string, state: string, attempt = 1): Promise<PipelineRunRow> =>
  waitFor(
    async () => {
      const run = await getRun(d.daemon.history.store, runId);
      return run?.state === state && run.attempt === attempt ? run : undefined;
    },
    { what: `run ${runId} to be ${state} (attempt ${attempt})`, timeoutMs: 30_000, intervalMs: 50 },
  );

const chain = (workDir: string, failing: string, marker: string, webhook: string) =>
  [
    `webhook: ${webhook}`,
    'defaults:',
    `  current_working_directory: ${workDir}`,
    'steps:',
    ...['s1', 's2', 's3', 's4', 's5'].flatMap((name, i) => [
      `  ${name}:`,
      // The fourth fails until the marker is there: what a fix made before the resume looks like.
      `    script: "#!/bin/sh\\necho ${name} >> order.txt\\n${name === failing ? `test -f ${marker} || exit 3\\n` : ''}"`,
      ...(i > 0 ? [`    needs: [s${i}]`] : []),
    ]),
  ].join('\n');

describe('resuming a pipeline run', () => {
  it('runs only the steps that did not complete (one job each, no dependency on kept jobs), ends succeeded; refusals say why', async () => {
    const sim = await env.sim();
    const receiver = await startWebhookReceiver();
    env.defer(() => receiver.stop());
    const td = await env.daemon(
      sim.url,
      { pipelineTickMs: 200, notifyEveryMs: 200 },
      {
        'five.yaml': chain(sim.workDir, 's4', 'resume-ok', `${receiver.url}/runs`),
        'flaky.yaml': [
          'params:',
          '  label: one',
          'defaults:',
          `  current_working_directory: ${sim.workDir}`,
          'steps:',
          '  only:',
          '    script: "#!/bin/sh\\ntest -f flaky-ok || exit 1\\n"',
        ].join('\n'),
      },
    );
    const api = apiClient(td);
    const token = await api.token(['read', 'submit']);
    const readOnly = await api.token(['read']);
    const cli = (...args: string[]) => runCli([...args, '--data-dir', td.dataDir], { timeoutMs: 60_000 });

    const made = await api.call('POST', '/api/v1/pipelines/five/runs', { token, body: {} });
    expect(made.status).toBe(201);
    const runId = (made.json as { id: string }).id;
    // Still running: refused, with why.
    const early = await api.call('POST', `/api/v1/runs/${runId}/resume`, { token, body: {} });
    expect(early.status).toBe(409);
    expect(errorOf(early)).toMatchObject({ code: 'SCHEDFLOW_ERR_RUN_NOT_RESUMABLE', state: 'running' });
    expect(errorOf(early).message).toMatch(/is still running: only a run that failed or was cancelled/);

    const failed = await waitForRun(td, runId, 'failed');
    expect(failed.detail).toMatch(/s4: FAILED \(exit 3\)/);
    const before = new Set(sim.server.cluster.listJobs().map((j) => j.jobId));
    const firstSteps = await stepRequests(td.daemon.history.store, runId);
    const keptJobs = Object.fromEntries(
      firstSteps.filter((s) => s.state === 'completed').map((s) => [s.step as string, s.jobId]),
    );
    expect(Object.keys(keptJobs).sort()).toEqual(['s1', 's2', 's3']);

    // A scope short of triggering a run: 403, nothing changed.
    const noScope = await api.call('POST', `/api/v1/runs/${runId}/resume`, { token: readOnly, body: {} });
    expect(noScope.status).toBe(403);

    writeFileSync(join(sim.workDir, 'resume-ok'), '');
    const resumed = await cli('runs', 'resume', runId, '--wait');
    expect(resumed.stderr).toBe('');
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toContain(`run ${runId} resumed: attempt 2 runs s4, s5 again; kept s1, s2, s3`);
    expect(resumed.stdout).toMatch(/step s5 \(attempt 2\): completed, job \d+, exit 0/);
    // Following the new attempt: the kept steps are not printed again.
    expect(resumed.stdout).not.toMatch(/step s1:/);
    expect(resumed.stdout).toMatch(new RegExp(`run ${runId} succeeded\\n$`));

    const run = await waitForRun(td, runId, 'succeeded', 2);
    expect(run.detail).toBeNull();
    // Its webhook at each end: failed in attempt 1, succeeded in attempt 2 with its new steps.
    const calls = (await receiver.waitForCalls(2)).map(
      (c) => JSON.parse(c.body) as { run: { state: string; attempt: number; steps: { run_attempt: number }[] } },
    );
    calls.sort((a, b) => a.run.attempt - b.run.attempt);
    expect(calls.map((c) => [c.run.state, c.run.attempt])).toEqual([
      ['failed', 1],
      ['succeeded', 2],
    ]);
    expect(calls[1]?.run.steps.filter((s) => s.run_attempt === 2)).toHaveLength(2);
    // In Slurm: one job for each step run again, none for the kept ones; s4's has no dependency
    // (the kept s3 is met, not sent), s5's is on the new s4 alone, or none where s4 had ended
    // before s5 was submitted (its end then decides, src/pipelines/step-dependencies.ts: seen
    // on a loaded machine).
    const newJobs = sim.server.cluster.listJobs().filter((j) => !before.has(j.jobId));
    expect(newJobs.map((j) => j.name).sort()).toEqual(['five.s4', 'five.s5']);
    const s4 = newJobs.find((j) => j.name === 'five.s4');
    const s5 = newJobs.find((j) => j.name === 'five.s5');
    expect(s4?.dependency ?? '').toBe('');
    if (s5?.dependency) expect(s5.dependency).toBe(`afterok:${s4?.jobId}`);
    else expect(s5?.submitTime).toBeGreaterThanOrEqual(s4?.endTime || Number.POSITIVE_INFINITY);
    const steps = await stepRequests(td.daemon.history.store, runId);
    for (const [name, jobId] of Object.entries(keptJobs)) {
      expect(steps.filter((s) => s.step === name).map((s) => [s.jobId, s.runAttempt])).toEqual([[jobId, 1]]);
    }
    expect(steps.filter((s) => s.runAttempt === 2).map((s) => [s.step, s.state, s.jobId])).toEqual([
      ['s4', 'completed', s4?.jobId],
      ['s5', 'completed', s5?.jobId],
    ]);

    // The API shows the attempts: the run's, each step's, and the resume in its state changes.
    const shown = await api.call('GET', `/api/v1/runs/${runId}`, { token });
    const detail = shown.json as {
      attempt: number;
      steps: { step: string; run_attempt: number }[];
      transitions: { from: string | null; to: string; source: string; detail: string | null }[];
    };
    expect(detail.attempt).toBe(2);
    expect(detail.steps.filter((s) => s.run_attempt === 2).map((s) => s.step)).toEqual(['s4', 's5']);
    expect(detail.transitions.map((t) => `${t.from}>${t.to}:${t.source}`)).toEqual([
      'null>running:api',
      'running>failed:pipeline',
      'failed>running:cli',
      'running>succeeded:pipeline',
    ]);
    expect(detail.transitions[2]?.detail).toMatch(/^resumed by CLI .* \(attempt 2\): s4, s5 again; kept s1, s2, s3$/);
    const cliShow = await cli('runs', 'show', runId);
    expect(cliShow.stdout).toContain('attempt   2 (resumed 1 time)');
    expect(cliShow.stdout).toMatch(new RegExp(`\\n2\\s+s5\\s+2\\s+\\S+\\s+${s5?.jobId}\\s+completed`));

    // Succeeded: refused through the CLI and the API, with why, and audited.
    const again = await cli('runs', 'resume', runId);
    expect(again.code).toBe(3);
    expect(again.stderr).toMatch(/succeeded: nothing to resume/);
    const apiAgain = await api.call('POST', `/api/v1/runs/${runId}/resume`, { token, body: {} });
    expect(apiAgain.status).toBe(409);
    expect(errorOf(apiAgain)).toMatchObject({ code: 'SCHEDFLOW_ERR_RUN_NOT_RESUMABLE', state: 'succeeded' });
    const history = td.daemon.history.store;
    const { auditLog } = history.t;
    const audit = await history.all(
      history.db
        .select()
        .from(auditLog)
        .where(eq(auditLog.target, `run:${runId}`)),
    );
    expect(audit.filter((a) => a.action === 'run.resume').map((a) => a.outcome)).toEqual([
      'refused',
      'ok',
      'refused',
      'refused',
    ]);
    const unknown = await api.call('POST', '/api/v1/runs/no-such-run/resume', { token, body: {} });
    expect(unknown.status).toBe(404);

    // Two resumes at once: one wins, the other finds the run running. A bad parameter: 400, nothing made.
    const flaky = await td.daemon.pipelines.trigger('flaky', { actor: 'test', trigger: 'api' });
    await waitForRun(td, flaky.id, 'failed');
    const bad = await api.call('POST', `/api/v1/runs/${flaky.id}/resume`, { token, body: { params: { nope: 1 } } });
    expect(bad.status).toBe(400);
    expect(errorOf(bad).message).toMatch(/unknown parameter "nope"/);
    writeFileSync(join(sim.workDir, 'flaky-ok'), '');
    // One through the typed client, one over plain HTTP.
    const sf = new SchedflowClient({ baseUrl: td.daemon.apiUrl ?? '', token });
    const [byClient, byHttp] = await Promise.all([
      sf.resumeRun(flaky.id, { params: { label: 'two' } }).then(
        (answer) => answer,
        (error: unknown) => error,
      ),
      api.call('POST', `/api/v1/runs/${flaky.id}/resume`, { token, body: { params: { label: 'two' } } }),
    ]);
    if (byHttp.status === 201) {
      expect(byClient).toBeInstanceOf(SchedflowApiError);
      expect(byClient).toMatchObject({ code: 'SCHEDFLOW_ERR_RUN_NOT_RESUMABLE', status: 409 });
    } else {
      expect(byHttp.status).toBe(409);
      expect(byClient).toMatchObject({ state: 'running', attempt: 2, kept: [], steps: [{ step: 'only' }] });
    }
    const ended = await waitForRun(td, flaky.id, 'succeeded', 2);
    expect(ended.params).toEqual({ label: 'two' });
    expect((await stepRequests(history, flaky.id)).map((s) => [s.attempt, s.runAttempt, s.state])).toEqual([
      [1, 1, 'failed'],
      [2, 2, 'completed'],
    ]);
  }, 120_000);

  it('a step using outputs is made again with the real values (its producer run again or kept); a cancelled run whose such steps never ran resumes', async () => {
    const sim = await env.sim();
    const td = await env.daemon(
      sim.url,
      { pipelineTickMs: 200 },
      {
        'fan.yaml': [
          'defaults:',
          `  current_working_directory: ${sim.workDir}`,
          'steps:',
          '  split:',
          '    script: "#!/bin/sh\\ntest -f split-ok || exit 3\\necho chunks=3 >> \\"$SCHEDFLOW_OUTPUTS\\"\\n"',
          '  align:',
          '    needs: [split]',
          '    array: ${steps.split.outputs.chunks}',
          '    script: "#!/bin/sh\\ntest -f align-ok || exit 4\\ntouch aligned-$SLURM_ARRAY_TASK_ID\\n"',
          '  merge:',
          '    needs: [align]',
          '    script: "#!/bin/sh\\ntrue\\n"',
        ].join('\n'),
        'slow.yaml': [
          'defaults:',
          `  current_working_directory: ${sim.workDir}`,
          'steps:',
          '  split:',
          '    script: "#!/bin/sh\\nwhile ! test -f slow-go; do sleep 0.1; done\\necho n=2 >> \\"$SCHEDFLOW_OUTPUTS\\"\\n"',
          '  align:',
          '    needs: [split]',
          '    array: ${steps.split.outputs.n}',
          '    script: "#!/bin/sh\\ntrue\\n"',
        ].join('\n'),
      },
    );
    const api = apiClient(td);
    const token = await api.token(['read', 'submit', 'cancel']);
    const store = td.daemon.history.store;
    const resume = async (id: string) => {
      const answer = await api.call('POST', `/api/v1/runs/${id}/resume`, { token, body: {} });
      expect(answer.status, JSON.stringify(answer.json)).toBe(201);
      return answer.json as { message: string; steps: { step: string }[] };
    };
    const rowsOf = async (id: string, step: string) =>
      (await stepRequests(store, id))
        .filter((r) => r.step === step)
        .map((r) => ({
          attempt: r.attempt,
          runAttempt: r.runAttempt,
          state: r.state,
          array: (r.spec as { array?: string }).array,
        }));

    // split fails: align is cancelled unsubmitted (its outputs unknown; its array as written cannot
    // be a request's), merge behind it.
    const run = await td.daemon.pipelines.trigger('fan', { actor: 'test', trigger: 'api' });
    await waitForRun(td, run.id, 'failed');
    writeFileSync(join(sim.workDir, 'split-ok'), '');
    const first = await resume(run.id);
    // Only split is made now: align and merge wait for its outputs, not made with a stand-in.
    expect(first.steps.map((s) => s.step)).toEqual(['split']);
    expect(first.message).toContain('runs split again; align, merge once the outputs they wait on are known');
    // align now fails (its marker is missing): the run fails in attempt 2, align with the real count.
    await waitForRun(td, run.id, 'failed', 2);
    expect(await rowsOf(run.id, 'align')).toEqual([
      { attempt: 1, runAttempt: 1, state: 'cancelled', array: undefined },
      { attempt: 2, runAttempt: 2, state: 'failed', array: '0-2' },
    ]);
    // split kept, align failed: align is made again from split's stored outputs.
    writeFileSync(join(sim.workDir, 'align-ok'), '');
    const second = await resume(run.id);
    expect(second.steps).toEqual([]);
    await waitForRun(td, run.id, 'succeeded', 3);
    expect(await rowsOf(run.id, 'align')).toEqual([
      { attempt: 1, runAttempt: 1, state: 'cancelled', array: undefined },
      { attempt: 2, runAttempt: 2, state: 'failed', array: '0-2' },
      { attempt: 3, runAttempt: 3, state: 'completed', array: '0-2' },
    ]);
    expect((await rowsOf(run.id, 'split')).map((r) => r.runAttempt)).toEqual([1, 2]);
    for (const i of [0, 1, 2]) expect(() => readFileSync(join(sim.workDir, `aligned-${i}`))).not.toThrow();

    // Cancelled while split runs: align was never made. Not "pruned": resumed, align made after split.
    const slow = await td.daemon.pipelines.trigger('slow', { actor: 'test', trigger: 'api' });
    await waitFor(async () => (await stepRequests(store, slow.id)).find((r) => r.state === 'running'), {
      what: 'split to run',
      timeoutMs: 20_000,
    });
    const cancel = await api.call('POST', `/api/v1/runs/${slow.id}/cancel`, { token });
    expect(cancel.status).toBeLessThan(300);
    await waitForRun(td, slow.id, 'cancelled');
    expect(await rowsOf(slow.id, 'align')).toEqual([]);
    writeFileSync(join(sim.workDir, 'slow-go'), '');
    await resume(slow.id);
    await waitForRun(td, slow.id, 'succeeded', 2);
    expect(await rowsOf(slow.id, 'align')).toEqual([{ attempt: 1, runAttempt: 2, state: 'completed', array: '0-1' }]);
  }, 120_000);
});
