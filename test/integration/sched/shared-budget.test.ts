import { Writable } from 'node:stream';
import type { Job } from 'bullmq';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../../src/lib/clock.js';
import type { JobContext } from '../../../src/queue/queue-definition.js';
import { RedisClusterCache } from '../../../src/redis/cluster-cache.js';
import { SharedBudgets } from '../../../src/redis/shared-budget.js';
import { SchedClient } from '../../../src/sched/client.js';
import { ClusterView } from '../../../src/sched/cluster-view.js';
import { type ProfileInput, parseProfile } from '../../../src/sched/profile.js';
import { BudgetUnavailableError } from '../../../src/sched/sched-errors.js';
import { clusterQueue } from '../../../workers/cluster-samples.js';
import type { WorkerServices } from '../../../workers/services.js';
import { type FlakyProxy, type RecordedRequest, startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { testHistories } from '../../helpers/histories.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';

/**
 * One request budget per profile for the whole deployment, kept in Redis (issue 17): processes
 * that each take from it stay together under the proxy's limit.
 */

let redis: TestRedis;
let prefix = '';
const opened: { close(): unknown }[] = [];

beforeAll(async () => {
  redis = await startTestRedis();
});

afterAll(async () => {
  await redis.stop();
});

afterEach(async () => {
  for (const it of opened.splice(0).reverse()) await it.close();
});

let n = 0;
function budgets(): SharedBudgets {
  const made = new SharedBudgets({ url: redis.url }, prefix);
  opened.push(made);
  return made;
}

function profile(url: string, overrides: Partial<ProfileInput> = {}) {
  return parseProfile('test', {
    url,
    auth: { type: 'bearer', tokenEnv: 'SCHED_TOKEN' },
    account: 'lab',
    retries: { attempts: 2, baseDelayMs: 50, maxDelayMs: 200 },
    ...overrides,
  });
}

describe('the shared bucket (times given, Redis computing)', () => {
  // A fresh key each: the state is Redis's, not the test's.
  const at = () => {
    prefix = `budget-test-${process.pid}-${++n}`;
    return budgets().bucket({ name: 'p', rateLimit: { capacity: 10, refillPerSecond: 5 } }).at;
  };

  it('gives its capacity at once, then one token each 1/rate, and says how long to wait', async () => {
    const bucket = at();
    for (let i = 0; i < 10; i++) expect((await bucket('take', 0)).waitMs).toBe(0);
    expect(await bucket('take', 0)).toEqual({ waitMs: 200, ratePerSec: 5, limited: false, heldMs: 0, taken: 0 });
    expect((await bucket('take', 100)).waitMs).toBe(100);
    expect((await bucket('take', 200)).waitMs).toBe(0);
    expect((await bucket('take', 200)).waitMs).toBe(200);
    // Idle for long, it is full again and no fuller.
    for (let i = 0; i < 10; i++) expect((await bucket('take', 60_000)).waitMs).toBe(0);
    expect((await bucket('take', 60_000)).waitMs).toBe(200);
  });

  it('takes several tokens in one call, as many as there are', async () => {
    const bucket = at();
    expect(await bucket('take', 0, null, 3)).toMatchObject({ waitMs: 0, taken: 3 });
    // Fewer than asked for: those there are, and when the next may be taken.
    expect(await bucket('take', 0, null, 20)).toMatchObject({ waitMs: 200, taken: 7 });
    expect(await bucket('take', 0, null, 20)).toMatchObject({ waitMs: 200, taken: 0 });
    // 1.5 tokens back after 300 ms: one whole token is taken, half a token stays.
    expect(await bucket('take', 300, null, 5)).toMatchObject({ waitMs: 100, taken: 1 });
    expect(await bucket('take', 300, null, 1)).toMatchObject({ waitMs: 100, taken: 0 });
    // Limited: one at a time, whatever is asked for.
    await bucket('limited', 1000, 100);
    expect(await bucket('take', 1500, null, 5)).toMatchObject({ taken: 1 });
  });

  it('after a 429 holds every taker for the Retry-After, then sends one at a time at half the pace', async () => {
    const bucket = at();
    expect(await bucket('limited', 0, 1000)).toEqual({
      waitMs: 1000,
      ratePerSec: 2.5,
      limited: true,
      heldMs: 1000,
      taken: 0,
    });
    expect(await bucket('take', 400)).toMatchObject({ waitMs: 600, heldMs: 600 });
    expect(await bucket('peek', 400)).toMatchObject({ waitMs: 600, heldMs: 600 });
    // Another 429 within the hold is the same overrun: the pace is not halved again.
    expect(await bucket('limited', 500, 1000)).toMatchObject({ ratePerSec: 2.5, heldMs: 1000 });
    // One token (capacity 1 while limited), then one at the pace, grown a little since t = 1 s
    // (2.5 + 0.5 s × 1 % of 5 a second = 2.525 a second).
    expect((await bucket('take', 1500)).waitMs).toBe(0);
    expect((await bucket('take', 1500)).waitMs).toBe(Math.ceil(1000 / 2.525));
  });

  it('grows back as RequestBudget does: toward the refused pace, then the configured one', async () => {
    const bucket = at();
    await bucket('limited', 0, 1000); // refused at 5: 2.5 from t = 1 s
    await bucket('limited', 1000, 1000); // refused at 2.5: 1.25 from t = 2 s
    expect((await bucket('peek', 2000)).ratePerSec).toBe(1.25);
    expect((await bucket('peek', 2000 + 25_000)).ratePerSec).toBeCloseTo(1.875, 6);
    expect((await bucket('peek', 2000 + 50_000)).ratePerSec).toBeCloseTo(2.5, 6);
    expect((await bucket('peek', 2000 + 60_000)).ratePerSec).toBeCloseTo(3, 6);
    expect(await bucket('peek', 2000 + 100_000)).toMatchObject({ ratePerSec: 5, limited: false });
  });

  it("uses Redis's clock when none is given", async () => {
    prefix = `budget-test-${process.pid}-${++n}`;
    // A token a second: the second take comes well within it, however late a loaded machine makes it.
    const bucket = budgets().bucket({ name: 'p', rateLimit: { capacity: 1, refillPerSecond: 1 } });
    expect((await bucket.take()).waitMs).toBe(0);
    const wait = (await bucket.take()).waitMs;
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(1000);
    await new Promise((r) => setTimeout(r, wait + 5));
    expect((await bucket.take()).waitMs).toBe(0);
  });
});

describe('contention: work other than polling waiting for the budget', () => {
  it('is not requests that merely overlap while tokens are to spare, but those the bucket made wait', async () => {
    prefix = `budget-test-${process.pid}-${++n}`;
    const budget = budgets().budgetFor(
      parseProfile('p', {
        url: 'http://127.0.0.1:1',
        auth: { type: 'bearer', tokenEnv: 'SCHED_TOKEN' },
        account: 'lab',
        rateLimit: { capacity: 4, refillPerSecond: 0.5 },
      }),
    );
    // A poll and a lookup at once: the lookup queues behind the poll for one round trip to
    // Redis, no longer. Taking it for contention held the pending details back for 10 s at a time.
    await Promise.all([budget.acquire('poll'), budget.acquire('normal')]);
    expect(budget.contendedWithin(10_000)).toBe(false);
    // Past the bucket's capacity the last lookup waits for a token (2 s): that is contention,
    // for as long as it waits, however short the window asked about, and a while after.
    const past = Promise.all([budget.acquire('normal'), budget.acquire('normal'), budget.acquire('normal')]);
    await vi.waitFor(() => expect(budget.contendedWithin(0)).toBe(true), { timeout: 5000 });
    await past;
    expect(budget.contendedWithin(60_000)).toBe(true);
  });
});

describe('two clients of one profile (as two worker processes)', () => {
  let sim: TestSim;
  let proxy: FlakyProxy;

  beforeAll(async () => {
    // The proxy's limit: 5 at once, 10 a second; the profile's budget is kept below it (4, 8/s).
    sim = await startSim({ rateLimit: { capacity: 5, refillPerSecond: 10 } });
    proxy = await startFlakyProxy(sim.url);
  });

  afterAll(async () => {
    await proxy.close();
    await sim.stop();
  });

  /** Two clients, each with a Redis connection of its own when shared, sending `each` reads at once. */
  async function storm(shared: boolean, each: number) {
    prefix = `budget-test-${process.pid}-${++n}`;
    const clients: SchedClient[] = [];
    for (let i = 0; i < 2; i++) {
      const p = profile(proxy.url, { rateLimit: { capacity: 4, refillPerSecond: 8 } });
      const client = await SchedClient.connect(p, {
        logger: pino({ level: 'silent' }),
        env: { SCHED_TOKEN: ALICE_TOKEN },
        budget: shared ? budgets().budgetFor(p) : undefined,
      });
      opened.push(client);
      clients.push(client);
    }
    // The connections' version checks are not the storm. Real time: the budget they spent (in
    // Redis, by Redis's clock) refills before it.
    await new Promise((r) => setTimeout(r, 1000));
    const from = proxy.requests.length;
    const started = Date.now();
    await Promise.allSettled(clients.flatMap((c) => Array.from({ length: each }, () => c.listJobs())));
    const elapsedMs = Date.now() - started;
    const sent = proxy.requests.slice(from);
    const refused = sent.filter((r) => r.status === 429).length;
    return { sent, refused, elapsedMs, perSec: (sent.length / elapsedMs) * 1000 };
  }

  /** The most requests any window of the storm held, less what the proxy's bucket allowed in it. */
  function overrun(sent: RecordedRequest[], capacity: number, perSec: number): number {
    let worst = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < sent.length; i++) {
      for (let j = i; j < sent.length; j++) {
        const allowed = capacity + (perSec * ((sent[j]?.atMs ?? 0) - (sent[i]?.atMs ?? 0))) / 1000;
        worst = Math.max(worst, j - i + 1 - allowed);
      }
    }
    return worst;
  }

  it('stay together under the limit: no 429, and no window holds more than the bucket allows', async () => {
    const { sent, refused, elapsedMs, perSec } = await storm(true, 30);
    console.log(
      `shared budget: ${sent.length} requests in ${elapsedMs} ms (${perSec.toFixed(1)}/s; budget 8/s, proxy 10/s), ${refused} answered 429`,
    );
    expect(refused).toBe(0);
    expect(sent.length).toBe(60);
    // A request or so of leeway: the proxy stamps arrival, Redis the token.
    expect(overrun(sent, 4, 8)).toBeLessThanOrEqual(1);
    expect(elapsedMs).toBeGreaterThanOrEqual(((60 - 4) / 8) * 1000 * 0.9);
  }, 30_000);

  it('each with a budget of its own (the CLI without a daemon), they overrun the proxy', async () => {
    const { sent, refused, elapsedMs, perSec } = await storm(false, 30);
    console.log(
      `budget per process: ${sent.length} requests in ${elapsedMs} ms (${perSec.toFixed(1)}/s), ${refused} answered 429`,
    );
    expect(refused).toBeGreaterThan(0);
  }, 30_000);
});

