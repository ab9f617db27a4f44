import { afterEach, describe, expect, it } from 'vitest';
import { getRequest } from '../../../src/db/requests.js';
import { addDelivery, deliveriesOfRequest, getDelivery } from '../../../src/db/webhooks.js';
import { jobFinishedBody } from '../../../src/notify/events.js';
import { openHistoryOf, startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.js';
import { FAST, redis, sim, sleep, spec, waitForDelivery, webhookFile } from './webhook-files.js';

/** Webhooks end to end across daemon restarts (webhooks.test.ts has job.finished and retries). */

webhookFile();

let td: TestDaemon | undefined;
let receiver: WebhookReceiver | undefined;

afterEach(async () => {
  await td?.stop();
  await receiver?.stop();
  td = undefined;
  receiver = undefined;
});

describe('restarts', () => {
  it('an attempt cut short by shutdown is handed back and delivered after the restart', async () => {
    receiver = await startWebhookReceiver();
    receiver.answer({ status: 200, delayMs: 10_000 });
    td = await startTestDaemon(sim.url, redis.url, { ...FAST, notifyTimeoutMs: 8000, shutdownGraceMs: 300 });
    const requestId = await td.daemon.submit({
      spec: spec(),
      owner: 'default',
      actor: 'test',
      origin: 'api',
      webhookUrl: `${receiver.url}/slow`,
    });
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
    // The first attempt is told to come back in 8 s: the retry falls after the restart, however
    // slowly a loaded machine stops the daemon.
    receiver.answer({ status: 503, headers: { 'retry-after': '8' } });
    const d = await startTestDaemon(sim.url, redis.url, FAST);
    td = d;
    const url = receiver.url;
    const requestId = await d.daemon.submit({
      spec: spec(),
      owner: 'default',
      actor: 'test',
      origin: 'api',
      webhookUrl: `${url}/first`,
    });
    await d.waitForState(requestId, 'completed');
    const first = await waitFor(
      async () => {
        const row = (await deliveriesOfRequest(d.daemon.history.store, requestId))[0];
        return row?.attempts === 1 ? row : undefined;
      },
      { what: 'the first attempt', intervalMs: 50 },
    );
    expect(first.state).toBe('pending');

    let second = '';
    let restartedAt = 0;
    await d.restart(async () => {
      // A delivery written to the outbox just before the daemon went down, never queued.
      const history = await openHistoryOf(d);
      try {
        const row = await getRequest(history.store, requestId);
        if (!row) throw new Error('no request');
        second = await addDelivery(history.store, {
          event: 'job.finished',
          url: `${url}/second`,
          requestId,
          payload: jobFinishedBody(row),
        });
      } finally {
        await history.close();
      }
      restartedAt = Date.now();
    });

    const store = d.daemon.history.store;
    await waitFor(async () => ((await getDelivery(store, first.id))?.state === 'delivered' ? true : undefined), {
      what: 'the first delivery',
      intervalMs: 50,
    });
    await waitFor(async () => ((await getDelivery(store, second))?.state === 'delivered' ? true : undefined), {
      what: 'the second delivery',
      intervalMs: 50,
    });
    // Real time: a duplicate would come from the restarted daemon's own dispatch; only letting it
    // run shows there is none.
    await sleep(1000);
    const delivered = receiver.calls.filter((c) => c.status === 200);
    expect(delivered.map((c) => c.headers['schedflow-delivery']).sort()).toEqual([first.id, second].sort());
    expect(delivered.every((c) => c.at >= restartedAt)).toBe(true);
    expect(receiver.calls.map((c) => c.path).sort()).toEqual(['/first', '/first', '/second']);
    expect(await getDelivery(store, first.id)).toMatchObject({ attempts: 2, lastStatus: 200 });
    expect(await getDelivery(store, second)).toMatchObject({ attempts: 1, lastStatus: 200 });
  });
});
