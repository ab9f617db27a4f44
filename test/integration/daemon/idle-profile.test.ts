import { afterEach, describe, expect, it } from 'vitest';
import { getProfileSync } from '../../../src/db/accounting.js';
import { apiClient } from '../../helpers/api.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { http, waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * A daemon with nothing to track: its profile is still checked (a controller ping per ceiling
 * interval, here 1.5 s), so an idle daemon is not reported overdue, while a scheduler that is
 * down shows as down. Seen through /metrics and the profile's sync record.
 */

const CEILING_MS = 1500;

let redis: TestRedis | undefined;
let sim: TestSim | undefined;
let td: TestDaemon | undefined;

afterEach(async () => {
  await td?.stop();
  await sim?.stop();
  await redis?.stop();
  td = undefined;
  sim = undefined;
  redis = undefined;
});

async function start(): Promise<{ td: TestDaemon; sim: TestSim }> {
  redis = await startTestRedis();
  sim = await startSim();
  // Quick retries: a check of a scheduler that is down fails after them.
  const retries = { attempts: 4, baseDelayMs: 50, maxDelayMs: 200 };
  td = await startTestDaemon(sim.url, redis.url, { pollCeilingMs: CEILING_MS }, { retries });
  return { td, sim };
}

/** The profile's poll samples of /metrics. */
async function pollMetrics(
  daemon: TestDaemon,
): Promise<{ sinceOkSec: number | undefined; lastOk: number | undefined }> {
  const r = await apiClient(daemon).call('GET', '/metrics');
  const value = (name: string) => {
    const line = r.text.split('\n').find((l) => l.startsWith(`${name}{profile="test"} `));
    return line === undefined ? undefined : Number(line.split(' ')[1]);
  };
  return {
    sinceOkSec: value('schedflow_profile_seconds_since_successful_poll'),
    lastOk: value('schedflow_profile_last_poll_ok'),
  };
}

describe('a profile with nothing to track', () => {
  it('is checked once per ceiling interval: its last successful poll stays recent, never overdue', async () => {
    const { td } = await start();
    const store = td.daemon.history.store;
    const first = await waitFor(async () => (await getProfileSync(store, 'test'))?.lastPollAt ?? undefined, {
      what: 'the first check of the idle profile',
    });
    expect(await getProfileSync(store, 'test')).toMatchObject({
      lastPollOk: true,
      lastPollStale: false,
      lastPollError: null,
    });
    // Past several ceilings, the check was made again, and the metric never grew past about one.
    await waitFor(
      async () =>
        ((await getProfileSync(store, 'test'))?.lastPollAt ?? 0) >= first + 2 * CEILING_MS ? true : undefined,
      { what: 'the checks of two more ceilings' },
    );
    expect((await getProfileSync(store, 'test'))?.lastPollAt).toBeGreaterThan(first);
    const metrics = await pollMetrics(td);
    expect(metrics.lastOk).toBe(1);
    expect(metrics.sinceOkSec).toBeLessThan((CEILING_MS + 1000) / 1000);
  }, 20_000);

  it('whose scheduler is down: the check fails and says so (last_poll_ok 0, the metric grows)', async () => {
    const { td, sim } = await start();
    const store = td.daemon.history.store;
    await waitFor(async () => ((await getProfileSync(store, 'test'))?.lastPollOk ? true : undefined), {
      what: 'a successful check',
    });
    // A scrape sees the success (the metric counts from the last success a scrape saw).
    expect((await pollMetrics(td)).lastOk).toBe(1);
    // The simulator stops answering at all (its cached answers go with it).
    await sim.stop();
    const failed = await waitFor(
      async () => {
        const sync = await getProfileSync(store, 'test');
        return sync?.lastPollOk === false ? sync : undefined;
      },
      { what: 'a failed check', timeoutMs: 20_000 },
    );
    expect(failed.lastPollError).toBeTruthy();
    const metrics = await pollMetrics(td);
    expect(metrics.lastOk).toBe(0);
    // Each scrape sees no success now: the metric grows from the last one seen.
    const grown = await waitFor(
      async () => {
        const since = (await pollMetrics(td)).sinceOkSec;
        return since !== undefined && since > CEILING_MS / 1000 ? since : undefined;
      },
      { what: 'the time since a successful check to pass a ceiling' },
    );
    expect(grown).toBeGreaterThan(CEILING_MS / 1000);
  }, 40_000);

  it('whose controller is down while the proxy serves its cached answer: the poll is recorded as stale, not ok', async () => {
    const { td, sim } = await start();
    const store = td.daemon.history.store;
    await waitFor(async () => ((await getProfileSync(store, 'test'))?.lastPollOk ? true : undefined), {
      what: 'a successful check',
    });
    const down = await http(`${sim.url}/_sim/upstream`, {
      headers: sim.admin,
      method: 'PUT',
      body: { slurmctld: 'down' },
    });
    expect(down.status).toBe(200);
    const stale = await waitFor(
      async () => {
        const sync = await getProfileSync(store, 'test');
        return sync?.lastPollStale ? sync : undefined;
      },
      { what: 'a stale check', timeoutMs: 15_000 },
    );
    expect(stale.lastPollOk).toBe(false);
    expect(stale.lastPollError).toMatch(/serving stale answers/);
  }, 30_000);
});
