import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { getRequest, transitionsOf } from '../../../src/db/requests.js';
import { ManualClock } from '../../../src/lib/clock.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';
import { spec } from './daemon-files.js';

let redis: TestRedis;
let sim: TestSim | undefined;
let td: TestDaemon | undefined;

beforeAll(async () => {
  redis = await startTestRedis();
});

afterAll(async () => {
  await redis.stop();
});

afterEach(async () => {
  await td?.stop();
  await sim?.stop();
  td = undefined;
  sim = undefined;
});

/** The daemon's clock is passed in (src/main.ts startDaemon): a test moves it instead of waiting. */
describe('a daemon on a moved clock', () => {
  it('records its transitions at the clock’s time, and polls again only when the clock has moved', async () => {
    // An hour behind the real time: a moment no transition could have by accident.
    const clock = new ManualClock(Date.now() - 3_600_000);
    const startedAt = clock.now();
    sim = await startSim();
    td = await startTestDaemon(sim.url, redis.url, {}, {}, {}, {}, clock);
    const id = await td.daemon.submit({
      spec: spec(sim, { script: '#!/bin/sh\nexit 0\n' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(id, 'submitted');
    const upToSubmitted = await transitionsOf(td.daemon.history.store, id);
    expect(upToSubmitted.map((t) => [t.toState, t.at])).toEqual([
      ['accepted', startedAt],
      ['queued', startedAt],
      ['submitting', startedAt],
      ['submitted', startedAt],
    ]);
    // The job ends at once on the simulator, but a poll is due only once the interval has passed
    // on the daemon's clock: three poll floors of real time go by without one, then the clock is
    // moved a second at a time until the request has ended.
    const store = td.daemon.history.store;
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect((await getRequest(store, id))?.state).toBe('submitted');
    for (let moves = 0; (await getRequest(store, id))?.state !== 'completed'; moves++) {
      expect(moves).toBeLessThan(100);
      await clock.advance(1_000);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const completed = (await transitionsOf(store, id)).find((t) => t.toState === 'completed');
    expect(completed?.at).toBeGreaterThan(startedAt);
    expect(completed?.at).toBeLessThanOrEqual(clock.now());
  });
});
