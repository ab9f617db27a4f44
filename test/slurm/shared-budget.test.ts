import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { SharedBudgets } from '../../src/redis/shared-budget.js';
import { SchedClient } from '../../src/sched/client.js';
import { type FlakyProxy, startFlakyProxy } from '../helpers/flaky-proxy.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { realSlurm, slurmrestdProfile } from './cluster.js';

/**
 * Issue 17 on a real slurmrestd 25.11: two clients of one profile (as two worker processes),
 * each with a Redis connection of its own, take from the one budget in Redis; counted at a
 * loopback proxy in front of slurmrestd, together they keep its pace, not twice it.
 */

const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'schedflow-slurm-budget-'));
let redis: TestRedis;
let proxy: FlakyProxy;
const budgets: SharedBudgets[] = [];
const clients: SchedClient[] = [];

beforeAll(async () => {
  redis = await startTestRedis();
  proxy = await startFlakyProxy(realSlurm().url);
  const { profile } = slurmrestdProfile(join(dir, 'alice'), {
    url: proxy.url,
    extra: { rateLimit: { capacity: 2, refillPerSecond: 5 } },
  });
  for (let i = 0; i < 2; i++) {
    const shared = new SharedBudgets({ url: redis.url }, 'slurm-budget');
    budgets.push(shared);
    clients.push(await SchedClient.connect(profile, { logger, budget: shared.budgetFor(profile) }));
  }
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  for (const b of budgets) b.close();
  await proxy?.close();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

it('two clients sharing a budget of 2 and 5/s send 20 reads at its pace together', async () => {
  // The connections' checks are not the reads.
  await new Promise((r) => setTimeout(r, 1000));
  const from = proxy.requests.length;
  const started = Date.now();
  const answers = await Promise.all(clients.flatMap((c) => Array.from({ length: 10 }, () => c.listJobs())));
  const elapsedMs = Date.now() - started;
  const sent = proxy.requests.slice(from);
  console.log(`real slurmrestd, shared budget 2 + 5/s: ${sent.length} requests in ${elapsedMs} ms`);
  expect(answers).toHaveLength(20);
  expect(sent.length).toBe(20);
  expect(sent.every((r) => r.status === 200)).toBe(true);
  // Each at its own budget would take (20 - 4) / 10 s; together, (20 - 2) / 5 s.
  expect(elapsedMs).toBeGreaterThanOrEqual(((20 - 2) / 5) * 1000 * 0.9);
  // No window holds more than the bucket allows (a request of leeway for arrival stamps).
  for (let i = 0; i < sent.length; i++) {
    for (let j = i; j < sent.length; j++) {
      const allowed = 2 + (5 * ((sent[j]?.atMs ?? 0) - (sent[i]?.atMs ?? 0))) / 1000;
      expect(j - i + 1).toBeLessThanOrEqual(allowed + 1);
    }
  }
}, 60_000);
