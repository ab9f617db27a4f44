import { readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { getRun, stepRequests } from '../../../src/db/runs.js';
import type { JobRequestRow, PipelineRunRow } from '../../../src/db/schema.js';
import { apiClient } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { startWebhookReceiver } from '../../helpers/webhook-receiver.js';

/**
 * Step outputs (issue 36) on the simulator: `name=value` lines a step writes to $SCHEDFLOW_OUTPUTS
 * reach later steps' scripts and arrays, the run's record and its webhook; a value that cannot be
 * known fails the step that needed it, with why.
 */

const env = daemonTestEnv();

async function waitForRun(d: TestDaemon, runId: string): Promise<PipelineRunRow> {
  return waitFor(
    async () => {
      const run = await getRun(d.daemon.history.store, runId);
      return run && ['succeeded', 'failed', 'cancelled'].includes(run.state) ? run : undefined;
    },
    { what: `run ${runId} to end`, timeoutMs: 40_000, intervalMs: 100 },
  );
}

async function stepsOf(d: TestDaemon, runId: string): Promise<Record<string, JobRequestRow>> {
  const out: Record<string, JobRequestRow> = {};
  for (const row of await stepRequests(d.daemon.history.store, runId)) out[row.step as string] = row;
  return out;
}

describe('step outputs', () => {
  it('reach a later step’s script, size arrays at run time (0: skipped), and go with the run’s webhook', async () => {
    const receiver = await startWebhookReceiver();
    env.defer(() => receiver.stop());
    const sim = await env.sim();
    const yaml = [
      `webhook: ${receiver.url}/runs`,
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      '  split:',
      '    script: |',
      '      #!/bin/sh',
      '      echo "chunks=3" >> "$SCHEDFLOW_OUTPUTS"',
      '      echo "none=0" >> "$SCHEDFLOW_OUTPUTS"',
      `      echo "label=it's a b" >> "$SCHEDFLOW_OUTPUTS"`,
      // Its own file, named in the pipeline.
      '  declared:',
      '    outputs: { file: declared-values.txt }',
      '    script: "#!/bin/sh\\necho word=hi >> \\"$SCHEDFLOW_OUTPUTS\\"\\n"',
      '  use:',
      '    needs: [split, declared]',
      '    script: |',
      '      #!/bin/sh',
      '      echo ${steps.split.outputs.label:q} ${steps.declared.outputs.word} > label.txt',
      '  chunk:',
      '    needs: [split]',
      '    array: ${steps.split.outputs.chunks}',
      '    script: |',
      '      #!/bin/sh',
      '      touch chunk-$SLURM_ARRAY_TASK_ID',
      '  nothing:',
      '    needs: [split]',
      '    array: ${steps.split.outputs.none}',
      '    script: "#!/bin/sh\\ntouch nothing-ran\\n"',
      '  after_nothing:',
      '    needs: [nothing]',
      '    script: "#!/bin/sh\\ntouch after-nothing\\n"',
      '  independent:',
      '    script: "#!/bin/sh\\ntrue\\n"',
    ].join('\n');
    const td = await env.daemon(sim.url, { pipelineTickMs: 300 }, { 'outs.yaml': yaml });
    const run = await td.daemon.pipelines.trigger('outs', { actor: 'test', trigger: 'api' });
    // Made with the run: the steps that use no outputs and wait on none that do.
    const made = await stepsOf(td, run.id);
    expect(Object.keys(made).sort()).toEqual(['declared', 'independent', 'split']);

    const ended = await waitForRun(td, run.id);
    expect(ended.state).toBe('succeeded');
    const s = await stepsOf(td, run.id);
    expect(readFileSync(join(sim.workDir, 'label.txt'), 'utf8')).toBe("it's a b hi\n");
    expect(readFileSync(join(sim.workDir, 'declared-values.txt'), 'utf8')).toBe('word=hi\n');
    // Made once the step whose outputs it uses had ended; the steps behind it waited with it.
    expect(s.use?.createdAt).toBeGreaterThanOrEqual(s.split?.endedAt as number);
    expect(s.after_nothing?.createdAt).toBeGreaterThanOrEqual(s.nothing?.createdAt as number);
    expect(s.chunk?.spec).toMatchObject({ array: '0-2' });
    for (const i of [0, 1, 2]) expect(() => readFileSync(join(sim.workDir, `chunk-${i}`))).not.toThrow();
    // Sized 0: skipped, no job; the step behind it goes on as after a completed one.
    expect(s.nothing).toMatchObject({ state: 'completed', jobId: null, reason: 'Skipped' });
    expect(() => readFileSync(join(sim.workDir, 'nothing-ran'))).toThrow();
    expect(s.nothing?.spec).not.toHaveProperty('array');
    expect(s.after_nothing?.state).toBe('completed');
    expect(s.split?.outputs).toMatchObject({ values: { chunks: '3', none: '0', label: "it's a b" }, error: null });

    const [call] = await receiver.waitForCalls(1, 20_000);
    const body = JSON.parse(call?.body ?? '{}') as { run: { outputs: unknown; state: string } };
    expect(body.run.state).toBe('succeeded');
    expect(body.run.outputs).toEqual({
      declared: { word: 'hi' },
      split: { chunks: '3', none: '0', label: "it's a b" },
    });

    // The API's run detail and `schedflow runs show` carry them too.
    const api = apiClient(td);
    const shownByApi = await api.call('GET', `/api/v1/runs/${run.id}`, { token: await api.token(['read']) });
    expect((shownByApi.json as { outputs: unknown }).outputs).toEqual(body.run.outputs);
    const shown = await runCli(['runs', 'show', run.id, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(
      "outputs\n  declared.word = hi\n  split.chunks = 3\n  split.label = it's a b\n  split.none = 0\n",
    );
  }, 60_000);

  it('an output not written, or no outputs file at all, fails the step that needed it with what it wrote', async () => {
    const sim = await env.sim();
    const yaml = [
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      '  writes_one:',
      '    script: "#!/bin/sh\\necho a=1 >> \\"$SCHEDFLOW_OUTPUTS\\"\\n"',
      '  wants_b:',
      '    needs: [writes_one]',
      '    script: "#!/bin/sh\\necho ${steps.writes_one.outputs.b}\\n"',
      '  behind_b:',
      '    needs: [wants_b]',
      '    script: "#!/bin/sh\\ntrue\\n"',
      // Writes no outputs file at all.
      '  silent:',
      '    script: "#!/bin/sh\\ntrue\\n"',
      '  wants_silent:',
      '    needs: [silent]',
      '    script: "#!/bin/sh\\necho ${steps.silent.outputs.a}\\n"',
    ].join('\n');
    const td = await env.daemon(sim.url, { pipelineTickMs: 300 }, { 'missing.yaml': yaml });
    const run = await td.daemon.pipelines.trigger('missing', { actor: 'test', trigger: 'api' });
    const ended = await waitForRun(td, run.id);
    expect(ended.state).toBe('failed');
    const s = await stepsOf(td, run.id);
    expect(s.writes_one?.state).toBe('completed');
    expect(s.wants_b).toMatchObject({
      state: 'submit_failed',
      jobId: null,
      errorCode: 'SCHEDFLOW_ERR_STEP_OUTPUT_MISSING',
    });
    expect(s.wants_b?.errorMessage).toContain('step "writes_one" wrote no output "b" (it wrote a to ');
    // Its spec as written: the value it needed is not known.
    expect(s.wants_b?.spec).toMatchObject({ script: expect.stringContaining('${steps.writes_one.outputs.b}') });
    expect(s.behind_b?.state).toBe('cancelled');
    expect(s.silent?.state).toBe('completed');
    expect(s.wants_silent).toMatchObject({ state: 'submit_failed', errorCode: 'SCHEDFLOW_ERR_STEP_OUTPUT_MISSING' });
    expect(s.wants_silent?.errorMessage).toMatch(
      /step "silent" wrote no output "a" \(it wrote none to \/.*\.schedflow-outputs-/,
    );
    expect(ended.detail).toContain('wants_b: SUBMIT_FAILED');
  }, 60_000);

  it('a declared file an earlier run left is not read as this run’s; a step whose outputs nothing uses is not read', async () => {
    const sim = await env.sim();
    const yaml = [
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      '  producer:',
      '    outputs: { file: stale.txt }',
      '    script: "#!/bin/sh\\ntest -f write-now && echo n=1 > \\"$SCHEDFLOW_OUTPUTS\\"\\ntrue\\n"',
      '  consumer:',
      '    needs: [producer]',
      '    script: "#!/bin/sh\\necho ${steps.producer.outputs.n}\\n"',
      '  lonely:',
      '    script: "#!/bin/sh\\necho x=1 >> \\"$SCHEDFLOW_OUTPUTS\\"\\n"',
    ].join('\n');
    const td = await env.daemon(sim.url, { pipelineTickMs: 300 }, { 'stale.yaml': yaml });
    writeFileSync(join(sim.workDir, 'write-now'), '');
    const first = await td.daemon.pipelines.trigger('stale', { actor: 'test', trigger: 'api' });
    expect((await waitForRun(td, first.id)).state).toBe('succeeded');
    const s1 = await stepsOf(td, first.id);
    expect(s1.producer?.outputs).toMatchObject({ values: { n: '1' } });
    expect(s1.lonely?.outputs).toBeNull();
    // The next run writes nothing; the file is the earlier run's (five minutes old).
    rmSync(join(sim.workDir, 'write-now'));
    const old = new Date(Date.now() - 5 * 60_000);
    utimesSync(join(sim.workDir, 'stale.txt'), old, old);
    const second = await td.daemon.pipelines.trigger('stale', { actor: 'test', trigger: 'api' });
    expect((await waitForRun(td, second.id)).state).toBe('failed');
    const s2 = await stepsOf(td, second.id);
    expect(s2.producer?.outputs).toMatchObject({ values: {}, error: null });
    expect(s2.consumer).toMatchObject({ state: 'submit_failed', errorCode: 'SCHEDFLOW_ERR_STEP_OUTPUT_MISSING' });
  }, 60_000);

  it('a step sized by an output past what the profile takes is refused at the door, not submitted', async () => {
    const sim = await env.sim();
    const yaml = [
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      '  split:',
      '    script: "#!/bin/sh\\necho chunks=5000 >> \\"$SCHEDFLOW_OUTPUTS\\"\\n"',
      '  align:',
      '    needs: [split]',
      '    array: ${steps.split.outputs.chunks}',
      '    script: "#!/bin/sh\\ntrue\\n"',
    ].join('\n');
    const td = await env.daemon(sim.url, { pipelineTickMs: 300 }, { 'big.yaml': yaml });
    const run = await td.daemon.pipelines.trigger('big', { actor: 'test', trigger: 'api' });
    expect((await waitForRun(td, run.id)).state).toBe('failed');
    const s = await stepsOf(td, run.id);
    expect(s.align).toMatchObject({
      state: 'submit_failed',
      jobId: null,
      reason: 'Refused',
      errorCode: 'SCHEDFLOW_ERR_ARRAY_TOO_LARGE',
    });
    expect(s.align?.errorMessage).toContain('the array names index 4999');
  }, 60_000);
});
