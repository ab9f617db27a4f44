import { readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/db/database.js';
import { getRequest } from '../../../src/db/requests.js';
import type { WebhookDeliveryRow } from '../../../src/db/schema.js';
import { addDelivery, deliveriesOfRequest, getDelivery } from '../../../src/db/webhooks.js';
import { jobFinishedBody, type WebhookPayload } from '../../../src/notify/events.js';
import { verifySignature } from '../../../src/notify/signature.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.js';

let redis: TestRedis;
let sim: TestSim;
let td: TestDaemon | undefined;
let receiver: WebhookReceiver | undefined;

beforeAll(async () => {
  redis = await startTestRedis();
  sim = await startSim();
});

afterAll(async () => {
  await sim.stop();
  await redis.stop();
});

afterEach(async () => {
  await td?.stop();
  await receiver?.stop();
  td = undefined;
  receiver = undefined;
});

/** Fast webhook settings: a tick every 200 ms, short backoff and few attempts. */
const FAST = { notifyEveryMs: 200, notifyBackoffMs: 100, notifyAttempts: 3, notifyTimeoutMs: 2000 };

function spec(overrides: Record<string, unknown> = {}) {
  return jobSpecSchema.parse({
    name: 'webhook-test',
    script: '#!/bin/sh\necho "token is $SECRET_TOKEN"\n',
    current_working_directory: sim.workDir,
    environment: ['SECRET_TOKEN=hunter2'],
    ...overrides,
  });
}

/** Submits a job that ends at once, with a webhook, and waits for its delivery to settle. */
async function runJob(d: TestDaemon, webhookUrl: string, state: WebhookDeliveryRow['state'] = 'delivered') {
  const requestId = await d.daemon.submit({ spec: spec(), origin: 'api', webhookUrl });
  await d.waitForState(requestId, 'completed');
  const delivery = await waitForDelivery(d, requestId, state);
  return { requestId, delivery };
}

function waitForDelivery(d: TestDaemon, requestId: string, state: WebhookDeliveryRow['state'], timeoutMs = 15_000) {
  return waitFor(
    async () => {
      const row = deliveriesOfRequest(d.daemon.history.db, requestId)[0];
      return row?.state === state ? row : undefined;
    },
    { what: `the delivery of ${requestId} to be ${state}`, timeoutMs, intervalMs: 50 },
  );
}

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('job.finished', () => {
  it('a completed job delivers one signed job.finished with its outcome', async () => {
    receiver = await startWebhookReceiver();
    td = await startTestDaemon(sim.url, redis.url, FAST);
    const { requestId, delivery } = await runJob(td, `${receiver.url}/hooks/lab?source=schedflow`);

    await sleep(500); // nothing more arrives
    expect(receiver.calls).toHaveLength(1);
    const call = receiver.calls[0];
    if (!call) throw new Error('no call');
    expect(call.method).toBe('POST');
    expect(call.path).toBe('/hooks/lab?source=schedflow');
    expect(call.headers['content-type']).toBe('application/json');
    expect(call.headers['user-agent']).toMatch(/^schedflow\/\d+\.\d+\.\d+/);
    expect(call.headers['schedflow-event']).toBe('job.finished');
    expect(call.headers['schedflow-delivery']).toBe(delivery.id);

    const row = getRequest(td.daemon.history.db, requestId);
    if (!row) throw new Error('no request');
    const payload = JSON.parse(call.body) as WebhookPayload<'job.finished'>;
    expect(payload).toEqual({
      event: 'job.finished',
      id: delivery.id,
      occurred_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      request: {
        id: requestId,
        name: 'webhook-test',
        profile: 'test',
        state: 'completed',
        job_id: row.jobId,
        exit_code: 0,
        signal: row.signal,
        reason: row.reason,
        raw_state: row.rawState,
        submitted_at: new Date(row.submittedAt ?? 0).toISOString(),
        started_at: new Date(row.startedAt ?? 0).toISOString(),
        ended_at: new Date(row.endedAt ?? 0).toISOString(),
        run_id: null,
        step: null,
        attempt: 1,
        first_attempt_id: null,
        retry: null,
      },
    });
    expect(delivery).toMatchObject({ event: 'job.finished', attempts: 1, lastStatus: 200, lastError: null });
    expect(delivery.deliveredAt).toEqual(expect.any(Number));

    // Signed with the secret made at first start, readable only by its owner.
    const secretFile = join(td.dataDir, 'webhook-secret');
    expect(statSync(secretFile).mode & 0o777).toBe(0o600);
    const secret = readFileSync(secretFile, 'utf8').trim();
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    const header = call.headers['schedflow-signature'];
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifySignature(call.body, header, secret)).toBe(true);
    expect(verifySignature(call.body, header, 'another-secret')).toBe(false);
    expect(verifySignature(call.body.replace('"completed"', '"failed"'), header, secret)).toBe(false);
    expect(verifySignature(call.body, header, secret, { now: Date.now() + 10 * 60_000 })).toBe(false);
  });

  it('carries no environment value, script or spec of the job', async () => {
    receiver = await startWebhookReceiver();
    td = await startTestDaemon(sim.url, redis.url, FAST);
    await runJob(td, `${receiver.url}/hook`);
    const [call] = await receiver.waitForCalls(1);
    expect(call?.body).not.toContain('hunter2');
    expect(call?.body).not.toContain('SECRET_TOKEN');
    expect(call?.body).not.toContain('#!/bin/sh');
    expect(JSON.stringify(call?.headers)).not.toContain('hunter2');
  });

  it('a request without a webhook records no delivery', async () => {
    td = await startTestDaemon(sim.url, redis.url, FAST);
    const id = await td.daemon.submit({ spec: spec(), origin: 'api' });
    await td.waitForState(id, 'completed');
    expect(deliveriesOfRequest(td.daemon.history.db, id)).toEqual([]);
  });
});

