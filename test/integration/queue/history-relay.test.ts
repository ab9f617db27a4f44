import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { HistoryRelay } from '../../../src/queue/history-relay.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';

/**
 * The one history → queue relay the submit, notify and summarize queues share: a pending row's
 * job that failed settles the row (or is given another go), a missing or completed one is made
 * anew, a live one is left alone, and a row seen live is not looked up again before `recheckMs`.
 */

let redis: TestRedis;
let queue: Queue;
const queues: Queue[] = [];
const connection = () => ({ url: redis.url });
const prefix = `relay-${process.pid}`;

beforeAll(async () => {
  redis = await startTestRedis();
});

// Each test its own queue: a worker of one takes no job another left waiting.
beforeEach((context) => {
  queue = new Queue(context.task.id, { connection: connection(), prefix });
  queues.push(queue);
});

afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()));
  await redis?.stop();
});

/** Runs one job of the queue to its end (completed or failed for good) with `process`. */
async function runOne(id: string, process: () => Promise<unknown>): Promise<void> {
  await queue.add('work', {}, { jobId: id, attempts: 1 });
  const worker = new Worker(queue.name, process, { connection: connection(), prefix, autorun: false });
  const ended = new Promise<void>((resolve) => {
    worker.on('completed', () => resolve());
    worker.on('failed', () => resolve());
  });
  void worker.run();
  await ended;
  await worker.close();
}

it('re-adds a missing or completed job, settles a failed one, and leaves a waiting one', async () => {
  await runOne('done', async () => 'ok');
  await runOne('gave-up', async () => {
    throw new UnrecoverableError('receiver said no');
  });
  await queue.add('work', {}, { jobId: 'waiting' });
  const settled: string[] = [];
  const added: string[] = [];
  const before: string[] = [];
  const relay = new HistoryRelay<string>({
    queue,
    pending: async () => ['missing', 'done', 'gave-up', 'waiting'],
    idOf: (id) => id,
    async failed(id, job: Job) {
      settled.push(`${id}: ${job.failedReason}`);
      return false;
    },
    async beforeAdd(id) {
      before.push(id);
    },
    add: async (id) => {
      added.push(id);
      return queue.add('work', {}, { jobId: id });
    },
  });
  expect(await relay.run()).toEqual({ queued: 2, deferred: 0 });
  expect(settled).toEqual(['gave-up: receiver said no']);
  expect(before).toEqual(['missing', 'done']);
  expect(added).toEqual(['missing', 'done']);
  // The completed job made way for a new one under the same id.
  expect(await (await queue.getJob('done'))?.getState()).toBe('waiting');
  expect(await (await queue.getJob('missing'))?.getState()).toBe('waiting');
});

it('gives a failed job another go when the queue says so, and holds the rows it is told to', async () => {
  await runOne('retry-me', async () => {
    throw new Error('upstream down');
  });
  const relay = new HistoryRelay<string>({
    queue,
    pending: async () => ['retry-me', 'busy', 'recent'],
    idOf: (id) => id,
    hold: (id) => (id === 'busy' ? 'skip' : id === 'recent' ? 'defer' : null),
    async failed(_id, job) {
      await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
      return true;
    },
    add: (id) => queue.add('work', {}, { jobId: id }),
  });
  expect(await relay.run()).toEqual({ queued: 1, deferred: 1 });
  expect(await (await queue.getJob('retry-me'))?.getState()).toBe('waiting');
  expect(await queue.getJob('busy')).toBeUndefined();
  expect(await queue.getJob('recent')).toBeUndefined();
});

it('looks a row seen live up again only after recheckMs', async () => {
  await queue.add('work', {}, { jobId: 'live' });
  let adds = 0;
  const relay = new HistoryRelay<string>({
    queue,
    pending: async () => ['live'],
    idOf: (id) => id,
    failed: async () => false,
    add: async (id) => {
      adds++;
      return queue.add('work', {}, { jobId: id });
    },
    recheckMs: 60_000,
  });
  // The clock is the relay's argument: no waiting.
  expect(await relay.run(1_000)).toEqual({ queued: 0, deferred: 0 });
  await (await queue.getJob('live'))?.remove();
  // Within recheckMs of the last look: not looked up, so the missing job is not seen yet.
  expect(await relay.run(30_000)).toEqual({ queued: 0, deferred: 0 });
  expect(adds).toBe(0);
  // Past it: looked up, found missing, made anew.
  expect(await relay.run(61_001)).toEqual({ queued: 1, deferred: 0 });
  expect(adds).toBe(1);
});
