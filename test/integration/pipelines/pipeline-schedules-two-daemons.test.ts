import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../../src/config/daemon-config.js';
import { listRuns } from '../../../src/db/runs.js';
import type { PipelineRunRow } from '../../../src/db/schema.js';
import { type Daemon, startDaemon } from '../../../src/main.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import type { TestSim } from '../../helpers/sim.js';

/**
 * Cron schedules as BullMQ job schedulers, two daemons in one process on one Redis and one history
 * (pipeline-schedules.test.ts has overlap and catch-up; pipeline-two-processes.test.ts, two `schedflow start`).
 */

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

describe('two daemon processes on one Redis and one history', () => {
  it('fire each tick once (separate connections, workers and job schedulers)', async () => {
    const sim = await env.sim({ cpus: 4 });
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(...String(chunk).split('\n').filter(Boolean));
        done();
      },
    });
    const td = await env.daemon(
      sim.url,
      { pipelineTickMs: 300 },
      {
        'shared.yaml': pipelineYaml(sim, "cron: '*/2 * * * * *'\noverlap: allow"),
      },
    );
    // A second daemon on the same config, data dir, Redis and queue prefix.
    const config = loadDaemonConfig({}, { ...td.daemon.config, roles: ['worker', 'scheduler'] });
    const extra = await startDaemon(config, pino({ level: 'info' }, sink));
    env.defer(() => extra.stop());
    // Both fire ticks side by side: each is a race between the two workers, once only.
    const scheduled = async (d: Daemon) => (await runsOf(d, 'shared')).filter((r) => r.trigger === 'schedule');
    await waitFor(async () => ((await scheduled(td.daemon)).length >= 3 ? true : undefined), {
      what: 'three ticks with both daemons up',
      timeoutMs: 30_000,
    });
    // Which worker wins a race is the machine's timing (on a loaded one, the first can win them
    // all): with the first daemon stopped, the second must fire the ticks on its own.
    await td.daemon.stop();
    const before = (await scheduled(extra)).length;
    await waitFor(
      async () =>
        lines.some((l) => l.includes('"msg":"pipeline run made"')) && (await scheduled(extra)).length >= before + 2
          ? true
          : undefined,
      { what: 'the second daemon to fire ticks alone', timeoutMs: 30_000 },
    );
    const runs = await scheduled(extra);
    expect(new Set(runs.map((r) => r.scheduledFor)).size).toBe(runs.length);
    // The second daemon never met a tick the other had already fired.
    const logged = lines.map((l) => JSON.parse(l) as { msg: string });
    expect(logged.filter((l) => l.msg === 'tick already has its run')).toEqual([]);
  }, 60_000);
});
