import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eq, inArray } from 'drizzle-orm';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../../src/config/daemon-config.js';
import { getRun, listRuns } from '../../../src/db/runs.js';
import type { PipelineRunRow } from '../../../src/db/schema.js';
import { type Daemon, startDaemon } from '../../../src/main.js';
import { apiClient } from '../../helpers/api.js';
import { daemonTestEnv, openHistoryOf, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';

/**
 * Runs that start runs (issue 36): a pipeline's `on:` starts a run of it when a run of another
 * ends, with the ended run's values as `${upstream.…}`; one run per upstream end, across a
 * restart of the scheduler and with two scheduler processes on one history.
 */

const env = daemonTestEnv();
const ENDED = ['succeeded', 'failed', 'cancelled', 'skipped'];

async function waitForRun(d: Daemon, runId: string): Promise<PipelineRunRow> {
  return waitFor(
    async () => {
      const run = await getRun(d.history.store, runId);
      return run && ENDED.includes(run.state) ? run : undefined;
    },
    { what: `run ${runId} to end`, timeoutMs: 40_000, intervalMs: 100 },
  );
}

const runsOf = async (d: Daemon, pipeline: string): Promise<PipelineRunRow[]> =>
  (await listRuns(d.history.store, { pipeline, limit: 200 })).reverse();

/** The runs of `pipeline` started by the end of `upstream`, waited for until there are `count`. */
async function startedBy(d: Daemon, pipeline: string, upstream: PipelineRunRow, count = 1): Promise<PipelineRunRow[]> {
  return waitFor(
    async () => {
      const runs = (await runsOf(d, pipeline)).filter((r) => r.upstreamRunId === upstream.id);
      return runs.length >= count ? runs : undefined;
    },
    { what: `${count} run(s) of ${pipeline} started by run ${upstream.id}`, timeoutMs: 30_000, intervalMs: 100 },
  );
}

/** Waits until the end of `run` has been followed (its downstream runs made). */
async function followed(d: Daemon, run: PipelineRunRow): Promise<void> {
  await waitFor(async () => ((await getRun(d.history.store, run.id))?.downstreamCheckedAt ? true : undefined), {
    what: `the end of run ${run.id} to be followed`,
    timeoutMs: 30_000,
    intervalMs: 100,
  });
}

function files(workDir: string): Record<string, string> {
  return {
    // Writes two outputs; fails when asked to.
    'a.yaml': [
      'params:',
      '  fail: "no"',
      'defaults:',
      `  current_working_directory: ${workDir}`,
      'steps:',
      '  produce:',
      '    script: |',
      '      #!/bin/sh',
      '      echo "count=2" >> "$SCHEDFLOW_OUTPUTS"',
      `      echo "label=it's \${run.id}" >> "$SCHEDFLOW_OUTPUTS"`,
      '      [ ${params.fail:q} = no ]',
    ].join('\n'),
    'b.yaml': [
      'on:',
      '  succeeded: [a]',
      'defaults:',
      `  current_working_directory: ${workDir}`,
      'steps:',
      '  use:',
      '    script: |',
      '      #!/bin/sh',
      '      echo ${upstream.outputs.produce.label:q} ${upstream.outputs.produce.count} ${upstream.state} > "b-${upstream.run_id}.txt"',
    ].join('\n'),
    'c.yaml': [
      'on:',
      '  failed: [a]',
      'defaults:',
      `  current_working_directory: ${workDir}`,
      'steps:',
      '  clean:',
      '    script: "#!/bin/sh\\necho ${upstream.pipeline} ${upstream.state} > c-${upstream.run_id}.txt\\n"',
    ].join('\n'),
    'd.yaml': [
      'on:',
      '  finished: [a]',
      'defaults:',
      `  current_working_directory: ${workDir}`,
      'steps:',
      '  report:',
      '    script: "#!/bin/sh\\ntrue\\n"',
    ].join('\n'),
  };
}

describe('runs that start runs (on:)', () => {
  it('start one run per upstream end that their on: names, with its outputs in their scripts', async () => {
    const sim = await env.sim({ cpus: 4 });
    const td = await env.daemon(sim.url, { pipelineTickMs: 300 }, files(sim.workDir));
    const d = td.daemon;

    const ok = await d.pipelines.trigger('a', { actor: 'test', trigger: 'api' });
    expect((await waitForRun(d, ok.id)).state).toBe('succeeded');
    const [b] = await startedBy(d, 'b', ok);
    const [dOk] = await startedBy(d, 'd', ok);
    const bEnded = await waitForRun(d, b?.id as string);
    expect(bEnded, bEnded.detail ?? '').toMatchObject({
      state: 'succeeded',
      trigger: 'upstream',
      actor: 'upstream:a',
      upstreamRunId: ok.id,
      upstreamAttempt: 1,
      triggeredBy: `run ${ok.id} of a, succeeded`,
    });
    // The upstream values, the output that holds a quote given as one shell word.
    expect(readFileSync(join(sim.workDir, `b-${ok.id}.txt`), 'utf8')).toBe(`it's ${ok.id} 2 succeeded\n`);
    expect((await waitForRun(d, dOk?.id as string)).state).toBe('succeeded');

    const bad = await d.pipelines.trigger('a', { actor: 'test', trigger: 'api', params: { fail: 'yes' } });
    expect((await waitForRun(d, bad.id)).state).toBe('failed');
    const [c] = await startedBy(d, 'c', bad);
    await startedBy(d, 'd', bad);
    await waitForRun(d, c?.id as string);
    expect(readFileSync(join(sim.workDir, `c-${bad.id}.txt`), 'utf8')).toBe('a failed\n');
    await followed(d, bad);

    // Once each: b after the success only, c after the failure only, d after both.
    const byUpstream = async (pipeline: string) => (await runsOf(d, pipeline)).map((r) => r.upstreamRunId);
    expect(await byUpstream('b')).toEqual([ok.id]);
    expect(await byUpstream('c')).toEqual([bad.id]);
    expect((await byUpstream('d')).sort()).toEqual([ok.id, bad.id].sort());

    // The API shows where a run came from.
    const api = apiClient(td);
    const shown = await api.call('GET', `/api/v1/runs/${b?.id}`, { token: await api.token(['read']) });
    expect(shown.json).toMatchObject({
      trigger: 'upstream',
      upstream: { run_id: ok.id, attempt: 1, links: { self: `/api/v1/runs/${ok.id}` } },
    });
  }, 90_000);

  it('a run triggered by hand cannot take upstream values; a missing upstream output records the run skipped', async () => {
    const sim = await env.sim();
    const td = await env.daemon(
      sim.url,
      { pipelineTickMs: 300 },
      {
        ...files(sim.workDir),
        'e.yaml': [
          'on:',
          '  succeeded: [a]',
          'defaults:',
          `  current_working_directory: ${sim.workDir}`,
          'steps:',
          '  s:',
          '    script: "#!/bin/sh\\necho ${upstream.outputs.produce.nosuch}\\n"',
        ].join('\n'),
      },
    );
    const d = td.daemon;
    await expect(d.pipelines.trigger('b', { actor: 'test', trigger: 'api' })).rejects.toThrow(
      /upstream\.outputs\.produce\.label}: this run was not started by an upstream run/,
    );
    const ok = await d.pipelines.trigger('a', { actor: 'test', trigger: 'api' });
    await waitForRun(d, ok.id);
    const [e] = await startedBy(d, 'e', ok);
    expect(e).toMatchObject({ state: 'skipped', trigger: 'upstream' });
    expect(e?.detail).toMatch(
      /^not started: .*upstream\.outputs\.produce\.nosuch}: the upstream run's step "produce" wrote no output "nosuch"/,
    );
    // b is not held back by e.
    const [b] = await startedBy(d, 'b', ok);
    expect((await waitForRun(d, b?.id as string)).state).toBe('succeeded');
  }, 90_000);

  it('follow an end once across a restart of the scheduler, even when the end was followed but not marked', async () => {
    const sim = await env.sim();
    const yaml = files(sim.workDir);
    // a's step waits for a file the test writes: it ends while the daemon is down.
    yaml['a.yaml'] = (yaml['a.yaml'] as string).replace(
      '      [ ${params.fail:q} = no ]',
      '      while [ ! -e go ]; do sleep 0.1; done',
    );
    const td: TestDaemon = await env.daemon(sim.url, { pipelineTickMs: 300 }, yaml);
    const run = await td.daemon.pipelines.trigger('a', { actor: 'test', trigger: 'api' });
    await waitFor(async () => ((await getRun(td.daemon.history.store, run.id))?.startedAt ? true : undefined), {
      what: 'a to start',
      timeoutMs: 20_000,
    });
    await td.restart(async () => {
      writeFileSync(join(sim.workDir, 'go'), '');
      // The job ends while no scheduler runs.
      await waitFor(
        async () =>
          sim.server.cluster.listJobs().every((j) => j.state !== 'RUNNING' && j.state !== 'PENDING') ? true : undefined,
        { what: "a's job to end", timeoutMs: 20_000 },
      );
    });
    expect((await waitForRun(td.daemon, run.id)).state).toBe('succeeded');
    const [b] = await startedBy(td.daemon, 'b', run);
    await followed(td.daemon, run);

    // A scheduler killed between making b and marking a followed: the next one finds b made.
    await td.restart(async () => {
      const opened = await openHistoryOf(td);
      try {
        const { store } = opened;
        await store.run(
          store.db
            .update(store.t.pipelineRuns)
            .set({ downstreamCheckedAt: null })
            .where(eq(store.t.pipelineRuns.id, run.id)),
        );
      } finally {
        await opened.close();
      }
    });
    await followed(td.daemon, run);
    expect((await runsOf(td.daemon, 'b')).map((r) => r.id)).toEqual([b?.id]);
    expect((await runsOf(td.daemon, 'd')).filter((r) => r.upstreamRunId === run.id)).toHaveLength(1);
  }, 120_000);

  it('with two scheduler processes on one history, each end starts one run of each pipeline that follows it', async () => {
    const sim = await env.sim({ cpus: 8 });
    const td = await env.daemon(sim.url, { pipelineTickMs: 200 }, files(sim.workDir));
    const config = loadDaemonConfig({}, { ...td.daemon.config, roles: ['worker', 'scheduler'] });
    const other = await startDaemon(config, pino({ level: 'silent' }));
    env.defer(() => other.stop());
    const upstream = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        (i % 2 ? other : td.daemon).pipelines.trigger('a', { actor: 'test', trigger: 'api' }),
      ),
    );
    for (const run of upstream) {
      await waitForRun(td.daemon, run.id);
      await followed(td.daemon, run);
    }
    // And both following the same ends at once, as if each had missed the other's mark.
    const ids = upstream.map((r) => r.id);
    const { store } = td.daemon.history;
    await store.run(
      store.db
        .update(store.t.pipelineRuns)
        .set({ downstreamCheckedAt: null })
        .where(inArray(store.t.pipelineRuns.id, ids)),
    );
    await Promise.all([td.daemon.pipelines.followUpstream(), other.pipelines.followUpstream()]);
    for (const run of upstream) await followed(td.daemon, run);
    for (const pipeline of ['b', 'd']) {
      const started = (await runsOf(td.daemon, pipeline)).map((r) => r.upstreamRunId).sort();
      expect(started, pipeline).toEqual([...ids].sort());
    }
  }, 120_000);

  it('checks the owner again when an end is followed: a kept older file cannot read what is no longer allowed', async () => {
    const sim = await env.sim();
    const step = (touch: string) => [
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      '  s:',
      `    script: "#!/bin/sh\\ntouch ${touch}\\n"`,
    ];
    const td = await env.daemon(
      sim.url,
      { pipelineTickMs: 300 },
      {
        'a.yaml': ['owner: alice', 'allow: [bob]', ...step('a-ran')].join('\n'),
        'b.yaml': ['owner: bob', 'on:', '  succeeded: [a]', ...step('b-ran')].join('\n'),
      },
    );
    const d = td.daemon;
    // Alice takes bob off a's allow: b's file, unchanged, now fails its check and stays loaded.
    writeFileSync(join(td.configDir, 'pipelines', 'a.yaml'), ['owner: alice', ...step('a-ran')].join('\n'));
    await d.pipelines.load();
    expect((await d.pipelines.get('b'))?.error).toMatch(/does not allow "bob"/);
    const a = await d.pipelines.trigger('a', { actor: 'test', trigger: 'api' });
    await followed(d, await waitForRun(d, a.id));
    expect(await runsOf(d, 'b')).toHaveLength(0);
  }, 90_000);

  it('never starts a run of a pipeline already in the chain that led to the end (a loop a kept file let through)', async () => {
    const sim = await env.sim();
    const step = [
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      '  s:',
      '    script: "#!/bin/sh\\ntrue\\n"',
    ];
    const td = await env.daemon(
      sim.url,
      { pipelineTickMs: 300 },
      {
        'a.yaml': ['on:', '  succeeded: [b]', ...step].join('\n'),
        'b.yaml': step.join('\n'),
      },
    );
    const d = td.daemon;
    const dir = join(td.configDir, 'pipelines');
    // a's new file fails (an unknown upstream) and its older one, following b, stays loaded; b's
    // new file follows a, and is checked against a's new file: no loop seen, and it loads.
    writeFileSync(join(dir, 'a.yaml'), ['on:', '  succeeded: [nosuch]', ...step].join('\n'));
    writeFileSync(join(dir, 'b.yaml'), ['on:', '  succeeded: [a]', ...step].join('\n'));
    await d.pipelines.load();
    expect((await d.pipelines.get('a'))?.error).toMatch(/no pipeline "nosuch"/);
    expect((await d.pipelines.get('b'))?.on).toEqual([{ end: 'succeeded', pipeline: 'a' }]);
    // b → a (the kept file) → b would go on for ever: the end of a's run is not followed by b.
    const b = await d.pipelines.trigger('b', { actor: 'test', trigger: 'api' });
    await waitForRun(d, b.id);
    const [a] = await startedBy(d, 'a', b);
    await followed(d, await waitForRun(d, a?.id as string));
    expect((await runsOf(d, 'a')).length).toBe(1);
    expect((await runsOf(d, 'b')).map((r) => r.id)).toEqual([b.id]);
  }, 90_000);
});