describe('retries', () => {
  it('a receiver answering 500 twice gets the delivery on the third attempt', async () => {
    receiver = await startWebhookReceiver();
    receiver.answer(500, 500);
    td = await startTestDaemon(sim.url, redis.url, { ...FAST, notifyAttempts: 5 });
    const { delivery } = await runJob(td, `${receiver.url}/hook`);
    expect(delivery).toMatchObject({ state: 'delivered', attempts: 3, lastStatus: 200, lastError: null });
    expect(receiver.calls.map((c) => c.status)).toEqual([500, 500, 200]);
    // The same delivery, the same body, each attempt freshly signed.
    const secret = readFileSync(join(td.dataDir, 'webhook-secret'), 'utf8').trim();
    for (const call of receiver.calls) {
      expect(call.headers['schedflow-delivery']).toBe(delivery.id);
      expect(call.body).toBe(receiver.calls[0]?.body);
      expect(verifySignature(call.body, call.headers['schedflow-signature'], secret)).toBe(true);
    }
  });

  it('a 400 fails the delivery at once, with the status', async () => {
    receiver = await startWebhookReceiver();
    receiver.answer({ status: 400, body: 'unknown hook' });
    td = await startTestDaemon(sim.url, redis.url, FAST);
    const { delivery } = await runJob(td, `${receiver.url}/hook`, 'failed');
    expect(delivery).toMatchObject({ state: 'failed', attempts: 1, lastStatus: 400, deliveredAt: null });
    expect(delivery.lastError).toContain('HTTP 400: unknown hook');
    await sleep(800);
    expect(receiver.calls).toHaveLength(1);
  });

  it('a redirect is not followed and fails the delivery', async () => {
    receiver = await startWebhookReceiver();
    receiver.answer({ status: 302, headers: { location: 'http://127.0.0.1:1/elsewhere' } });
    td = await startTestDaemon(sim.url, redis.url, FAST);
    const { delivery } = await runJob(td, `${receiver.url}/hook`, 'failed');
    expect(delivery).toMatchObject({ attempts: 1, lastStatus: 302 });
    expect(delivery.lastError).toContain('redirects are not followed');
  });

  it('an unreachable receiver is retried, then failed with the error', async () => {
    const port = await closedPort();
    td = await startTestDaemon(sim.url, redis.url, FAST);
    const { delivery } = await runJob(td, `http://127.0.0.1:${port}/hooks/secret-path`, 'failed');
    expect(delivery).toMatchObject({ state: 'failed', attempts: 3, lastStatus: null });
    expect(delivery.lastError).toContain('ECONNREFUSED');
    expect(delivery.lastError).toContain(`http://127.0.0.1:${port}`);
    expect(delivery.lastError).not.toContain('secret-path');
  });

  it('a 429 is retried no sooner than its Retry-After', async () => {
    receiver = await startWebhookReceiver();
    receiver.answer({ status: 429, headers: { 'retry-after': '1' } });
    td = await startTestDaemon(sim.url, redis.url, FAST);
    const { delivery } = await runJob(td, `${receiver.url}/hook`);
    expect(delivery).toMatchObject({ attempts: 2, lastStatus: 200 });
    const [first, second] = receiver.calls;
    expect((second?.at ?? 0) - (first?.at ?? 0)).toBeGreaterThanOrEqual(950);
  });

  it('a receiver slower than the time limit is retried', async () => {
    receiver = await startWebhookReceiver();
    receiver.answer({ status: 200, delayMs: 1500 });
    td = await startTestDaemon(sim.url, redis.url, { ...FAST, notifyTimeoutMs: 300 });
    const { delivery } = await runJob(td, `${receiver.url}/hook`);
    expect(delivery).toMatchObject({ attempts: 2, lastStatus: 200 });
    expect(receiver.calls).toHaveLength(2);
  });
});

