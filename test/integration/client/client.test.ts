import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type JobDetail,
  type RetryEvent,
  SchedflowApiError,
  SchedflowClient,
  type SchedflowClientOptions,
  SchedflowNetworkError,
  SchedflowTimeoutError,
  type SubmitJobBody,
} from '../../../src/client/index.js';
import { apiClient, shellSpec } from '../../helpers/api.js';
import { daemonTestEnv, startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { checkedFetch } from '../../helpers/openapi-check.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * The shipped client (`schedflow/client`, src/client/) against a real daemon on the simulator,
 * as a lab service uses it: submit and wait, output, lists across pages, hold, release and
 * cancel, a pipeline run followed to its end, a typo refused as a typed error (never retried),
 * a 429 waited out after its Retry-After, an Idempotency-Key replay, an abort and a timeout.
 */

const PIPELINE = [
  // The service's owner may trigger it and read its runs.
  'allow: [lab-svc]',
  'params:',
  '  greeting: hi',
  'steps:',
  '  first:',
  '    script: |',
  '      #!/bin/sh',
  '      echo ${params.greeting}',
  '  second:',
  '    needs: [first]',
  '    script: |',
  '      #!/bin/sh',
  '      true',
].join('\n');

/** A fetch that counts the requests it sends, by `METHOD path`. */
function countingFetch() {
  const calls: string[] = [];
  const counted: typeof fetch = async (input, init) => {
    calls.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
    return checkedFetch(input, init);
  };
  return { fetch: counted, calls };
}

describe('the client against a daemon', () => {
  let redis: TestRedis;
  let sim: TestSim;
  let td: TestDaemon;
  let token: string;
  let spec: (name: string, body: string) => SubmitJobBody['spec'];
  const client = (options: Partial<SchedflowClientOptions> = {}) =>
    new SchedflowClient({ baseUrl: td.daemon.apiUrl ?? '', token, fetch: checkedFetch, ...options });

  beforeAll(async () => {
    redis = await startTestRedis();
    // One CPU: a job that sleeps keeps the next one pending (hold and release act in Slurm).
    sim = await startSim({ cpus: 1 });
    td = await startTestDaemon(sim.url, redis.url, {}, {}, { 'greet.yaml': PIPELINE });
    token = await apiClient(td).token(['submit', 'read', 'cancel', 'control'], 'service', 'lab-svc');
    spec = (name, body) => shellSpec(name, body, sim.workDir);
  });
  afterAll(async () => {
    await td?.stop();
    await sim?.stop();
    await redis?.stop();
  });

  it('submits a job, follows it until it completes, and reads its output', async () => {
    const sf = client();
    const job = await sf.submitJob({ spec: spec('hello', 'echo hello from the client') });
    expect(job).toMatchObject({ state: 'queued', replayed: false, links: { self: `/api/v1/jobs/${job.id}` } });
    expect(job.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    const seen: string[] = [];
    const ended = await sf.waitForJob(job.id, {
      timeoutMs: 30_000,
      intervalMs: 100,
      onUpdate: (j) => seen.push(j.state),
    });
    expect(ended.state).toBe('completed');
    expect(ended.exit_code).toBe(0);
    expect(seen.at(-1)).toBe('completed');
    const output = await sf.getJobOutput(job.id, { tail: 5 });
    expect(output.text).toBe('hello from the client\n');
    expect(output.stream).toBe('stdout');
  });

  it('answers a repeat with the same Idempotency-Key with the first job, making one', async () => {
    const sf = client();
    const body = { spec: spec('once', 'true') };
    const first = await sf.submitJob(body, { idempotencyKey: 'order-42' });
    const again = await sf.submitJob(body, { idempotencyKey: 'order-42' });
    expect(again).toMatchObject({ id: first.id, replayed: true, idempotencyKey: 'order-42' });
    expect(first.replayed).toBe(false);
    const named = [];
    for await (const job of sf.listJobs()) if (job.name === 'once') named.push(job.id);
    expect(named).toEqual([first.id]);
  });

  it('sends a submission whose answer was lost again with its key: the daemon answers with the job it made', async () => {
    const proxy = await startFlakyProxy(td.daemon.apiUrl ?? '');
    try {
      const retries: RetryEvent[] = [];
      const sf = client({ baseUrl: proxy.url, retry: { baseDelayMs: 50, onRetry: (r) => retries.push(r) } });
      proxy.dropAnswerOnce((req) => req.method === 'POST' && req.url === '/api/v1/jobs');
      const job = await sf.submitJob({ spec: spec('lost-answer', 'true') });
      expect(job.replayed).toBe(true);
      expect(retries).toMatchObject([{ call: 'POST /api/v1/jobs', attempt: 1, status: null }]);
      const sent = proxy.requests.filter((r) => r.method === 'POST');
      expect(sent.map((r) => r.headers['idempotency-key'])).toEqual([job.idempotencyKey, job.idempotencyKey]);
      const named = [];
      for await (const j of sf.listJobs()) if (j.name === 'lost-answer') named.push(j.id);
      expect(named).toEqual([job.id]);

      // Without a key, a lost answer is not sent again: it may have made the job.
      proxy.dropAnswerOnce((req) => req.method === 'POST' && req.url === '/api/v1/jobs');
      const lost = await sf.submitJob({ spec: spec('no-key', 'true') }, { idempotencyKey: null }).catch((e) => e);
      expect(lost).toBeInstanceOf(SchedflowNetworkError);
      expect(lost).toMatchObject({ code: 'SCHEDFLOW_CLIENT_NETWORK', attempts: 1 });
      expect(proxy.requests.filter((r) => r.method === 'POST')).toHaveLength(3);
    } finally {
      await proxy.close();
    }
  });

  it('lists every job across pages, reading the next page only as it is needed', async () => {
    const pagerToken = await apiClient(td).token(['submit', 'read'], 'pager', 'lab-pager');
    const { fetch, calls } = countingFetch();
    const sf = new SchedflowClient({ baseUrl: td.daemon.apiUrl ?? '', token: pagerToken, fetch });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await sf.submitJob({ spec: spec(`page-${i}`, 'true') })).id);
    calls.length = 0;
    const listed: string[] = [];
    for await (const job of sf.listJobs({ limit: 2 })) listed.push(job.id);
    // Newest first, each once, in three pages of 2, 2 and 1.
    expect(listed).toEqual([...ids].reverse());
    expect(calls).toEqual(['GET /api/v1/jobs', 'GET /api/v1/jobs', 'GET /api/v1/jobs']);
    // Filtered by state (a job moves through `submitting`, which a filter of the states it
    // passes would miss): the newest, once it has ended, is the first completed one.
    await sf.waitForJob(ids[4] as string, { timeoutMs: 30_000 });
    calls.length = 0;
    for await (const job of sf.listJobs({ limit: 2, state: ['completed', 'failed'] })) {
      expect(job.id).toBe(ids[4]);
      break;
    }
    expect(calls).toHaveLength(1);
  });

  it('refuses a typo as a typed error naming its field, without retrying it', async () => {
    const { fetch, calls } = countingFetch();
    const retries: RetryEvent[] = [];
    const sf = client({ fetch, retry: { onRetry: (r) => retries.push(r) } });
    const typo = { spec: spec('typo', 'true'), webhok_url: 'https://example.org/' } as unknown as SubmitJobBody;
    const error = await sf.submitJob(typo).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SchedflowApiError);
    expect(error).toMatchObject({
      code: 'SCHEDFLOW_ERR_VALIDATION',
      status: 400,
      retryAfterMs: null,
      fields: [{ in: 'body', path: 'webhok_url', reason: 'unknown field' }],
    });
    expect((error as SchedflowApiError).requestId).toBeTruthy();
    const badState = await (async () => {
      for await (const _ of sf.listJobs({ state: 'runing' })) break;
    })().catch((e: unknown) => e);
    expect(badState).toMatchObject({ code: 'SCHEDFLOW_ERR_VALIDATION', fields: [{ in: 'query', path: 'state' }] });
    const unknown = await sf.getJob('no-such-job').catch((e: unknown) => e);
    expect(unknown).toMatchObject({ code: 'SCHEDFLOW_ERR_NOT_FOUND', status: 404 });
    expect(calls).toEqual(['POST /api/v1/jobs', 'GET /api/v1/jobs', 'GET /api/v1/jobs/no-such-job']);
    expect(retries).toEqual([]);
  });

  it('holds and releases a pending job, stops waiting on an abort or a timeout, and cancels a job', async () => {
    const sf = client();
    const blocker = await sf.submitJob({ spec: spec('blocker', 'sleep 60') });
    await td.waitForState(blocker.id, 'running', 30_000);
    const target = await sf.submitJob({ spec: spec('target', 'echo released') });
    await td.waitForState(target.id, 'pending', 30_000);

    const held = await sf.holdJob(target.id);
    expect(held).toMatchObject({ id: target.id, changed: true, where: 'scheduler', held: { by: 'token:service' } });
    expect((await sf.getJob(target.id)).held).toMatchObject({ by: 'token:service' });

    // The wait stops when its signal aborts (the job goes on), with the signal's reason.
    const controller = new AbortController();
    const aborted = await sf
      .waitForJob(blocker.id, { signal: controller.signal, onUpdate: () => controller.abort() })
      .catch((e: unknown) => e);
    expect(aborted).toBeInstanceOf(DOMException);
    expect((aborted as DOMException).name).toBe('AbortError');
    // And at its timeout, with what it read last.
    const timedOut = await sf.waitForJob(blocker.id, { timeoutMs: 300 }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(SchedflowTimeoutError);
    expect(timedOut).toMatchObject({ code: 'SCHEDFLOW_CLIENT_TIMEOUT', timeoutMs: 300 });
    expect(((timedOut as SchedflowTimeoutError<JobDetail>).last as JobDetail).state).toBe('running');

    const released = await sf.releaseJob(target.id);
    expect(released).toMatchObject({ changed: true, held: null });
    const cancelled = await sf.cancelJob(blocker.id);
    expect(cancelled.state).toBe('running');
    expect((await sf.waitForJob(blocker.id, { timeoutMs: 30_000, intervalMs: 100 })).state).toBe('cancelled');
    expect((await sf.waitForJob(target.id, { timeoutMs: 30_000, intervalMs: 100 })).state).toBe('completed');
    expect((await sf.getJobOutput(target.id)).text).toBe('released\n');
    // An ended job cannot be cancelled: the daemon's conflict, typed, with its state.
    const again = await sf.cancelJob(blocker.id).catch((e: unknown) => e);
    expect(again).toMatchObject({ code: 'SCHEDFLOW_ERR_JOB_ENDED', status: 409, detail: { state: 'cancelled' } });
  });

  it('triggers a pipeline run and follows it until it ends', async () => {
    const sf = client();
    const run = await sf.triggerPipelineRun('greet', { params: { greeting: 'hello' } });
    expect(run).toMatchObject({ pipeline: 'greet', trigger: 'api', replayed: false });
    const states: string[] = [];
    const ended = await sf.waitForRun(run.id, {
      timeoutMs: 30_000,
      intervalMs: 100,
      onUpdate: (r) => states.push(r.state),
    });
    expect(ended.state).toBe('succeeded');
    expect(ended.steps.map((s) => [s.step, s.state])).toEqual([
      ['first', 'completed'],
      ['second', 'completed'],
    ]);
    const first = ended.steps.find((s) => s.step === 'first');
    expect((await sf.getJobOutput(first?.id ?? '')).text).toBe('hello\n');
    const runs = [];
    for await (const r of sf.listRuns({ pipeline: 'greet', limit: 1 })) runs.push(r.id);
    expect(runs).toEqual([run.id]);
    const unknown = await sf.triggerPipelineRun('nope').catch((e: unknown) => e);
    expect(unknown).toMatchObject({ code: 'SCHEDFLOW_ERR_NOT_FOUND', status: 404 });
  });
});

