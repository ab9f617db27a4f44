import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type HistoryDatabase, openDatabase } from '../../../src/db/database.js';
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
function endedWithoutExitCode(policy: AttemptPolicy, attempt = 1) {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-late-exit-'));
  const history = openDatabase(join(dir, 'history.sqlite'));
  opened.push({ history, dir });
  const { db } = history;
  const at = Date.now();
  recordRequest(db, {
    ...{ id: 'r', profile: 'lab', name: 'job', spec: { name: 'job' }, origin: 'api', at, source: 'api' },
    attempt,
    retryPolicy: policy,
  });
  transition(db, 'r', { to: 'submitted', source: 'submit', at, patch: { jobId: 100 } });
  // What the light state listing says of a job that has left the controller while accounting lags.
  transition(db, 'r', { to: 'failed', source: 'poll', at, rawState: 'FAILED' });
  return db;
}

/** Accounting's record of job 100, a moment later: FAILED with `exitCode`. */
function accountingSays(db: ReturnType<typeof endedWithoutExitCode>, exitCode: number): void {
  const row = getRequest(db, 'r');
  if (!row) throw new Error('no request r');
  const now = Math.floor(Date.now() / 1000);
  applyJob(
    db,
    row,
    { state: 'FAILED', state_flags: ['FAILED'], exit_code: exitCode, end_time: now },
    'accounting',
    FRESH,
  );
}

describe('an end recorded before its exit code was known', () => {
  const policy: AttemptPolicy = { on: ['failed'], exitCodes: [75], limit: 2 };

  it('is retried once accounting gives an exit code the policy lists', () => {
    const db = endedWithoutExitCode(policy);
    expect(getRequest(db, 'r')?.retryDueAt).toBeNull();
    accountingSays(db, 75);
    const row = getRequest(db, 'r');
    expect(row?.exitCode).toBe(75);
    expect(row?.retryDueAt).not.toBeNull();
  });

  it('is not retried for an exit code the policy does not list', () => {
    const db = endedWithoutExitCode(policy);
    accountingSays(db, 3);
    expect(getRequest(db, 'r')).toMatchObject({ exitCode: 3, retryDueAt: null, retryNote: null });
  });

  it("says the policy's limit is reached, on the attempt past it", () => {
    const db = endedWithoutExitCode(policy, 3);
    accountingSays(db, 75);
    expect(getRequest(db, 'r')).toMatchObject({
      exitCode: 75,
      retryDueAt: null,
      retryNote: "FAILED on attempt 3: the policy's limit of 2 retries is reached",
    });
  });
});
