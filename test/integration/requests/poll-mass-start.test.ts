import { describe, expect, it } from 'vitest';
import { getRequest } from '../../../src/db/requests.js';
import { expectEveryRequestNamesItsJobs, massPollEnv, seeded, sleep } from './poll-mass-env.js';

/**
 * Issue 14 at a mass start: 2,000 jobs that start together are written in batches. It bounds
 * how long the event loop is held, so it runs alone (vitest.config.ts).
 */

const env = massPollEnv();

describe('a mass start', () => {
  it('2,000 jobs starting together are written in batches: the event loop is never held for long', async () => {
    const jobs = seeded(2000, 1000, { state: 'PENDING' });
    const { store, requestOf } = await env.setUp(jobs, { minJobAgeSec: 3600, simulatedRuntimeSec: 600 }, () => 10_000);
    // The longest the event loop went without running a 5 ms timer.
    let longestGapMs = 0;
    let last = performance.now();
    const ticker = setInterval(() => {
      const now = performance.now();
      longestGapMs = Math.max(longestGapMs, now - last);
      last = now;
    }, 5);
    const cycles = await env.pollUntil(
      store,
      async () => (await getRequest(store, requestOf.get(1000) as string))?.state === 'running',
      3,
    );
    // A turn of the loop after the cycle, so a block at its very end is measured too.
    await sleep(50);
    clearInterval(ticker);

    for (const id of requestOf.values()) expect((await getRequest(store, id))?.state).toBe('running');
    expectEveryRequestNamesItsJobs(cycles);
    // One transaction for the 2,000 rows held it for 0.7 to 1 s; a batch of 100 takes ~40 ms
    // (the simulator, in this process too, adds its own turns).
    expect(longestGapMs).toBeLessThan(400);
  }, 60_000);
});
