import { Queue, Worker } from 'bullmq';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getRequest } from '../../../src/db/requests.js';
import { ManualClock } from '../../../src/lib/clock.js';
import { SubmitFairShare } from '../../../src/queue/fair-share.js';
import { QueueKeeper } from '../../../src/queue/queue-keeper.js';
import { queueSubmitJobs } from '../../../src/queue/submit-queue.js';
import { type AcceptDeps, accept } from '../../../src/requests/accept.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { requeueUnsubmitted } from '../../../workers/submit.js';
import { apiClient, shellSpec } from '../../helpers/api.js';
import { daemonTestEnv, startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { testHistories } from '../../helpers/histories.js';
import { waitFor } from '../../helpers/http.js';

/**
 * Fair share between owners on the submit side (docs/fair-share.md): an owner's backlog does
 * not hold another owner's request behind it, each owner's requests go in their order, and
 * every request gets one job, also after Redis lost everything.
 */

const env = daemonTestEnv();

describe('the submit queue with fair share (a real Redis, a worker taking jobs one at a time)', () => {
  const queues: Queue[] = [];
  afterAll(async () => {
    await Promise.all(queues.map((q) => q.close()));
  });

  const histories = testHistories();

  function newQueue(weights: Record<string, number> = {}) {
    const queue = new Queue(`fair-${Math.random().toString(36).slice(2, 8)}`, {
      connection: { url: env.redis.url },
      prefix: 'fair-test',
    });
    queues.push(queue);
    return { queue, fair: new SubmitFairShare(queue, weights) };
  }

  /** Takes the queue's jobs one at a time: their ids in the order served. */
  async function serve(queue: Queue, total: number): Promise<string[]> {
    const served: string[] = [];
    const worker = new Worker(
      queue.name,
      async (job) => {
        served.push(String(job.id));
      },
      { connection: { url: env.redis.url }, prefix: 'fair-test', concurrency: 1 },
    );
    await waitFor(async () => served.length === total || undefined, { what: 'every job served' });
    await worker.close();
    return served;
  }

  /** Adds the jobs as the door does, then takes them one at a time: the owners in the order served. */
  async function servedOrder(
    batches: { owner: string; count: number }[],
    weights: Record<string, number> = {},
  ): Promise<string[]> {
    const { queue, fair } = newQueue(weights);
    let n = 0;
    for (const { owner, count } of batches) {
      const jobs = Array.from({ length: count }, () => ({ requestId: `${owner}-${n++}`, owner }));
      await queueSubmitJobs(queue, fair, jobs);
    }
    return serve(
      queue,
      batches.reduce((s, b) => s + b.count, 0),
    );
  }

  it('serves a later owner right after the round being served, and each owner in its order', async () => {
    const served = await servedOrder([
      { owner: 'a', count: 20 },
      { owner: 'b', count: 3 },
    ]);
    // FIFO would serve b's first request 21st; round robin serves it 2nd (after a's first, same round).
    expect(served.slice(0, 6)).toEqual(['a-0', 'b-20', 'a-1', 'b-21', 'a-2', 'b-22']);
    const of = (owner: string) => served.filter((id) => id.startsWith(`${owner}-`));
    expect(of('a')).toEqual(Array.from({ length: 20 }, (_, i) => `a-${i}`));
  });

  it('gives an owner of weight 2 two submissions a round', async () => {
    const served = await servedOrder(
      [
        { owner: 'a', count: 6 },
        { owner: 'b', count: 6 },
      ],
      { a: 2 },
    );
    expect(
      served
        .slice(0, 9)
        .map((id) => id[0])
        .join(''),
    ).toBe('aabaabaab');
  });

  /**
   * The door (src/requests/accept.ts) and the queue keeper of one daemon over `queue`, the keeper
   * not started: its checks are made where a test wants them. The door's hold after a late add is
   * on a clock the test moves.
   */
  async function doorAndKeeper(queue: Queue, fair: SubmitFairShare) {
    const store = await histories.make('sqlite');
    const logger = pino({ level: 'silent' });
    const clock = new ManualClock();
    const keeper = new QueueKeeper({
      logger,
      everyMs: 60_000,
      schedulers: [],
      requeue: () => requeueUnsubmitted(store, queue, logger, new Set(), 0, clock, fair),
      addLeft: (jobs) => queueSubmitJobs(queue, fair, jobs),
      redisReachable: () => true,
      redisChanges: () => 0,
    });
    const deps: AcceptDeps = {
      store,
      clock,
      submitQueue: {
        queue,
        fairShare: fair,
        logger,
        redisReachable: () => true,
        sweepLater: keeper.sweepLater,
        keeperBehind: () => keeper.behind,
        clock,
        // An add past its wait is left to the keeper: 500 ms, the daemon's, has been outrun by a
        // Redis add on a loaded machine, and a-0 and a-4 below must get through.
        enqueueWaitMs: 3_000,
      },
    };
    const spec = jobSpecSchema.parse({ name: 'n', script: '#!/bin/sh\ntrue\n' });
    /** What the door answered for each request: queued by it, or left to the keeper. */
    const outcomes: Record<string, string> = {};
    /** Accepts a request of owner lab-a, one millisecond after the one before (the requeue orders by acceptance). */
    const submit = async (id: string) => {
      outcomes[id] = await accept(deps, {
        id,
        profile: 'default',
        name: id,
        spec,
        owner: 'lab-a',
        actor: 'test',
        origin: 'api',
        at: clock.now(),
        source: 'api',
      });
      await clock.advance(1);
    };
    return { keeper, clock, submit, outcomes };
  }

  it("keeps an owner's order when Redis was slow to take a job: later ones wait behind those left to the keeper", async () => {
    const { queue, fair } = newQueue();
    const { keeper, clock, submit, outcomes } = await doorAndKeeper(queue, fair);
    await submit('a-0');
    // Redis stopped while a-1's job is added: the door answers after its wait (real time, its own
    // timer) and leaves the adds after it to the keeper for a while.
    env.redis.pause();
    await submit('a-1').finally(() => env.redis.resume());
    await submit('a-2');
    await clock.advance(60_000);
    // The hold is over, but a-2 is not in the queue yet: a-3 added now would go before it.
    await submit('a-3');
    await keeper.check();
    await submit('a-4');
    await keeper.close();

    expect(await serve(queue, 5)).toEqual(['a-0', 'a-1', 'a-2', 'a-3', 'a-4']);
    expect(outcomes).toEqual({
      'a-0': 'queued',
      'a-1': 'deferred',
      'a-2': 'deferred',
      'a-3': 'deferred',
      'a-4': 'queued',
    });
  });

  it("keeps an owner's order when Redis lost its jobs: one accepted before the keeper puts them back goes after them", async () => {
    const { queue, fair } = newQueue();
    const { keeper, submit, outcomes } = await doorAndKeeper(queue, fair);
    await submit('a-0');
    await submit('a-1');
    // Redis lost everything (restarted empty): the queue and the fair-share tags beside it.
    await queue.obliterate({ force: true });
    await (await queue.getBackend().client).del(`fair-test:fair-share:${queue.name}`);
    // As on a reconnect, or a producer's add that did not get through: the next check puts them back.
    keeper.sweepLater();
    await submit('a-2');
    await keeper.check();
    await keeper.close();

    expect(await serve(queue, 3)).toEqual(['a-0', 'a-1', 'a-2']);
    expect(outcomes['a-2']).toBe('deferred');
  });
});

describe('a daemon behind a rate-limited profile', () => {
  const A_BACKLOG = 200;

  /** Submission order: the requests by their Slurm job id (the simulator gives them in order). */
  async function bySubmission(td: TestDaemon, ids: readonly string[]) {
    const rows = await Promise.all(ids.map((id) => getRequest(td.daemon.history.store, id)));
    return rows
      .filter((row) => row?.jobId != null)
      .map((row) => ({ id: row?.id as string, jobId: row?.jobId as number }))
      .sort((x, y) => x.jobId - y.jobId);
  }

  let td: TestDaemon;
  let sim: Awaited<ReturnType<typeof env.sim>>;
  beforeAll(async () => {
    sim = await env.sim({ cpus: 1 });
  });

  it("submits owner B's one request before owner A's backlog drains, A's in order, one job each, across a Redis lost", async () => {
    td = await startTestDaemon(
      sim.url,
      env.redis.url,
      { submitConcurrency: 1, apiRateLimitPerMin: 100_000 },
      // The profile's budget plays the proxy's bucket: 10 requests a second, polls included.
      { rateLimit: { capacity: 1, refillPerSecond: 10 } },
    );
    env.defer(() => td.stop());
    const api = apiClient(td);
    const tokenA = await api.token(['submit', 'read'], 'lab-a', 'lab-a');
    const tokenB = await api.token(['submit', 'read'], 'lab-b', 'lab-b');
    const post = async (token: string, name: string) => {
      const r = await api.call('POST', '/api/v1/jobs', { token, body: { spec: shellSpec(name, 'true') } });
      expect(r.status, JSON.stringify(r.json)).toBe(201);
      return (r.json as { id: string }).id;
    };
    // In order, one after the other: A's order is the order of these calls. The submit queue is
    // paused meanwhile, so that A's backlog is there when B asks however slow the posts are (on a
    // loaded machine they were slower than the submissions, and A's backlog drained as it was made).
    const submitQueue = td.daemon.queues.submit;
    await submitQueue.pause();
    const aIds: string[] = [];
    for (let i = 0; i < A_BACKLOG; i++) aIds.push(await post(tokenA, `a-${i}`));
    const aBefore = (await bySubmission(td, aIds)).length;
    // At most the one job the worker had taken before the pause.
    expect(aBefore, 'A had a backlog when B asked').toBeLessThanOrEqual(1);
    const bId = await post(tokenB, 'b-0');
    // Its job in the queue before the worker goes on: on a loaded machine an add past the
    // door's wait is left to the keeper (src/queue/submit-queue.ts), and A's jobs went on
    // being submitted until its next check put B's in (rank 5 on CI), which says nothing of
    // the order the queue serves.
    await waitFor(async () => ((await submitQueue.getJob(bId)) ? true : undefined), {
      what: "B's submit job in the queue",
      timeoutMs: 30_000,
    });
    await submitQueue.resume();
    await td.waitForState(bId, 'submitted', 30_000);
    const order = await bySubmission(td, [...aIds, bId]);
    const bRank = order.findIndex((row) => row.id === bId);
    // Served after the job being submitted and the one at the head of its round, not after A's backlog.
    expect(bRank).toBeLessThanOrEqual(aBefore + 3);
    expect(order.length, "A's backlog had not drained").toBeLessThan(A_BACKLOG);

    // Redis lost everything (jobs and fair-share tags): the rest is queued again from the history.
    await env.redis.restartEmpty();
    await waitFor(async () => (await bySubmission(td, aIds)).length === A_BACKLOG || undefined, {
      what: "A's backlog submitted",
      // 200 submissions at 10 a second, after the relay finds them: minutes on a crowded machine.
      timeoutMs: 150_000,
      intervalMs: 250,
    });
    const aOrder = (await bySubmission(td, aIds)).map((row) => row.id);
    expect(aOrder).toEqual(aIds);
    // One job each: as many jobs in the simulator as requests, each request's its own.
    const jobs = sim.server.cluster.listJobs();
    expect(jobs).toHaveLength(A_BACKLOG + 1);
    const all = await bySubmission(td, [...aIds, bId]);
    expect(new Set(all.map((row) => row.jobId)).size).toBe(A_BACKLOG + 1);
  }, 240_000);
});
