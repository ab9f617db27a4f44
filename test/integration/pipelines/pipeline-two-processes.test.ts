import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/db/database.js';
import { listRuns } from '../../../src/db/runs.js';
import type { PipelineRunRow } from '../../../src/db/schema.js';
import { DEFAULT_QUEUE_PREFIX } from '../../../src/queue/catalog.js';
import {
  cleanEnv,
  type DaemonProcess,
  killLeftovers,
  READY_TIMEOUT_MS,
  spawnDaemon,
} from '../../helpers/cli-process.js';
import { waitFor } from '../../helpers/http.js';
import { writeProfile } from '../../helpers/profile-file.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * Two `schedflow start` OS processes on one Redis, one config dir and one
 * history: a cron tick is a BullMQ job scheduler's job, taken by one worker, so
 * each tick makes one run. pipeline-schedules.test.ts checks the same with two
 * daemons in one Node process; here they share nothing but Redis and the files.
 */

let redis: TestRedis | undefined;
let sim: TestSim | undefined;
let root: string | undefined;

afterEach(async () => {
  // Daemons a failed test left running first, then what they talk to.
  await killLeftovers();
  await sim?.stop();
  await redis?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
  sim = undefined;
  redis = undefined;
  root = undefined;
});

const PIPELINE = 'every-second';

/** Pino's JSON lines on a daemon's stdout. */
function logLines(stdout: string): { msg?: string; [k: string]: unknown }[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg?: string });
}

/** The scheduled runs in the history, read-only and opened for this one read, as `schedflow` reads it. */
async function scheduledRuns(dataDir: string): Promise<PipelineRunRow[]> {
  const history = openDatabase(join(dataDir, 'history.sqlite'), { readonly: true });
  try {
    return (await listRuns(history.store, { pipeline: PIPELINE, limit: 1000 })).filter((r) => r.trigger === 'schedule');
  } finally {
    history.close();
  }
}

/** Two starts, one after the other, and the 20 s of runs. */
const TWO_STARTS_MS = 2 * READY_TIMEOUT_MS + 30_000;

describe('two daemon processes on one Redis, one config dir and one history', { timeout: TWO_STARTS_MS }, () => {
  it('fire each cron tick once', async () => {
    root = mkdtempSync(join(tmpdir(), 'schedflow-two-procs-'));
    const dataDir = join(root, 'data');
    const configDir = join(root, 'config');
    redis = await startTestRedis();
    const s = await startSim({ cpus: 4 });
    sim = s;
    writeProfile(configDir, s.url);
    mkdirSync(join(configDir, 'pipelines'));
    // Every second, and overlap: allow, so every tick makes a run whatever the earlier runs are doing.
    writeFileSync(
      join(configDir, 'pipelines', `${PIPELINE}.yaml`),
      [
        'schedule:',
        "  cron: '* * * * * *'",
        '  overlap: allow',
        'defaults:',
        `  current_working_directory: ${s.workDir}`,
        'steps:',
        '  work:',
        '    script: "#!/bin/sh\\ntrue\\n"',
      ].join('\n'),
    );
    // A fresh Redis, so the default queue prefix is this test's alone; short grace, so SIGTERM ends in seconds.
    const env = cleanEnv({ REDIS_URL: redis.url, SCHEDFLOW_SHUTDOWN_GRACE_MS: '3000' });
    // One after the other: the first applies the history's migrations before the second opens it.
    // Each gets its own local API port (spawnDaemon's --listen 127.0.0.1:0).
    const daemons: DaemonProcess[] = [];
    for (let i = 0; i < 2; i++) {
      const daemon = spawnDaemon({ dataDir, configDir, env, cwd: root });
      await daemon.ready(READY_TIMEOUT_MS);
      daemons.push(daemon);
    }
    const bothUpAt = Date.now();

    // Both are workers of the pipeline queue, competing for each tick's job.
    const queue = new Queue('pipeline', { connection: { url: redis.url }, prefix: DEFAULT_QUEUE_PREFIX });
    try {
      expect(await queue.getWorkersCount()).toBe(2);
    } finally {
      await queue.close();
    }

    // Five ticks while both run: about five seconds, longer on a busy machine.
    await waitFor(
      async () =>
        (await scheduledRuns(dataDir)).filter((r) => (r.scheduledFor as number) >= bothUpAt).length >= 5
          ? true
          : undefined,
      { what: 'five scheduled runs while both daemons run', timeoutMs: 20_000, intervalMs: 250 },
    );
    const exits = await Promise.all(daemons.map((d) => d.stop('SIGTERM')));
    for (const [i, exit] of exits.entries()) {
      expect(exit, daemons[i]?.stderr).toMatchObject({ code: 143, signal: null });
    }

    const runs = await scheduledRuns(dataDir);
    const byTick = new Map<number, PipelineRunRow[]>();
    for (const r of runs) byTick.set(r.scheduledFor as number, [...(byTick.get(r.scheduledFor as number) ?? []), r]);
    expect(byTick.size).toBeGreaterThanOrEqual(3);
    const twice = [...byTick].filter(([, rs]) => rs.length > 1).map(([t]) => new Date(t).toISOString());
    expect(twice).toEqual([]);
    for (const t of byTick.keys()) expect(t % 1000).toBe(0);

    // The history's unique (pipeline, scheduled_for) index hides a tick fired twice from the rows
    // above: the job that comes second logs "tick already has its run" instead of making a run.
    // Each run must be made once, by one process, and no tick fired again, nor retried because the
    // other process held the history's write lock.
    const lines = daemons.flatMap((d) => logLines(d.stdout));
    const made = new Map<string, number>();
    for (const l of lines)
      if (l.msg === 'pipeline run made') made.set(String(l.runId), (made.get(String(l.runId)) ?? 0) + 1);
    expect(runs.filter((r) => made.get(r.id) !== 1).map((r) => r.id)).toEqual([]);
    expect(lines.filter((l) => l.msg === 'tick already has its run')).toEqual([]);
    expect(daemons.map((d) => d.stdout + d.stderr).join('\n')).not.toMatch(/database is locked|SQLITE_BUSY/);
  });
});