describe('the client and the rate limit', () => {
  const env = daemonTestEnv();

  it('waits out a 429 for its Retry-After and then succeeds; gives it back when longer than it waits', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, { apiRateLimitPerMin: 3 });
    const token = await apiClient(td).token(['read'], 'busy');
    const { fetch, calls } = countingFetch();
    const retries: RetryEvent[] = [];
    const sf = new SchedflowClient({
      baseUrl: td.daemon.apiUrl ?? '',
      token,
      fetch,
      retry: { onRetry: (r) => retries.push(r) },
    });
    for (let i = 0; i < 3; i++) await sf.listPipelines();
    // The window is a minute: it is cut to 5 s in Redis, so the daemon's next 429 asks for at
    // most 5 s (less when the call comes late on a loaded machine), and the client waits that.
    const counts = new Redis(env.redis.url);
    env.defer(async () => {
      counts.disconnect();
    });
    const [key] = await counts.keys(`${td.daemon.config.queuePrefix}:api-rate:*`);
    expect(key).toBeDefined();
    await counts.pexpire(key ?? '', 5000);
    calls.length = 0;
    const started = Date.now();
    await sf.listPipelines();
    const waited = Date.now() - started;
    expect(calls).toEqual(['GET /api/v1/pipelines', 'GET /api/v1/pipelines']);
    expect(retries).toEqual([
      {
        call: 'GET /api/v1/pipelines',
        attempt: 1,
        delayMs: expect.any(Number),
        status: 429,
        retryAfterMs: expect.any(Number),
      },
    ]);
    const [retry] = retries;
    expect(retry?.delayMs).toBe(retry?.retryAfterMs);
    expect(retry?.retryAfterMs).toBeGreaterThanOrEqual(1000);
    expect(retry?.retryAfterMs).toBeLessThanOrEqual(5000);
    expect(waited).toBeGreaterThanOrEqual(retry?.retryAfterMs ?? Number.POSITIVE_INFINITY);

    // A new minute's window, spent: its Retry-After (about a minute) is past what this client
    // waits, so the error comes back at once, saying when to come again.
    await sf.listPipelines();
    await sf.listPipelines();
    calls.length = 0;
    const impatient = new SchedflowClient({
      baseUrl: td.daemon.apiUrl ?? '',
      token,
      fetch,
      retry: { maxDelayMs: 5000 },
    });
    const limited = await impatient.listPipelines().catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(SchedflowApiError);
    expect(limited).toMatchObject({ code: 'SCHEDFLOW_ERR_RATE_LIMITED', status: 429 });
    expect((limited as SchedflowApiError).retryAfterMs).toBeGreaterThan(5000);
    expect(calls).toEqual(['GET /api/v1/pipelines']);
  });
});
