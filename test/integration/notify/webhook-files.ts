import { createServer } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import type { WebhookDeliveryRow } from '../../../src/db/schema.js';
import { deliveriesOfRequest } from '../../../src/db/webhooks.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import type { TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/** What the files of webhooks end to end (webhooks*.test.ts) share. */

export let redis: TestRedis;
export let sim: TestSim;

/**
 * Fast webhook settings: a tick every 200 ms, short backoff and few attempts. The timeout is
 * long: a loopback answer past it on a loaded machine would be one more attempt than a test
 * counts (the tests of the timeout set their own).
 */
export const FAST = { notifyEveryMs: 200, notifyBackoffMs: 100, notifyAttempts: 3, notifyTimeoutMs: 15_000 };

export function spec(overrides: Record<string, unknown> = {}) {
  return jobSpecSchema.parse({
    name: 'webhook-test',
    script: '#!/bin/sh\necho "token is $SECRET_TOKEN"\n',
    current_working_directory: sim.workDir,
    environment: ['SECRET_TOKEN=hunter2'],
    ...overrides,
  });
}

/** Submits a job that ends at once, with a webhook, and waits for its delivery to settle. */
export async function runJob(d: TestDaemon, webhookUrl: string, state: WebhookDeliveryRow['state'] = 'delivered') {
  const requestId = await d.daemon.submit({ spec: spec(), owner: 'default', actor: 'test', origin: 'api', webhookUrl });
  await d.waitForState(requestId, 'completed');
  const delivery = await waitForDelivery(d, requestId, state);
  return { requestId, delivery };
}

export function waitForDelivery(
  d: TestDaemon,
  requestId: string,
  state: WebhookDeliveryRow['state'],
  timeoutMs = 15_000,
) {
  return waitFor(
    async () => {
      const row = (await deliveriesOfRequest(d.daemon.history.store, requestId))[0];
      return row?.state === state ? row : undefined;
    },
    { what: `the delivery of ${requestId} to be ${state}`, timeoutMs, intervalMs: 50 },
  );
}

export async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One Redis and one simulator for the file (`redis`, `sim`). */
export function webhookFile(): void {
  beforeAll(async () => {
    redis = await startTestRedis();
    sim = await startSim();
  });
  afterAll(async () => {
    await sim.stop();
    await redis.stop();
  });
}
