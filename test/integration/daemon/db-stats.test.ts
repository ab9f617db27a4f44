import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readPruneRecord } from '../../../src/db/retention.js';
import { cleanEnv, runCli } from '../../helpers/cli-process.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';
import { TEST_HISTORY } from '../../helpers/test-history.js';

/**
 * `schedflow db stats` beside a running daemon (read-only), and the daemon's prune tick: an
 * audit row past its retention is counted by the stats, then removed by the next prune.
 */

let sim: TestSim;
let redis: TestRedis;
let td: TestDaemon;

beforeAll(async () => {
  sim = await startSim();
  redis = await startTestRedis();
  // Audit rows are kept a day; the prune ticks every 500 ms.
  td = await startTestDaemon(sim.url, redis.url, { retainAuditMs: 86_400_000, pruneEveryMs: 500 });
}, 60_000);

afterAll(async () => {
  await td?.stop();
  await redis?.stop();
  await sim?.stop();
});

describe('schedflow db stats', () => {
  it('shows rows and bytes per table and what the next prune removes; the daemon then prunes it', async () => {
    const store = td.daemon.history.store;
    // Past the retention of the shell's settings too (SCHEDFLOW_RETAIN_AUDIT=1d below).
    const old = Date.now() - 3 * 86_400_000;
    const stats = await runCli(['db', 'stats', '--json', '--data-dir', td.dataDir], {
      env: cleanEnv({ SCHEDFLOW_RETAIN_AUDIT: '1d' }),
    });
    expect(stats.stderr).toBe('');
    expect(stats.code).toBe(0);
    const parsed = JSON.parse(stats.stdout) as {
      dialect: string;
      tables: { table: string; rows: number; bytes: number | null }[];
      next_prune: Record<string, number>;
      retention: { auditMs: number };
    };
    expect(parsed.dialect).toBe(TEST_HISTORY);
    expect(parsed.retention.auditMs).toBe(86_400_000);
    expect(parsed.tables.map((t) => t.table)).toEqual(
      expect.arrayContaining(['job_requests', 'audit_log', 'job_usage']),
    );
    expect(Object.keys(parsed.next_prune)).toEqual(
      expect.arrayContaining(['job_requests', 'audit_log', 'pipeline_runs', 'run_transitions', 'job_usage']),
    );
    expect(parsed.retention).toMatchObject({ runsMs: 90 * 86_400_000, keepRunsPerPipeline: 5 });

    await store.run(
      store.db
        .insert(store.t.auditLog)
        .values({ at: old, actor: 'token:lims', action: 'request.accept', outcome: 'ok' }),
    );
    const text = await runCli(['db', 'stats', '--data-dir', td.dataDir], {
      env: cleanEnv({ SCHEDFLOW_RETAIN_AUDIT: '1d' }),
    });
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^table +rows +bytes +next prune$/m);
    expect(text.stdout).toMatch(/^audit_log +\d+ +\S+( \S+)? +\d+$/m);

    // The daemon's tick removes it, and records what it removed.
    await waitFor(
      async () => {
        const rows = await store.all(store.db.select().from(store.t.auditLog));
        return rows.every((r) => r.at > old) || undefined;
      },
      { timeoutMs: 20_000, what: 'the old audit row pruned' },
    );
    await waitFor(async () => ((await readPruneRecord(store))?.totals.audit_log ?? 0) >= 1 || undefined, {
      timeoutMs: 10_000,
      what: 'the prune recorded',
    });
  });
});
