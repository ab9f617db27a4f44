import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type HistoryDatabase, openDatabase } from '../../../src/db/database.js';
import type { History } from '../../../src/db/history.js';
import { getRequest } from '../../../src/db/requests.js';
import type { AttemptPolicy } from '../../../src/db/schema.js';
import { recordRequest } from '../../../src/requests/accept.js';
import { applyJob } from '../../../src/requests/poller.js';
import { transition } from '../../../src/requests/transition.js';
import type { Freshness } from '../../../src/sched/freshness.js';

const FRESH: Freshness = {
  fetchedAt: new Date(),
  producedAt: new Date(),
  ageSec: 0,
  maxAgeSec: 2,
  expiresAt: null,
  stale: false,
};

const opened: { history: HistoryDatabase; dir: string }[] = [];
afterEach(() => {
  for (const { history, dir } of opened.splice(0)) {
    history.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A request of attempt `attempt` under `policy`, submitted as job 100 and then ended FAILED with no exit code known. */
async function endedWithoutExitCode(policy: AttemptPolicy, attempt = 1): Promise<History> {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-late-exit-'));
  const history = openDatabase(join(dir, 'history.sqlite'));
  opened.push({ history, dir });
  const { store } = history;
  const at = Date.now();
  await recordRequest(store, {
    ...{
      id: 'r',
      profile: 'lab',
      name: 'job',
      spec: { name: 'job' },
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at,
      source: 'api',
    },
    attempt,
    retryPolicy: policy,
  });
  await transition(store, 'r', { to: 'submitted', source: 'submit', at, patch: { jobId: 100 } });
  // What the light state listing says of a job that has left the controller while accounting lags.
  await transition(store, 'r', { to: 'failed', source: 'poll', at, rawState: 'FAILED' });
  return store;
}

/** Accounting's record of job 100, a moment later: FAILED with `exitCode`. */
async function accountingSays(store: History, exitCode: number): Promise<void> {
  const row = await getRequest(store, 'r');
  if (!row) throw new Error('no request r');
  const now = Math.floor(Date.now() / 1000);
  await applyJob(
    store,
    row,
    { state: 'FAILED', state_flags: ['FAILED'], exit_code: exitCode, end_time: now },
    'accounting',
    FRESH,
  );
}

describe('an end recorded before its exit code was known', () => {
  const policy: AttemptPolicy = { on: ['failed'], exitCodes: [75], limit: 2 };

  it('is retried once accounting gives an exit code the policy lists', async () => {
    const store = await endedWithoutExitCode(policy);
    expect((await getRequest(store, 'r'))?.retryDueAt).toBeNull();
    await accountingSays(store, 75);
    const row = await getRequest(store, 'r');
    expect(row?.exitCode).toBe(75);
    expect(row?.retryDueAt).not.toBeNull();
  });

  it('is not retried for an exit code the policy does not list', async () => {
    const store = await endedWithoutExitCode(policy);
    await accountingSays(store, 3);
    expect(await getRequest(store, 'r')).toMatchObject({ exitCode: 3, retryDueAt: null, retryNote: null });
  });

  it("says the policy's limit is reached, on the attempt past it", async () => {
    const store = await endedWithoutExitCode(policy, 3);
    await accountingSays(store, 75);
    expect(await getRequest(store, 'r')).toMatchObject({
      exitCode: 75,
      retryDueAt: null,
      retryNote: "FAILED on attempt 3: the policy's limit of 2 retries is reached",
    });
  });
});
