import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { getRun, stepRequests } from '../../../src/db/runs.js';
import type { JobRequestRow, PipelineRunRow } from '../../../src/db/schema.js';
import { daemonTestEnv, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import type { TestSim } from '../../helpers/sim.js';

/** Pipeline runs on the simulator through the in-process daemon: order, failures, retries. */

const env = daemonTestEnv();

/** A daemon whose pipelines folder holds `files` (name → YAML text). */
async function daemonWith(s: TestSim, files: Record<string, string>): Promise<TestDaemon> {
  return env.daemon(s.url, { pipelineTickMs: 300 }, files);
}

async function waitForRun(d: TestDaemon, runId: string, states: string[], timeoutMs = 30_000): Promise<PipelineRunRow> {
  return waitFor(
    async () => {
      const run = await getRun(d.daemon.history.store, runId);
      return run && states.includes(run.state) ? run : undefined;
    },
    { what: `run ${runId} to reach ${states.join('/')}`, timeoutMs, intervalMs: 100 },
  );
}

async function steps(d: TestDaemon, runId: string): Promise<Record<string, JobRequestRow[]>> {
  const out: Record<string, JobRequestRow[]> = {};
  for (const row of await stepRequests(d.daemon.history.store, runId)) {
    const step = row.step as string;
    out[step] = [...(out[step] ?? []), row];
  }
  return out;
}

const step = (name: string, body: string, extra = '') =>
  `  ${name}:\n    script: |\n      #!/bin/sh\n      echo ${name} >> order.txt\n${body
    .split('\n')
    .filter(Boolean)
    .map((l) => `      ${l}\n`)
    .join('')}${extra}`;

describe('a three-step pipeline', () => {
  it('runs its steps in dependency order, submitted together with Slurm dependencies', async () => {
    const sim = await env.sim();
    const gate = join(sim.workDir, 'fetch.go');
    const yaml = [
      'params:',
      '  sample: A1',
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      // fetch runs until every step is at the scheduler (a sleep was outrun on a loaded machine).
      step('fetch', `while [ ! -e ${gate} ]; do sleep 0.2; done\necho \${params.sample} > sample.txt`),
      step('align', 'sleep 1', '    needs: [fetch]\n'),
      step('report', 'cat sample.txt >> order.txt', '    needs: [align]\n'),
    ].join('\n');
    const td = await daemonWith(sim, { 'three.yaml': yaml });
    const run = await td.daemon.pipelines.trigger('three', { actor: 'test', trigger: 'api', params: { sample: 'B7' } });
    expect(run.state).toBe('running');
    await waitFor(
      async () => {
        const submitted = Object.values(await steps(td, run.id)).filter((rows) => rows[0]?.jobId != null);
        return submitted.length === 3 ? true : undefined;
      },
      { what: 'every step at the scheduler' },
    );
    writeFileSync(gate, '');

    const ended = await waitForRun(td, run.id, ['succeeded', 'failed']);
    expect(ended).toMatchObject({ state: 'succeeded', detail: null });
    expect(readFileSync(join(sim.workDir, 'order.txt'), 'utf8')).toBe('fetch\nalign\nreport\nB7\n');
    const s = await steps(td, run.id);
    expect(Object.values(s).map((rows) => rows.map((r) => r.state))).toEqual([
      ['completed'],
      ['completed'],
      ['completed'],
    ]);
    // Submitted together: each step was at the scheduler before the one it needs had ended,
    // and started only after that.
    expect(s.align?.[0]?.submittedAt).toBeLessThan(s.fetch?.[0]?.endedAt as number);
    expect(s.report?.[0]?.submittedAt).toBeLessThan(s.align?.[0]?.endedAt as number);
    expect(s.align?.[0]?.startedAt).toBeGreaterThanOrEqual(s.fetch?.[0]?.endedAt as number);
    expect(s.report?.[0]?.startedAt).toBeGreaterThanOrEqual(s.align?.[0]?.endedAt as number);
    expect(ended.startedAt).toBe(s.fetch?.[0]?.startedAt);
  }, 40_000);

  it('a failed step stops the steps that need it; the run fails and says which step', async () => {
    const sim = await env.sim();
    const yaml = [
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      step('fetch', 'exit 3'),
      step('align', 'true', '    needs: [fetch]\n'),
      step('report', 'true', '    needs: [align]\n'),
      step('cleanup', 'true', '    needs: [{ step: align, type: afterany }]\n'),
    ].join('\n');
    const td = await daemonWith(sim, { 'failing.yaml': yaml });
    const run = await td.daemon.pipelines.trigger('failing', { actor: 'test', trigger: 'api' });
    const ended = await waitForRun(td, run.id, ['succeeded', 'failed']);
    const s = await steps(td, run.id);
    expect(s.fetch?.[0]).toMatchObject({ state: 'failed', exitCode: 3 });
    // Cancelled by Slurm (kill_invalid_depend) or not submitted at all: never started either way.
    for (const name of ['align', 'report']) {
      expect(s[name]?.[0], name).toMatchObject({ state: 'cancelled', startedAt: null });
    }
    // afterany: runs whatever became of align.
    expect(s.cleanup?.[0]?.state).toBe('completed');
    expect(readFileSync(join(sim.workDir, 'order.txt'), 'utf8')).toBe('fetch\ncleanup\n');
    expect(ended.state).toBe('failed');
    expect(ended.detail).toContain('fetch: FAILED (exit 3)');
  }, 40_000);

  it('a step retried on NODE_FAIL runs again, and the steps behind it with it', async () => {
    const sim = await env.sim();
    const marker = join(sim.workDir, 'first-attempt-done');
    const yaml = [
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      step(
        'fetch',
        `if [ ! -e ${marker} ]; then touch ${marker}; sleep 30; fi`,
        '    retry: { on: [NODE_FAIL], limit: 1 }\n',
      ),
      step('align', 'true', '    needs: [fetch]\n'),
    ].join('\n');
    const td = await daemonWith(sim, { 'retrying.yaml': yaml });
    const run = await td.daemon.pipelines.trigger('retrying', { actor: 'test', trigger: 'api' });
    await waitFor(async () => ((await steps(td, run.id)).fetch?.[0]?.state === 'running' ? true : undefined), {
      what: 'fetch to run',
    });
    await waitFor(async () => ((await steps(td, run.id)).align?.[0]?.jobId ? true : undefined), {
      what: 'align to be submitted',
    });
    await sim.restart(); // running jobs become NODE_FAIL
    const ended = await waitForRun(td, run.id, ['succeeded', 'failed']);
    const s = await steps(td, run.id);
    expect(s.fetch?.map((r) => [r.attempt, r.state])).toEqual([
      [1, 'node_fail'],
      [2, 'completed'],
    ]);
    expect(s.align?.map((r) => [r.attempt, r.state])).toEqual([
      [1, 'cancelled'],
      [2, 'completed'],
    ]);
    expect(ended.state).toBe('succeeded');
  }, 60_000);
});

describe('triggering', () => {
  it('a hostile parameter value taken with :q is one shell word: it runs nothing and arrives intact', async () => {
    const sim = await env.sim();
    const yaml = [
      'params:',
      '  sample: null',
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      step('only', 'printf %s ${params.sample:q} > sample.txt'),
    ].join('\n');
    const td = await daemonWith(sim, { 'q.yaml': yaml });
    const hostile = `"; touch pwned; echo "it's $(touch pwned2)`;
    const run = await td.daemon.pipelines.trigger('q', { actor: 'test', trigger: 'api', params: { sample: hostile } });
    expect(await waitForRun(td, run.id, ['succeeded', 'failed'])).toMatchObject({ state: 'succeeded' });
    expect(readFileSync(join(sim.workDir, 'sample.txt'), 'utf8')).toBe(hostile);
    expect(existsSync(join(sim.workDir, 'pwned'))).toBe(false);
    expect(existsSync(join(sim.workDir, 'pwned2'))).toBe(false);
  }, 40_000);

  it('refuses unknown and missing parameters, and unknown pipelines, with the reason', async () => {
    const sim = await env.sim();
    const yaml = ['params:', '  sample: null', 'steps:', step('only', 'true')].join('\n');
    const td = await daemonWith(sim, { 'p.yaml': yaml });
    await expect(td.daemon.pipelines.trigger('p', { actor: 'test', trigger: 'api' })).rejects.toThrow(
      'parameter "sample" is required (it has no default)',
    );
    await expect(
      td.daemon.pipelines.trigger('p', { actor: 'test', trigger: 'api', params: { sample: 'x', other: 'y' } }),
    ).rejects.toThrow('unknown parameter "other"; this pipeline takes sample');
    await expect(td.daemon.pipelines.trigger('nope', { actor: 'test', trigger: 'api' })).rejects.toThrow(
      'no pipeline "nope" (pipelines: p)',
    );
    writeFileSync(join(sim.workDir, 'x'), '');
  }, 20_000);
});
