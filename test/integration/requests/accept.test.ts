import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type HistoryDatabase, openDatabase } from '../../../src/db/database.js';
import { getRequest, transitionsOf } from '../../../src/db/requests.js';
import { type AcceptDeps, accept, acceptSubmission, recordRequest } from '../../../src/requests/accept.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';

/** The one way a request is accepted: recorded (accepted and queued, one commit), then its submit job added. */

let redis: TestRedis;
let dir: string;
let history: HistoryDatabase;
let queue: Queue;
let reachable = true;
let sweeps = 0;
let deps: AcceptDeps;
const spec = jobSpecSchema.parse({ name: 'n', script: '#!/bin/sh\ntrue\n' });

beforeAll(async () => {
  redis = await startTestRedis();
  dir = mkdtempSync(join(tmpdir(), 'schedflow-accept-'));
  history = openDatabase(join(dir, 'history.sqlite'));
  queue = new Queue('submit', { connection: { url: redis.url }, prefix: `accept-${process.pid}` });
  deps = {
    store: history.store,
    submitQueue: {
      queue,
      logger: pino({ level: 'silent' }),
      redisReachable: () => reachable,
      sweepLater: () => {
        sweeps++;
      },
    },
  };
});

afterAll(async () => {
  await queue?.close();
  history?.close();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const sources = async (id: string) =>
  (await transitionsOf(history.store, id)).map((t) => [t.fromState, t.toState, t.source]);

it('records accepted and queued, then adds the submit job under the request id', async () => {
  const id = await acceptSubmission(
    { ...deps, profiles: new Map([['default', {}]]), defaultProfile: 'default' },
    { owner: 'default', actor: 'test', origin: 'api', spec, summarize: true },
  );
  expect(await getRequest(history.store, id)).toMatchObject({ state: 'queued', profile: 'default', summarize: true });
  expect(await sources(id)).toEqual([
    [null, 'accepted', 'api'],
    ['accepted', 'queued', 'api'],
  ]);
  expect(await queue.getJob(id)).toMatchObject({ id, data: { requestId: id } });
});

it('refuses a profile the daemon does not have, recording nothing', async () => {
  await expect(
    acceptSubmission(
      { ...deps, profiles: new Map([['default', {}]]), defaultProfile: 'default' },
      { owner: 'default', actor: 'test', origin: 'api', spec, profile: 'other', requestId: 'refused' },
    ),
  ).rejects.toThrow('no scheduler profile "other"');
  expect(await getRequest(history.store, 'refused')).toBeUndefined();
});

it('the same id again records nothing more and keeps the one job', async () => {
  const input = {
    id: 'twice',
    profile: 'default',
    name: 'n',
    spec,
    owner: 'default',
    actor: 'test',
    origin: 'api' as const,
    at: Date.now(),
    source: 'api' as const,
  };
  await accept(deps, input);
  await accept(deps, input);
  expect(await sources('twice')).toHaveLength(2);
  expect(await queue.getJobCountByTypes('waiting')).toBeGreaterThanOrEqual(1);
  expect((await queue.getJobs(['waiting'])).filter((j) => j.id === 'twice')).toHaveLength(1);
});

it('requests accepted together share a commit and an add, each answered once recorded; one that fails fails alone', async () => {
  const at = Date.now();
  const input = (id: string, extra: object = {}) => ({
    id,
    profile: 'default',
    name: 'n',
    spec: { ...spec, ...extra },
    owner: 'default',
    actor: 'test',
    origin: 'api' as const,
    at,
    source: 'api' as const,
  });
  const ids = ['together-1', 'together-2', 'together-3'];
  const outcomes = await Promise.allSettled([
    ...ids.map(async (id) => {
      const outcome = await accept(deps, input(id));
      // Answered only once committed: a reader of the history file sees it.
      expect((await getRequest(history.store, id))?.state).toBe('queued');
      return outcome;
    }),
    // An array expression that does not parse: its recording throws, in its own savepoint.
    accept(deps, input('together-bad', { array: 'not-an-array' })),
  ]);
  expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected']);
  expect(outcomes.slice(0, 3).map((o) => (o as PromiseFulfilledResult<string>).value)).toEqual([
    'queued',
    'queued',
    'queued',
  ]);
  expect(await getRequest(history.store, 'together-bad')).toBeUndefined();
  for (const id of ids) {
    expect(await sources(id)).toEqual([
      [null, 'accepted', 'api'],
      ['accepted', 'queued', 'api'],
    ]);
    expect(await queue.getJob(id)).toBeDefined();
  }
  expect(await queue.getJob('together-bad')).toBeUndefined();
});

it('with Redis known unreachable: answers at once, the request kept queued for the keeper', async () => {
  reachable = false;
  try {
    const before = sweeps;
    const input = {
      id: 'outage',
      profile: 'default',
      name: 'n',
      spec,
      owner: 'default',
      actor: 'test',
      origin: 'api' as const,
      at: Date.now(),
      source: 'api' as const,
    };
    await expect(accept(deps, input)).resolves.toBe('deferred');
    expect((await getRequest(history.store, 'outage'))?.state).toBe('queued');
    expect(sweeps).toBe(before + 1);
    expect(await queue.getJob('outage')).toBeUndefined();
  } finally {
    reachable = true;
  }
});

it('queued by another than who accepted it (the CLI, queued by the submit worker), or left accepted', async () => {
  const at = Date.now();
  const base = { profile: 'default', name: 'n', spec, at };
  await recordRequest(history.store, {
    ...base,
    id: 'cli',
    owner: 'default',
    actor: 'test',
    origin: 'cli',
    source: 'cli',
    queued: { source: 'submit', at },
  });
  expect(await sources('cli')).toEqual([
    [null, 'accepted', 'cli'],
    ['accepted', 'queued', 'submit'],
  ]);
  await recordRequest(history.store, {
    ...base,
    id: 'step',
    owner: 'default',
    actor: 'test',
    origin: 'pipeline',
    source: 'pipeline',
    queued: null,
  });
  expect((await getRequest(history.store, 'step'))?.state).toBe('accepted');
  // Recorded again (a retried job): an `accepted` left behind is queued, nothing else changes.
  await recordRequest(history.store, {
    ...base,
    id: 'step',
    owner: 'default',
    actor: 'test',
    origin: 'pipeline',
    source: 'pipeline',
  });
  expect(await sources('step')).toEqual([
    [null, 'accepted', 'pipeline'],
    ['accepted', 'queued', 'pipeline'],
  ]);
});
