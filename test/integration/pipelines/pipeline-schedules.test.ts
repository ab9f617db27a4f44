import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listRuns } from '../../../src/db/runs.js';
import type { PipelineRunRow } from '../../../src/db/schema.js';
import type { Daemon } from '../../../src/main.js';
import { daemonTestEnv, openHistoryOf } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import type { TestSim } from '../../helpers/sim.js';

/** Cron schedules as BullMQ job schedulers: overlap and catch-up after downtime (pipeline-schedules-two-daemons.test.ts has several daemons). */

const env = daemonTestEnv();

function pipelineYaml(s: TestSim, schedule: string, script = 'true'): string {
  return [
    'schedule:',
    ...schedule.split('\n').map((l) => `  ${l}`),
    'defaults:',
    `  current_working_directory: ${s.workDir}`,
    'steps:',
    '  work:',
    `    script: "#!/bin/sh\\n${script}\\n"`,
  ].join('\n');
}

const runsOf = async (d: Daemon, pipeline: string): Promise<PipelineRunRow[]> =>
  (await listRuns(d.history.store, { pipeline, limit: 200 })).reverse();

/** Whether any two runs were active at the same time (from their start and end). */
function overlapping(runs: PipelineRunRow[]): boolean {
  const spans = runs
    .filter((r) => r.startedAt !== null)
    .map((r) => [r.startedAt as number, r.endedAt ?? Number.POSITIVE_INFINITY] as const)
    .sort((a, b) => a[0] - b[0]);
  return spans.some((span, i) => i > 0 && span[0] < (spans[i - 1]?.[1] as number));
}

describe('overlap', () => {
  it('skip: ticks while a run is active are recorded as skipped, with the run they waited on', async () => {
    const sim = await env.sim();
    const td = await env.daemon(
      sim.url,
      { pipelineTickMs: 300 },
      {
        'every2s.yaml': pipelineYaml(sim, "cron: '*/2 * * * * *'\noverlap: skip", 'sleep 5'),
      },
    );
    const daemon = td.daemon;
    const runs = await waitFor(
      async () => {
        const all = await runsOf(daemon, 'every2s');
        return all.filter((r) => r.state === 'skipped').length >= 2 ? all : undefined;
      },
      { what: 'two skipped ticks', timeoutMs: 20_000 },
    );
    const [first] = runs;
    const skipped = runs.filter((r) => r.state === 'skipped');
    expect(first?.trigger).toBe('schedule');
    expect(skipped[0]?.detail).toMatch(/^tick skipped: run [0-9a-f-]{36} is still active \(overlap: skip\)$/);
    expect(new Set(runs.map((r) => r.scheduledFor)).size).toBe(runs.length);
    // Every tick is two seconds after the one before: the cron's, not the worker's, time.
    for (const r of runs) expect((r.scheduledFor as number) % 2000).toBe(0);
    expect(runs.filter((r) => r.state === 'running').length).toBeLessThanOrEqual(1);
  }, 30_000);

  it('queue: ticks wait behind the active run and start one after another', async () => {
    const sim = await env.sim({ cpus: 4 });
    const td = await env.daemon(
      sim.url,
      { pipelineTickMs: 300 },
      {
        'queued.yaml': pipelineYaml(sim, "cron: '*/2 * * * * *'\noverlap: queue", 'sleep 3'),
      },
    );
    const daemon = td.daemon;
    await waitFor(
      async () => {
        const all = await runsOf(daemon, 'queued');
        return all.filter((r) => r.state === 'succeeded').length >= 2 ? all : undefined;
      },
      { what: 'two queued runs to have run', timeoutMs: 25_000 },
    );
    const runs = await runsOf(daemon, 'queued');
    expect(runs.some((r) => r.state === 'queued')).toBe(true);
    expect(runs.filter((r) => r.state === 'skipped')).toEqual([]);
    expect(overlapping(runs)).toBe(false);
  }, 40_000);
});

describe('catch-up after downtime', () => {
  it('none, latest and all (bounded) each do what they say', async () => {
    const sim = await env.sim({ cpus: 4 });
    const every = (catchup: string) =>
      pipelineYaml(sim as TestSim, `cron: '* * * * *'\ncatchup: ${catchup}\ncatchup_limit: 3`);
    const td = await env.daemon(
      sim.url,
      { pipelineTickMs: 300 },
      {
        'none.yaml': every('none'),
        'latest.yaml': every('latest'),
        'all.yaml': every('all'),
      },
    );
    const tenMinutesAgo = Date.now() - 10 * 60_000;
    const restartedAt = Date.now();
    await td.restart(async () => {
      // As if the daemon had last fired ten minutes ago.
      const history = await openHistoryOf(td);
      try {
        const { store } = history;
        await store.run(store.db.update(store.t.pipelineSchedules).set({ lastScheduledFor: tenMinutesAgo }));
      } finally {
        await history.close();
      }
    });
    const daemon = td.daemon;
    const catchUps = async (name: string) => (await runsOf(daemon, name)).filter((r) => r.trigger === 'catchup');
    await waitFor(
      async () => ((await catchUps('all')).length === 3 && (await catchUps('latest')).length === 1 ? true : undefined),
      {
        what: 'the catch-up runs',
      },
    );
    // A moment more: nothing else is caught up (real time: an absence shows only by letting the
    // daemon's schedule ticks run).
    await new Promise((r) => setTimeout(r, 1000));
    expect(await catchUps('none')).toEqual([]);
    expect(await catchUps('latest')).toHaveLength(1);
    const all = (await catchUps('all')).map((r) => r.scheduledFor as number);
    expect(all).toHaveLength(3);
    // The three most recent missed minutes, oldest first, each on a minute boundary.
    expect(all.every((t) => t % 60_000 === 0)).toBe(true);
    expect(all[1] as number).toBe((all[0] as number) + 60_000);
    expect((await catchUps('latest'))[0]?.scheduledFor).toBe(all[2]);
    // The latest is the last minute before the restart, even one under a minute back: no
    // scheduler fired it, and the first pass owns it (else a later pass made it a second catch-up).
    expect(all[2] as number).toBeGreaterThanOrEqual(Math.floor(restartedAt / 60_000) * 60_000);
  }, 40_000);

  it('owes nothing from the time a schedule was off, once it is switched on', async () => {
    const sim = await env.sim();
    const before = Date.now();
    // A tick every second: a mark left a minute back would make the next pass catch up its ticks.
    const every = (enabled: boolean) => pipelineYaml(sim, `cron: '* * * * * *'\ncatchup: all\nenabled: ${enabled}`);
    const td = await env.daemon(sim.url, { pipelineTickMs: 200 }, { 'later.yaml': every(false) });
    const daemon = td.daemon;
    const mark = await waitFor(
      async () => {
        const history = daemon.history.store;
        const row = await history.one(history.db.select().from(history.t.pipelineSchedules).limit(1));
        return row?.lastScheduledFor ?? undefined;
      },
      { what: 'the first catch-up pass' },
    );
    expect(mark).toBeGreaterThanOrEqual(before);

    writeFileSync(join(td.configDir, 'pipelines', 'later.yaml'), every(true));
    await waitFor(
      async () =>
        (await runsOf(daemon, 'later')).filter((r) => r.trigger === 'schedule').length >= 2 ? true : undefined,
      { what: 'two ticks once switched on' },
    );
    expect((await runsOf(daemon, 'later')).filter((r) => r.trigger === 'catchup')).toEqual([]);
  }, 30_000);
});
