import { describe, expect, it } from 'vitest';
import { cleanEnv, READY_TIMEOUT_MS, runCli, spawnDaemon } from '../../helpers/cli-process.js';
import { daemonProcessEnv, logLines, SHUTDOWN_GRACE_MS } from './daemon-process-env.js';

/**
 * A running `schedflow start` and what goes on around it: a second daemon on its data dir,
 * its Redis going away and coming back.
 */

const dproc = daemonProcessEnv();

/**
 * A test's bound: a start, then at most 90 s of the bounds in it (a refused start that loads every
 * module, the waits for a log line, a CLI's 45 s, the stop).
 */
const TEST_MS = READY_TIMEOUT_MS + 90_000;

describe('a second daemon on the data dir of a running one', { timeout: TEST_MS }, () => {
  it('is refused at once (exit 2) and touches nothing: the first keeps its Redis and goes on working', async () => {
    const t = await dproc.setUp();
    // No REDIS_URL: each would run the data dir's private redis-server.
    const env = cleanEnv({ SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS) });
    const first = spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env, cwd: t.root });
    await first.ready();
    const second = spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env, cwd: t.root });
    const exit = await second.exited;
    expect(exit.code, second.stderr).toBe(2);
    expect(second.stderr).toMatch(new RegExp(`is in use by another schedflow daemon \\(pid ${first.pid}\\)`));
    expect(second.stderr).not.toMatch(/^\s+at /m);
    expect(first.child.exitCode).toBeNull();
    const submit = await runCli(
      ['jobs', 'submit', t.jobFile('after', '#!/bin/sh\ntrue\n'), '--wait', '--data-dir', t.dataDir],
      { env, cwd: t.root, timeoutMs: 45_000 },
    );
    expect(submit.code, submit.stderr).toBe(0);
    expect(submit.stdout).toMatch(/completed \(exit 0\)/);
    // Stopped, not killed by the cleanup: a daemon killed leaves its private Redis for its restart.
    expect((await first.stop('SIGTERM')).code).toBe(143);
  });
});

describe('Redis going away and coming back under a running daemon', { timeout: TEST_MS }, () => {
  it('is said once when it goes and once when it returns, JSON only, and the daemon goes on working', async () => {
    const t = await dproc.setUp();
    const daemon = await t.startDaemon();
    await dproc.redis?.kill();
    await daemon.waitForOutput(/"msg":"Redis unreachable/, 10_000);
    // Every queue and worker keeps failing to reconnect meanwhile: none of it may reach the log.
    // Real time: the reconnects are the daemon process's own, on ioredis's timers.
    await new Promise((r) => setTimeout(r, 3000));
    await dproc.redis?.start();
    await daemon.waitForOutput(/"msg":"Redis reachable again"/, 15_000);
    const lines = logLines(daemon.stdout);
    expect(lines.filter((l) => l.msg?.startsWith('Redis unreachable'))).toHaveLength(1);
    expect(lines.filter((l) => l.msg === 'worker error' || l.msg === 'Redis error')).toEqual([]);
    expect(daemon.stderr).toBe('');
    // A CLI start and a job's whole life: on a loaded 2-core machine more than runCli's 20 s.
    const submit = await t.cli(
      ['jobs', 'submit', t.jobFile('after-redis', '#!/bin/sh\ntrue\n'), '--wait', '--data-dir', t.dataDir],
      45_000,
    );
    expect(submit.code, submit.stderr).toBe(0);
  });
});
