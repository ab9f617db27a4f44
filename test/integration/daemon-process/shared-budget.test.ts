import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listRequests } from '../../../src/db/requests.js';
import { cleanEnv, runCli, spawnDaemon } from '../../helpers/cli-process.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { writeProfile } from '../../helpers/profile-file.js';
import { startTestRedis } from '../../helpers/redis.js';
import { giveToJobUser, startSim } from '../../helpers/sim.js';
import { daemonProcessEnv, readHistory, SHUTDOWN_GRACE_MS } from './daemon-process-env.js';

/**
 * Issue 17: two `worker` processes of one deployment take from one request budget in Redis, so
 * a burst of submissions they share stays under the proxy's limit (each with its own budget,
 * as before, they went at twice the profile's pace).
 */

const dproc = daemonProcessEnv();

describe('two worker processes under one budget', () => {
  it('submit a burst together without a 429 from the proxy, at the one budget’s pace', async () => {
    const root = dproc.newRoot();
    const dataDir = join(root, 'data');
    const configDir = join(root, 'config');
    dproc.redis = await startTestRedis();
    // The proxy's limit 4 at once and 4/s; the profile's budget below it, 2 and 3/s: low enough
    // that the budget, not the workers' own speed, sets the pace. Two workers each with a budget
    // of their own go at 6/s, past the proxy's 4/s whatever its burst. The proxy's burst is two
    // above the budget's: requests taken from the budget apart can reach the proxy together
    // when a loaded suite holds them in transit (with a burst of 3, 2 of 42 were refused so).
    dproc.sim = await startSim({ cpus: 64, simulatedRuntimeSec: 2, rateLimit: { capacity: 4, refillPerSecond: 4 } });
    dproc.proxy = await startFlakyProxy(dproc.sim.url);
    writeProfile(configDir, dproc.proxy.url, { rateLimit: { capacity: 2, refillPerSecond: 3 } });
    const workDir = mkdtempSync(join(tmpdir(), 'schedflow-budget-jobs-'));
    giveToJobUser(workDir);
    const env = cleanEnv({
      REDIS_URL: dproc.redis.url,
      SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS),
      SCHEDFLOW_SUBMIT_CONCURRENCY: '8',
      SCHEDFLOW_API_RATE_LIMIT: '100000',
    });
    const made = await runCli(['tokens', 'create', '--name', 't', '--scopes', 'admin', '--data-dir', dataDir], {
      env,
      cwd: root,
    });
    expect(made.code, made.stderr).toBe(0);
    const token = made.stdout.trim();
    const spawn = (roles: string) => spawnDaemon({ dataDir, configDir, env, cwd: root, extraArgs: ['--roles', roles] });
    const processes = [spawn('web,scheduler'), spawn('worker'), spawn('worker')];
    await Promise.all(processes.map((p) => p.ready()));
    const apiUrl = /local API: (http:\/\/[^/\s]+)/.exec(processes[0]?.stdout ?? '')?.[1];
    expect(apiUrl).toBeDefined();
    // Start-up requests (version checks, first polls) are not the burst. Real time: they are the
    // processes' own, and the budget they spent refills in real time.
    await new Promise((r) => setTimeout(r, 2000));

    const jobs = 40;
    const from = dproc.proxy.requests.length;
    const started = Date.now();
    const ids = await Promise.all(
      Array.from({ length: jobs }, async (_, i) => {
        const res = await http(`${apiUrl}/api/v1/jobs`, {
          method: 'POST',
          headers: bearer(token),
          body: {
            profile: 'test',
            spec: { name: `burst-${i}`, script: '#!/bin/sh\ntrue\n', current_working_directory: workDir },
          },
        });
        expect(res.status, JSON.stringify(res.json)).toBeLessThan(300);
        return (res.json as { id: string }).id;
      }),
    );
    await waitFor(
      async () => {
        const rows = (await readHistory(dataDir, (h) => listRequests(h, {}))).filter((r) => ids.includes(r.id));
        return rows.every((r) => r.jobId !== null) ? true : undefined;
      },
      { what: 'every request submitted', timeoutMs: 60_000, intervalMs: 200 },
    );
    const elapsedMs = Date.now() - started;
    const sent = dproc.proxy.requests.slice(from);
    const refused = sent.filter((r) => r.status === 429).length;
    const submits = sent.filter((r) => r.method === 'POST').length;
    const perSec = (sent.length / elapsedMs) * 1000;
    console.log(
      `two workers, one budget (2 + 3/s; proxy 4 + 4/s): ${sent.length} upstream requests (${submits} submits) in ${elapsedMs} ms, ${perSec.toFixed(1)}/s, ${refused} answered 429`,
    );
    for (const p of processes) expect((await p.stop('SIGTERM')).code).toBe(143);

    expect(refused).toBe(0);
    // Both workers submitted: together, not one alone, they kept to the budget.
    const submittedBy = processes.slice(1).map((p) => (p.stdout.match(/"msg":"job submitted"/g) ?? []).length);
    expect(
      submittedBy.every((n) => n > 0),
      `submits by worker: ${submittedBy.join(', ')}`,
    ).toBe(true);
    expect(perSec).toBeLessThanOrEqual(3 * 1.25);
  }, 120_000);
});
