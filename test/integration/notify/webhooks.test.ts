import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { getRequest } from '../../../src/db/requests.js';
import { deliveriesOfRequest } from '../../../src/db/webhooks.js';
import type { WebhookPayload } from '../../../src/notify/events.js';
import { verifySignature } from '../../../src/notify/signature.js';
import { startTestDaemon, type TestDaemon, webhookSecretOf } from '../../helpers/daemon.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.js';
import { FAST, redis, runJob, sim, sleep, spec, webhookFile } from './webhook-files.js';

/** Webhooks end to end: job.finished and its retries (webhooks-restarts.test.ts has restarts). */

webhookFile();

let td: TestDaemon | undefined;
let receiver: WebhookReceiver | undefined;

afterEach(async () => {
  await td?.stop();
  await receiver?.stop();
  td = undefined;
  receiver = undefined;
});

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

    const row = await getRequest(td.daemon.history.store, requestId);
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

    // Signed with the secret made at first start, readable only by its owner (or the one given,
    // which a history on PostgreSQL wants).
    if (!td.daemon.config.webhookSecret) {
      const secretFile = join(td.dataDir, 'webhook-secret');
      expect(statSync(secretFile).mode & 0o777).toBe(0o600);
      expect(readFileSync(secretFile, 'utf8').trim()).toMatch(/^[0-9a-f]{64}$/);
    }
    const secret = webhookSecretOf(td);
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
    const id = await td.daemon.submit({ spec: spec(), owner: 'default', actor: 'test', origin: 'api' });
    await td.waitForState(id, 'completed');
    expect(await deliveriesOfRequest(td.daemon.history.store, id)).toEqual([]);
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
    const secret = webhookSecretOf(td);
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
    // Port 1: privileged, nobody listens there. A port found free and closed again was taken by
    // another test's server before the daemon's attempts, when the suite ran crowded.
    const port = 1;
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
