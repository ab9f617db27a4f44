import { describe, expect, it } from 'vitest';
import { listRuns } from '../../../src/db/runs.js';
import type { PipelineRunRow } from '../../../src/db/schema.js';
import { type ApiClient, apiClient } from '../../helpers/api.js';
import { daemonTestEnv, openHistoryOf, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';

/**
 * An admin's pause of a schedule, through the local API against a real daemon
 * and Redis: paused ticks make no runs, a trigger by hand still does, the
 * pause outlasts a restart, and resuming makes the ticks fire again.
 */

const env = daemonTestEnv();

interface PipelineItem {
  name: string;
  schedule: { enabled: boolean; next: string[]; paused: { by: string; at: string } | null } | null;
}

const scheduledRuns = async (td: TestDaemon): Promise<PipelineRunRow[]> =>
  (await listRuns(td.daemon.history.store, { pipeline: 'ticking', limit: 500 })).filter((r) => r.trigger !== 'api');

const schedulerKeys = async (td: TestDaemon): Promise<string[]> =>
  (await td.daemon.queues.pipeline.getJobSchedulers()).map((s) => s.key);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The schedule's period. */
const TICK_MS = 1000;

async function listed(api: ApiClient, token: string): Promise<PipelineItem | undefined> {
  const r = await api.call('GET', '/api/v1/pipelines', { token });
  return (r.json as { items: PipelineItem[] }).items.find((p) => p.name === 'ticking');
}

describe('pausing a schedule', () => {
  it('stops its ticks making runs, across a restart, until resumed; triggering by hand still works', async () => {
    const sim = await env.sim({ cpus: 4 });
    // Every second (so a few ticks' quiet is a few seconds); catch-up `all` would show any tick
    // owed from the paused time.
    const pipeline = [
      'schedule:',
      "  cron: '* * * * * *'",
      '  overlap: allow',
      '  catchup: all',
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      '  work:',
      '    script: "#!/bin/sh\\ntrue\\n"',
    ].join('\n');
    const td = await env.daemon(sim.url, { pipelineTickMs: 300 }, { 'ticking.yaml': pipeline });
    let api = apiClient(td);
    const admin = await api.token(['admin'], 'pauser');
    const reader = await api.token(['read']);

    await waitFor(async () => ((await scheduledRuns(td)).length > 0 ? true : undefined), {
      what: 'a first scheduled run',
    });
    expect(await schedulerKeys(td)).toContain('pipeline-ticking');

    const refused = await api.call('POST', '/api/v1/pipelines/ticking/pause', { token: reader });
    expect(refused.status).toBe(403);
    const paused = await api.call('POST', '/api/v1/pipelines/ticking/pause', { token: admin });
    expect(paused.status, paused.text).toBe(200);
    const pausedAt = Date.now();
    expect((paused.json as PipelineItem).schedule).toMatchObject({
      enabled: true,
      next: [],
      paused: { by: 'token pauser' },
    });
    expect((await listed(api, reader))?.schedule?.paused?.by).toBe('token pauser');
    expect(await schedulerKeys(td)).not.toContain('pipeline-ticking');

    // Three ticks' time (real time: an absence shows only by letting the daemon's cron ticks
    // run): none due after the pause makes a run (one taken just before it may still finish
    // making its own), but a run asked for by hand starts.
    await sleep(3 * TICK_MS);
    expect((await scheduledRuns(td)).filter((r) => (r.scheduledFor ?? 0) >= pausedAt)).toEqual([]);
    const quietSince = Date.now();
    const byHand = await api.call('POST', '/api/v1/pipelines/ticking/runs', { token: admin, body: {} });
    expect(byHand.status, byHand.text).toBe(201);
    expect((byHand.json as { trigger: string }).trigger).toBe('api');

    // Down, still paused, as if for ten minutes: the restart brings back neither the
    // ticks nor catch-up runs for the time paused.
    await td.restart(async () => {
      const history = await openHistoryOf(td);
      try {
        const { store } = history;
        await store.run(store.db.update(store.t.pipelineSchedules).set({ lastScheduledFor: Date.now() - 10 * 60_000 }));
      } finally {
        await history.close();
      }
    });
    api = apiClient(td);
    expect((await listed(api, reader))?.schedule?.paused?.by).toBe('token pauser');
    expect(await schedulerKeys(td)).not.toContain('pipeline-ticking');
    // Three ticks' time again, real time for the same reason.
    await sleep(3 * TICK_MS);
    // Long after the pause: any run made now, catch-up for the paused time included, is wrong.
    expect((await scheduledRuns(td)).filter((r) => r.createdAt >= quietSince)).toEqual([]);

    const resumed = await api.call('POST', '/api/v1/pipelines/ticking/resume', { token: admin });
    expect(resumed.status, resumed.text).toBe(200);
    const resumedAt = Date.now();
    const schedule = (resumed.json as PipelineItem).schedule;
    expect(schedule?.paused).toBeNull();
    expect(schedule?.next).toHaveLength(5);
    const next = await waitFor(
      async () => (await scheduledRuns(td)).find((r) => r.createdAt >= resumedAt && r.trigger === 'schedule'),
      { what: 'a scheduled run after resuming', timeoutMs: 10_000 },
    );
    expect(next.scheduledFor as number).toBeGreaterThanOrEqual(resumedAt - 2000);
    expect(await schedulerKeys(td)).toContain('pipeline-ticking');
    // A moment more: nothing from the paused time is caught up.
    await sleep(TICK_MS);
    expect((await scheduledRuns(td)).filter((r) => r.trigger === 'catchup')).toEqual([]);
  }, 60_000);

  it('refuses a pipeline without a schedule (409) and an unknown one (404)', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, {}, { 'manual.yaml': 'steps:\n  only:\n    script: "#!/bin/sh\\ntrue\\n"' });
    const api = apiClient(td);
    const admin = await api.token(['admin']);
    const manual = await api.call('POST', '/api/v1/pipelines/manual/pause', { token: admin });
    expect(manual.status).toBe(409);
    expect((manual.json as { error: { code: string } }).error.code).toBe('SCHEDFLOW_ERR_PIPELINE_NOT_SCHEDULED');
    const unknown = await api.call('POST', '/api/v1/pipelines/nope/resume', { token: admin });
    expect(unknown.status).toBe(404);
  });
});
