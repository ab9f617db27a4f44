import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanEnv, killLeftovers, READY_TIMEOUT_MS, spawnDaemon } from '../../helpers/cli-process.js';
import { writeProfile } from '../../helpers/profile-file.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/** What `schedflow start` writes while its Redis goes away and comes back (issue 13, item 5). */

let redis: TestRedis | undefined;
let sim: TestSim | undefined;
let root: string | undefined;

afterEach(async () => {
  await killLeftovers();
  await sim?.stop();
  await redis?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
  redis = undefined;
  sim = undefined;
  root = undefined;
});

/**
 * How long Redis stays away: long enough for every connection to fail several reconnects (real
 * time: they are the daemon process's, on ioredis's timers; the slowest, the local API's, waits
 * 200, 400, 600, 800 ms…, four failures in 2.5 s).
 */
const OUTAGE_MS = 2500;

/** A start, then three waits for a log line and 5 s of outage and settling. */
const TEST_MS = READY_TIMEOUT_MS + 60_000;

describe('a Redis outage in the log', { timeout: TEST_MS }, () => {
  it('one JSON line when Redis goes, one when it returns (empty: one more as its job schedulers are put back); nothing outside the JSON log', async () => {
    root = mkdtempSync(join(tmpdir(), 'schedflow-outage-'));
    const dataDir = join(root, 'data');
    const configDir = join(root, 'config');
    redis = await startTestRedis();
    sim = await startSim();
    writeProfile(configDir, sim.url);
    const env = cleanEnv({ REDIS_URL: redis.url, SCHEDFLOW_POLL_FLOOR_MS: '500' });
    const daemon = spawnDaemon({ dataDir, configDir, env, cwd: root });
    await daemon.ready();
    const from = { stdout: daemon.stdout.length, stderr: daemon.stderr.length };

    await redis.kill();
    await daemon.waitForOutput(/Redis unreachable/);
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    // Back without its data, the harder case: the daemon also puts its job schedulers back.
    await redis.restartEmpty();
    await daemon.waitForOutput(/Redis reachable again/);
    await daemon.waitForOutput(/job schedulers were missing/);
    // The other connections reconnect within their retry delay (at most 2 s in ioredis's default;
    // real time, in the daemon process).
    await new Promise((r) => setTimeout(r, 2500));
    const stdout = daemon.stdout.slice(from.stdout);
    const stderr = daemon.stderr.slice(from.stderr);
    await daemon.stop();

    expect(stderr).toBe('');
    const lines = stdout.split('\n').filter((l) => l.trim() !== '');
    const records = lines.map((line) => JSON.parse(line) as { level: number; msg: string });
    const about = (pattern: RegExp) => records.filter((r) => pattern.test(r.msg));
    expect(about(/Redis unreachable/)).toHaveLength(1);
    expect(about(/Redis reachable again/)).toHaveLength(1);
    expect(about(/job schedulers were missing/), JSON.stringify(about(/job schedulers were missing/))).toHaveLength(1);
    // Nothing else at warn or above: no 'Redis error' per connection, no 'worker error', and no
    // failed cluster view read when the partition sample's tick (run at start, and again as its
    // scheduler is put back) meets the outage in the shared request budget (shared-budget.test.ts).
    const said = /Redis (unreachable|reachable again)|job schedulers were missing/;
    const loud = records.filter((r) => r.level >= 40 && !said.test(r.msg));
    expect(loud.map((r) => r.msg)).toEqual([]);
  });
});
