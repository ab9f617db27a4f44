import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getRequest } from '../../../src/db/requests.js';
import type { RecordedRequest } from '../../helpers/flaky-proxy.js';
import { waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startWaitingDaemon } from './pending-why-daemon.js';

/**
 * Why a job waits costs less while it says the same (src/requests/pending-details.ts): a file of
 * its own beside pending-why.test.ts, since it waits out the spacing growing to its bound.
 */

let redis: TestRedis;

beforeAll(async () => {
  redis = await startTestRedis();
}, 60_000);

afterAll(async () => {
  await redis?.stop();
});

describe('what it costs', () => {
  it('a job whose reason and forecast stay the same is read half as often each time', async () => {
    const { proxy, daemon, submit, stop } = await startWaitingDaemon(redis.url);
    try {
      await daemon.waitForState(await submit('blocker', '#!/bin/sh\nsleep 300\n'), 'running');
      const waiter = await submit('waiter', '#!/bin/sh\ntrue\n');
      const jobId = (await daemon.waitForState(waiter, 'pending')).jobId;
      // Behind the blocker, its reason (Resources) and forecast (the blocker's time limit) stay
      // the same: read at 1 s, then 2, 4 and 8 s apart, and 8 s from then on.
      const isRead = (r: RecordedRequest) => r.method === 'GET' && new RegExp(`/job/${jobId}(\\?|$)`).test(r.url);
      const gapsOf = (at: number[]) => at.slice(1).map((t, i) => t - (at[i] as number));
      // Poll cycles come every 2 s here (the cache lifetime): a read waits for the first cycle
      // past its spacing. Without the backoff every gap would be one cycle, and this would time out.
      const gaps = await waitFor(
        async () => {
          const g = gapsOf(proxy.requests.filter(isRead).map((r) => r.atMs));
          const capped = g.findIndex((gap) => gap >= 7_500);
          return capped >= 0 && g.length > capped + 1 ? g.slice(capped) : undefined;
        },
        { what: 'a read 8 s after the one before, and one more', timeoutMs: 90_000 },
      );
      // Then not back to every interval while nothing changes (the bound of 8 intervals is the
      // unit test's: here a loaded suite's slow cycles could stretch any gap).
      expect(gaps[1]).toBeGreaterThanOrEqual(7_500);
      const row = await getRequest(daemon.daemon.history.store, waiter);
      expect(row?.state).toBe('pending');
      expect(row?.reason).toBe('Resources');
    } finally {
      await stop();
    }
  }, 120_000);
});
