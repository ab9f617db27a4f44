import { describe, expect, it } from 'vitest';
import type { History } from '../../../src/db/history.js';
import { getRequest, transitionsOf } from '../../../src/db/requests.js';
import type { SimJob } from '../../../src/sim/sim-job.js';
import type { FlakyProxy } from '../../helpers/flaky-proxy.js';
import { accountingRequests, massPollEnv, params, pathOf, seeded } from './poll-mass-env.js';

/**
 * An end the controller shows before accounting has it (slurmdbd is seconds behind a mass end)
 * waits for accounting's record, asked again each cycle under a new URL, before the controller's
 * listing of every job is paid for (src/requests/poller.ts, END_PATIENCE_MS).
 */

const env = massPollEnv();
const nowSec = Math.floor(Date.now() / 1000);
const ended: Partial<SimJob> = {
  state: 'COMPLETED',
  startTime: nowSec - 20,
  endTime: nowSec - 10,
  exitCode: 0,
  nodes: 'sim-node1',
};
const listings = (cycles: { requests: { url: string }[] }[]) =>
  cycles.flatMap((c) => c.requests).filter((req) => pathOf(req as never) === '/sched/v0.0.44/jobs');

async function allCompleted(store: History, requestOf: Map<number, string>): Promise<boolean> {
  for (const id of requestOf.values()) if ((await getRequest(store, id))?.state !== 'completed') return false;
  return true;
}

/** Accounting answers as if it had not yet heard of the ends, `times` times (or always). */
function accountingBehind(proxy: FlakyProxy, times = Number.POSITIVE_INFINITY): void {
  let left = times;
  proxy.rewrite = (req, body) => {
    if (pathOf(req) !== '/scheddb/v0.0.44/jobs' || left-- <= 0) return body;
    const answer = JSON.parse(body) as { jobs: { state: { current: string[] }; time: { end: number } }[] };
    for (const job of answer.jobs) {
      job.state.current = ['RUNNING'];
      job.time.end = 0;
    }
    return JSON.stringify(answer);
  };
}

describe('an end accounting has not caught up with', () => {
  it("is recorded from accounting's record a cycle later, asked afresh, with no controller listing", async () => {
    const jobs = seeded(3, 5000, ended);
    const { store, requestOf } = await env.setUp(jobs, { minJobAgeSec: 3600 }, () => 10_000);
    accountingBehind(env.proxy as FlakyProxy, 1);
    const allEnded = () => allCompleted(store, requestOf);
    const cycles = await env.pollUntil(store, allEnded, 4);

    expect(await allEnded()).toBe(true);
    expect(cycles).toHaveLength(2);
    for (const id of requestOf.values()) {
      expect(await getRequest(store, id)).toMatchObject({
        state: 'completed',
        exitCode: 0,
        endedAt: expect.any(Number),
      });
      expect((await transitionsOf(store, id)).at(-1)?.source).toBe('accounting');
    }
    expect(listings(cycles)).toHaveLength(0);
    // The second question is not the first one's URL: a proxy would answer it from its cache.
    const [first, second] = cycles.flatMap(accountingRequests);
    expect(params(first as never, 'end_time')).toEqual([]);
    expect(params(second as never, 'end_time')).toHaveLength(1);
  }, 60_000);

  it('is recorded from the controller once it has waited long enough', async () => {
    const jobs = seeded(2, 6000, ended);
    const { store, requestOf } = await env.setUp(jobs, { minJobAgeSec: 3600 }, () => 10_000);
    accountingBehind(env.proxy as FlakyProxy);
    const allEnded = () => allCompleted(store, requestOf);
    const cycles = await env.pollUntil(store, allEnded, 6, { endPatienceMs: 3000 });

    expect(await allEnded()).toBe(true);
    // Cycles 2.1 s apart: the first two wait, the third (4.2 s after the first) lists.
    expect(cycles).toHaveLength(3);
    expect(cycles.map((c) => listings([c]).length)).toEqual([0, 0, 1]);
    for (const id of requestOf.values()) {
      expect(await getRequest(store, id)).toMatchObject({
        state: 'completed',
        exitCode: 0,
        endedAt: expect.any(Number),
      });
    }
  }, 60_000);
});