describe('restarts', () => {
  it('an attempt cut short by shutdown is handed back and delivered after the restart', async () => {
    receiver = await startWebhookReceiver();
    receiver.answer({ status: 200, delayMs: 10_000 });
    td = await startTestDaemon(sim.url, redis.url, { ...FAST, notifyTimeoutMs: 8000, shutdownGraceMs: 300 });
    const requestId = await td.daemon.submit({ spec: spec(), origin: 'api', webhookUrl: `${receiver.url}/slow` });
    await td.waitForState(requestId, 'completed');
    await receiver.waitForCalls(1);
    await td.restart();
    const delivery = await waitForDelivery(td, requestId, 'delivered');
    // Two POSTs, the first interrupted; the queue attempt it had was not spent.
    expect(receiver.calls).toHaveLength(2);
    expect(delivery).toMatchObject({ attempts: 2, lastStatus: 200, lastError: null });
    const job = await td.daemon.queues.notify.getJob(delivery.id);
    expect({ started: job?.attemptsStarted, made: job?.attemptsMade }).toEqual({ started: 2, made: 1 });
  });

  it('a delivery pending across a daemon restart is delivered once', async () => {
    receiver = await startWebhookReceiver();
    // The first attempt is told to come back in 3 s: the retry falls after the restart.
    receiver.answer({ status: 503, headers: { 'retry-after': '3' } });
    const d = await startTestDaemon(sim.url, redis.url, FAST);
    td = d;
    const url = receiver.url;
    const requestId = await d.daemon.submit({ spec: spec(), origin: 'api', webhookUrl: `${url}/first` });
    await d.waitForState(requestId, 'completed');
    const first = await waitFor(
      async () => {
        const row = deliveriesOfRequest(d.daemon.history.db, requestId)[0];
        return row?.attempts === 1 ? row : undefined;
      },
      { what: 'the first attempt', intervalMs: 50 },
    );
    expect(first.state).toBe('pending');

    let second = '';
    let restartedAt = 0;
    const historyFile = d.daemon.history.file;
    await d.restart(async () => {
      // A delivery written to the outbox just before the daemon went down, never queued.
      const history = openDatabase(historyFile);
      try {
        const row = getRequest(history.db, requestId);
        if (!row) throw new Error('no request');
        second = addDelivery(history.db, {
          event: 'job.finished',
          url: `${url}/second`,
          requestId,
          payload: jobFinishedBody(row),
        });
      } finally {
        history.close();
      }
      restartedAt = Date.now();
    });

    const db = d.daemon.history.db;
    await waitFor(async () => (getDelivery(db, first.id)?.state === 'delivered' ? true : undefined), {
      what: 'the first delivery',
      intervalMs: 50,
    });
    await waitFor(async () => (getDelivery(db, second)?.state === 'delivered' ? true : undefined), {
      what: 'the second delivery',
      intervalMs: 50,
    });
    await sleep(1000); // no duplicate follows
    const delivered = receiver.calls.filter((c) => c.status === 200);
    expect(delivered.map((c) => c.headers['schedflow-delivery']).sort()).toEqual([first.id, second].sort());
    expect(delivered.every((c) => c.at >= restartedAt)).toBe(true);
    expect(receiver.calls.map((c) => c.path).sort()).toEqual(['/first', '/first', '/second']);
    expect(getDelivery(db, first.id)).toMatchObject({ attempts: 2, lastStatus: 200 });
    expect(getDelivery(db, second)).toMatchObject({ attempts: 1, lastStatus: 200 });
  });
});
