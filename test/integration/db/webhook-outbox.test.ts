import { describe, expect, it } from 'vitest';
import type { History } from '../../../src/db/history.js';
import {
  deliveriesOfRequest,
  deliveriesOfRun,
  getDelivery,
  markDeliveryFailed,
  pendingDeliveryIds,
  recordAttempt,
} from '../../../src/db/webhooks.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/** The webhook outbox as the notify queue reads and settles it, on SQLite and on PostgreSQL. */

const histories = testHistories();

async function pending(h: History, id: string, createdAt: number, requestId: string | null = 'r1') {
  await h.run(
    h.db.insert(h.t.webhookDeliveries).values({
      id,
      event: 'job.finished',
      url: 'https://receiver.example/hook',
      requestId,
      runId: requestId ? null : 'run-1',
      payload: { event: 'job.finished', id },
      state: 'pending',
      createdAt,
      updatedAt: createdAt,
    }),
  );
}

describe.each(DIALECTS)('the webhook outbox on %s', (dialect) => {
  it('lists pending deliveries oldest first, and settles each once: a late outcome changes nothing', async () => {
    const h = await histories.make(dialect);
    await pending(h, 'b', 2000);
    await pending(h, 'a', 1000);
    await pending(h, 'c', 3000, null);
    expect(await pendingDeliveryIds(h)).toEqual(['a', 'b', 'c']);
    expect(await pendingDeliveryIds(h, 1)).toEqual(['a']);

    expect(await recordAttempt(h, 'a', 'pending', { status: 503, error: 'busy', at: 4000 })).toBe(true);
    expect(await recordAttempt(h, 'a', 'delivered', { status: 200, error: null, at: 5000 })).toBe(true);
    // Another host's worker, late with the same delivery.
    expect(await recordAttempt(h, 'a', 'failed', { status: null, error: 'timeout', at: 6000 })).toBe(false);
    expect(await getDelivery(h, 'a')).toMatchObject({
      state: 'delivered',
      attempts: 2,
      lastStatus: 200,
      deliveredAt: 5000,
    });

    expect(await markDeliveryFailed(h, 'b', 'the queue gave up', 7000)).toBe(true);
    expect(await markDeliveryFailed(h, 'b', 'again', 8000)).toBe(false);
    expect(await getDelivery(h, 'b')).toMatchObject({ state: 'failed', attempts: 0, lastError: 'the queue gave up' });
    expect(await pendingDeliveryIds(h)).toEqual(['c']);
    expect((await deliveriesOfRequest(h, 'r1')).map((d) => d.id)).toEqual(['a', 'b']);
    expect((await deliveriesOfRun(h, 'run-1')).map((d) => d.id)).toEqual(['c']);
    expect(await getDelivery(h, 'nope')).toBeUndefined();
  });
});
