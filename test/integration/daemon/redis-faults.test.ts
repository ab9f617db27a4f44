import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { reserveKey } from '../../../src/db/idempotency.js';
import { getRequest, listRequests, transitionsOf } from '../../../src/db/requests.js';
import { findToken } from '../../../src/db/tokens.js';
import { canonicalJson } from '../../../src/http/api/idempotency.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { apiClient, shellSpec } from '../../helpers/api.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { http, waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * Redis faults under a running daemon (issue 13): Redis restarted without its data,
 * Redis down or frozen while requests come in, a POST cut off by a restart. Each test
 * has its own Redis, as they stop, freeze and empty it.
 */

/**
 * The bound on an answer given while Redis is frozen or down: it stays so until after the answer,
 * so a call that waited for it would not answer at all. Wider than the door's own 500 ms wait by
 * what a loaded machine adds (over a second has been seen).
 */
const FAST_ANSWER_MS = 5_000;

let redis: TestRedis | undefined;
let sim: TestSim | undefined;
let td: TestDaemon | undefined;

afterEach(async () => {
  redis?.resume();
  await td?.stop();
  await sim?.stop();
  await redis?.stop();
  td = undefined;
  sim = undefined;
  redis = undefined;
});

async function setUp(pipelineFiles: Record<string, string> = {}) {
  redis = await startTestRedis();
  sim = await startSim();
  td = await startTestDaemon(sim.url, redis.url, {}, {}, pipelineFiles);
  return { redis, sim, td };
}

function spec(s: TestSim, overrides: Record<string, unknown> = {}) {
  return jobSpecSchema.parse({
    name: 'redis-faults',
    script: '#!/bin/sh\ntrue\n',
    current_working_directory: s.workDir,
    ...overrides,
  });
}

async function setUpstream(s: TestSim, state: Record<string, 'up' | 'down'>) {
  const res = await http(`${s.url}/_sim/upstream`, { headers: s.admin, method: 'PUT', body: state });
  expect(res.status).toBe(200);
}

describe('Redis restarted without its data under a running daemon', () => {
  it('polling resumes, requests not yet submitted are queued again from the history, new work flows; no daemon restart', async () => {
    const { redis, sim, td } = await setUp();
    const running = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nsleep 6\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(running, 'running');
    // Submissions that cannot go through yet: their BullMQ jobs wait in Redis, backing off.
    await setUpstream(sim, { slurmctld: 'down' });
    const waiting = [
      await td.daemon.submit({ spec: spec(sim, { name: 'held-1' }), owner: 'default', actor: 'test', origin: 'api' }),
      await td.daemon.submit({ spec: spec(sim, { name: 'held-2' }), owner: 'default', actor: 'test', origin: 'api' }),
    ];
    for (const id of waiting) await td.waitForState(id, 'submitting');

    await redis.restartEmpty();
    await setUpstream(sim, { slurmctld: 'up' });
    const after = await td.daemon.submit({
      spec: spec(sim, { name: 'after' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });

    for (const id of [running, ...waiting, after]) await td.waitForState(id, 'completed', 30_000);
    // Each made exactly one scheduler job, however often it was queued.
    for (const id of [running, ...waiting, after]) {
      expect((await td.states(id)).filter((s) => s === 'submitted')).toHaveLength(1);
    }
    const schedulers = (await td.daemon.queues.poll.getJobSchedulers()).map((s) => s.key);
    expect(schedulers).toEqual(['poll:test']);
  }, 60_000);
});

describe('a request is recorded as queued before its job exists', () => {
  it('Redis frozen: the submit answers without waiting for it, the request is queued in the history, and goes on once Redis answers', async () => {
    const { redis, sim, td } = await setUp();
    redis.pause();
    const started = Date.now();
    const id = await td.daemon.submit({ spec: spec(sim), owner: 'default', actor: 'test', origin: 'api' });
    // Redis stays frozen until after the answer, so any bound tells an answer from a wait for it;
    // the door's own wait is 500 ms, and a loaded machine adds to it.
    expect(Date.now() - started).toBeLessThan(FAST_ANSWER_MS);
    // No job can exist yet (Redis answers nothing), and the history already says queued.
    expect((await getRequest(td.daemon.history.store, id))?.state).toBe('queued');
    redis.resume();
    await td.waitForState(id, 'completed');
    expect((await td.states(id)).slice(0, 4)).toEqual(['accepted', 'queued', 'submitting', 'submitted']);
  }, 30_000);

  it('every request of a burst has its queued transition, before submitting', async () => {
    const { sim, td } = await setUp();
    const ids = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        td.daemon.submit({ spec: spec(sim, { name: `burst-${i}` }), owner: 'default', actor: 'test', origin: 'api' }),
      ),
    );
    for (const id of ids) await td.waitForState(id, 'completed');
    for (const id of ids) expect((await td.states(id)).slice(0, 3)).toEqual(['accepted', 'queued', 'submitting']);
  }, 60_000);
});

describe('the local API while Redis is down', () => {
  const PIPELINE = ['steps:', '  only:', '    script: |', '      #!/bin/sh', '      true'].join('\n');

  it('POST /api/v1/jobs and a pipeline run answer without waiting for Redis; what they accepted runs once Redis is back', async () => {
    const { redis, sim, td } = await setUp({ 'quick.yaml': PIPELINE });
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    await redis.kill();
    // The daemon has seen the outage (the queues' reconnects fail) or not yet: both answer fast.
    const timed = async <T>(call: () => Promise<T>) => {
      const started = Date.now();
      const result = await call();
      expect(Date.now() - started).toBeLessThan(FAST_ANSWER_MS);
      return result;
    };
    const posted = await timed(() =>
      api.call('POST', '/api/v1/jobs', { token, body: { spec: shellSpec('while-down', 'true', sim.workDir) } }),
    );
    expect(posted.status).toBe(201);
    const id = (posted.json as { id: string; state: string }).id;
    expect(posted.json).toMatchObject({ state: 'queued' });
    const run = await timed(() => api.call('POST', '/api/v1/pipelines/quick/runs', { token, body: {} }));
    expect(run.status).toBe(201);
    expect((await listRequests(td.daemon.history.store)).length).toBe(2);

    await redis.start();
    await td.waitForState(id, 'completed', 30_000);
    const store = td.daemon.history.store;
    const step = (await listRequests(store)).find((r) => r.id !== id);
    await td.waitForState(step?.id as string, 'completed', 30_000);
    for (const r of await listRequests(store)) {
      expect((await transitionsOf(store, r.id)).map((t) => t.toState)).toContain('queued');
    }
  }, 60_000);
});

describe('cancel, pause and resume while Redis is frozen', () => {
  const TICKING = ['schedule:', "  cron: '0 0 1 1 *'", 'steps:', '  only:', '    script: "#!/bin/sh\\ntrue\\n"'].join(
    '\n',
  );

  it('answer from the history without waiting for Redis; the queue catches up once Redis answers', async () => {
    const { redis, sim, td } = await setUp({ 'yearly.yaml': TICKING });
    const api = apiClient(td);
    const admin = await api.token(['admin']);
    const schedulers = async () => (await td.daemon.queues.pipeline.getJobSchedulers()).map((j) => j.key);
    expect(await schedulers()).toContain('pipeline-yearly');

    redis.pause();
    const timed = async <T>(call: () => Promise<T>) => {
      const started = Date.now();
      const result = await call();
      expect(Date.now() - started).toBeLessThan(FAST_ANSWER_MS);
      return result;
    };
    const id = await td.daemon.submit({
      spec: spec(sim, { name: 'cancel-me' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const cancelled = await timed(() => api.call('DELETE', `/api/v1/jobs/${id}`, { token: admin }));
    expect(cancelled.status, cancelled.text).toBe(200);
    expect((await getRequest(td.daemon.history.store, id))?.state).toBe('cancelled');
    const paused = await timed(() => api.call('POST', '/api/v1/pipelines/yearly/pause', { token: admin }));
    expect(paused.status, paused.text).toBe(200);

    redis.resume();
    // The paused schedule's job scheduler goes (the keeper), and the cancelled request is never submitted.
    await waitFor(async () => ((await schedulers()).includes('pipeline-yearly') ? undefined : true), {
      what: 'the paused schedule to leave Redis',
      timeoutMs: 20_000,
    });
    redis.pause();
    const resumed = await timed(() => api.call('POST', '/api/v1/pipelines/yearly/resume', { token: admin }));
    expect(resumed.status, resumed.text).toBe(200);
    redis.resume();
    await waitFor(async () => ((await schedulers()).includes('pipeline-yearly') ? true : undefined), {
      what: 'the resumed schedule back in Redis',
      timeoutMs: 20_000,
    });
    const later = await td.daemon.submit({
      spec: spec(sim, { name: 'after' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(later, 'completed');
    expect(await td.states(id)).toEqual(['accepted', 'queued', 'cancelled']);
    expect((await getRequest(td.daemon.history.store, id))?.jobId).toBeNull();
  }, 60_000);
});

describe('Idempotency-Key of a POST cut off by a restart', () => {
  it('a retry after the restart is answered at once (the request made, or its stored outcome), not 409 for a minute', async () => {
    const { sim, td } = await setUp();
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const body = { spec: shellSpec('cut-off', 'true', sim.workDir) };
    const key = 'cut-off-key';
    const found = await findToken(td.daemon.history.store, token);
    if (found.kind !== 'valid') throw new Error('the test token is not valid');
    await td.restart();
    // What a daemon stopped or killed in the middle of answering leaves: the key reserved by its
    // local API (the same process here, as the test daemon restarts in place; another uuid).
    const reserved = await reserveKey(td.daemon.history.store, {
      tokenId: found.token.id,
      key,
      route: 'POST /api/v1/jobs',
      bodyHash: createHash('sha256').update(canonicalJson(body)).digest('hex'),
      at: Date.now(),
      owner: `${process.pid}:the-local-api-before-the-restart`,
      ownerGone: () => false,
    });
    expect(reserved.kind).toBe('reserved');

    const api2 = apiClient(td);
    const retried = await api2.call('POST', '/api/v1/jobs', { token, body, headers: { 'idempotency-key': key } });
    expect(retried.status).toBe(201);
    const id = (retried.json as { id: string }).id;
    await td.waitForState(id, 'completed');
    const again = await api2.call('POST', '/api/v1/jobs', { token, body, headers: { 'idempotency-key': key } });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect((again.json as { id: string }).id).toBe(id);
  }, 30_000);
});