describe('a budget whose Redis does not answer', () => {
  const histories = testHistories();

  it('fails the request with a typed, retryable error instead of holding it', async () => {
    const sim = await startSim();
    try {
      prefix = `budget-test-${process.pid}-${++n}`;
      const p = profile(sim.url);
      const client = await SchedClient.connect(p, {
        logger: pino({ level: 'silent' }),
        env: { SCHED_TOKEN: ALICE_TOKEN },
        budget: budgets().budgetFor(p),
      });
      opened.push(client);
      redis.pause();
      const started = Date.now();
      const error = await client.listJobs().catch((e: unknown) => e);
      redis.resume();
      expect(error).toBeInstanceOf(BudgetUnavailableError);
      expect((error as BudgetUnavailableError).retryable).toBe(true);
      expect((error as Error).message).toMatch(
        /was not sent: the request budget of profile test in Redis did not answer/,
      );
      // Two attempts of 2 s each and a backoff between: bounded, not forever.
      expect(Date.now() - started).toBeLessThan(8000);
      // Back: the budget answers again.
      await expect(client.listJobs()).resolves.toBeDefined();
    } finally {
      redis.resume();
      await sim.stop();
    }
  }, 20_000);

  it('holds back a cluster view read: the Redis outage, said once by the Redis watch, so logged at debug; the last answer served stale, the sample skipped', async () => {
    const sim = await startSim();
    // The view's answers on a Redis of their own, which keeps answering: what is under test is the
    // read the budget holds back (in the daemon the cache's own calls may have gone through before
    // the budget's Redis went away).
    const cacheRedis = await startTestRedis();
    const cacheConnection = new Redis(cacheRedis.url, { maxRetriesPerRequest: 1 });
    try {
      prefix = `budget-test-${process.pid}-${++n}`;
      const p = profile(sim.url);
      const client = await SchedClient.connect(p, {
        logger: pino({ level: 'silent' }),
        env: { SCHED_TOKEN: ALICE_TOKEN },
        budget: budgets().budgetFor(p),
      });
      opened.push(client);
      const records: { level: number; msg: string; code?: string }[] = [];
      const logger = pino(
        { level: 'debug' },
        new Writable({
          write(chunk, _encoding, done) {
            records.push(JSON.parse(String(chunk)));
            done();
          },
        }),
      );
      const cache = new RedisClusterCache(cacheConnection);
      const clock = new ManualClock();
      const view = new ClusterView({ cache, prefix, clientFor: () => client, ttlMs: 1000, logger, clock });
      expect((await view.view('test', 'queue')).stale).toBe(false);

      await clock.advance(1000);
      redis.pause();
      const during = await view.view('test', 'queue').finally(() => redis.resume());
      expect(during.stale).toBe(true);
      expect(during.staleReason).toMatch(/the request budget of profile test in Redis did not answer/);

      // The partitions were never read: nothing to sample, a gap in the chart.
      const services = {
        store: await histories.make('sqlite'),
        clients: { connected: () => true },
        clock,
        logger,
        clusterView: view,
        settings: { clusterSampleKeepMs: 3_600_000 },
      } as unknown as WorkerServices;
      redis.pause();
      const ctx: JobContext = {
        token: undefined,
        putOff: () => Promise.reject(new Error('a sample is not put off')),
        handBack: () => Promise.reject(new Error('a sample is not handed back')),
      };
      const sample = await clusterQueue
        .processor(services)({ data: { profile: 'test' } } as Job, ctx)
        .finally(() => redis.resume());
      expect(sample).toEqual({ unavailable: expect.stringMatching(/request budget of profile test in Redis/) });

      const said = (msg: string) => records.filter((r) => r.msg === msg).map((r) => [r.level, r.code]);
      expect(said('cluster view: read failed')).toContainEqual([20, 'SCHEDFLOW_ERR_SCHED_BUDGET_UNAVAILABLE']);
      expect(said('cluster sample skipped')).toEqual([[20, 'SCHEDFLOW_ERR_CLUSTER_VIEW_UNAVAILABLE']]);
      expect(records.filter((r) => r.level >= 40)).toEqual([]);
    } finally {
      redis.resume();
      cacheConnection.disconnect();
      await cacheRedis.stop();
      await sim.stop();
    }
  }, 30_000);
});
