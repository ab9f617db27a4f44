import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterEach, expect, it } from 'vitest';
import { getProfileSync, history } from '../../../src/db/accounting.js';
import { openDatabase } from '../../../src/db/database.js';
import type { History } from '../../../src/db/history.js';
import { createRequest, getRequest } from '../../../src/db/requests.js';
import { createLogger } from '../../../src/logger.js';
import { KnownRecords, RECONCILE_SLICE_SEC, reconcileProfile } from '../../../src/requests/reconciler.js';
import { transition } from '../../../src/requests/transition.js';
import type { SchedClient } from '../../../src/sched/client.js';
import { type FlakyProxy, startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { waitFor } from '../../helpers/http.js';
import { connectAsAlice, savedSimJob, startSim, type TestSim } from '../../helpers/sim.js';

const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });

let sim: TestSim | undefined;
let proxy: FlakyProxy | undefined;
let client: SchedClient | undefined;
let cleanup: (() => void) | undefined;

/** A client of profile `test` (account lab) at `url`, and a history file of its own; both undone after the test. */
async function connectWithHistory(url: string) {
  const connected = await connectAsAlice(url, logger);
  client = connected;
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-reconcile-'));
  const historyDb = openDatabase(join(dir, 'history.sqlite'));
  cleanup = () => {
    historyDb.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { store: historyDb.store, client: connected };
}

/** The stored accounting copy of `jobId` made to differ from its record: RUNNING (and `extra`). */
async function storedAsRunning(store: History, jobId: number, extra: { endTime?: null } = {}): Promise<void> {
  const t = store.t.accountingJobs;
  await store.run(
    store.db
      .update(t)
      .set({ state: 'RUNNING', ...extra })
      .where(eq(t.jobId, jobId)),
  );
}

afterEach(async () => {
  await client?.close();
  await proxy?.close();
  await sim?.stop();
  cleanup?.();
  client = proxy = sim = cleanup = undefined;
});

it('the first import of a long window goes in slices of four hours, written in batches; the sync point follows', async () => {
  const nowSec = Math.floor(Date.now() / 1000);
  // 1,500 records of the account that ended over the last ten hours, 10 of them schedflow's.
  const jobs = Array.from({ length: 1500 }, (_, i) => {
    const endTime = nowSec - 36_000 + i * 24;
    return savedSimJob(1000 + i, {
      state: 'COMPLETED',
      comment: i < 10 ? `schedflow:req-${i}` : '',
      submitTime: endTime - 120,
      eligibleTime: endTime - 120,
      startTime: endTime - 60,
      endTime,
      exitCode: 0,
      nodes: 'sim-node1',
    });
  });
  sim = await startSim({ minJobAgeSec: 60 }, false, jobs);
  proxy = await startFlakyProxy(sim.url);
  const { store, client } = await connectWithHistory(proxy.url);
  const createdAt = (nowSec - 37_000) * 1000;
  for (let i = 0; i < 10; i++) {
    const id = `req-${i}`;
    await createRequest(store, {
      id,
      profile: 'test',
      name: 'seeded',
      spec: {},
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at: createdAt,
      source: 'api',
    });
    await transition(store, id, {
      to: 'submitted',
      source: 'submit',
      at: createdAt,
      patch: { jobId: 1000 + i, submittedAt: createdAt },
    });
  }

  let longestGapMs = 0;
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    longestGapMs = Math.max(longestGapMs, now - last);
    last = now;
  }, 5);
  const before = proxy.requests.length;
  const report = await reconcileProfile(
    { store, client, logger, settings: { initialLookbackSec: 12 * 3600, overlapSec: 600 } },
    'test',
  );
  await new Promise((resolve) => setTimeout(resolve, 50));
  clearInterval(ticker);

  const asked = proxy.requests.slice(before).map((req) => new URL(req.url, 'http://x').searchParams);
  // 12 h and the 10 min overlap: four slices, none longer than four hours.
  expect(asked).toHaveLength(4);
  for (const query of asked) {
    const span = Number(query.get('end_time')) - Number(query.get('start_time'));
    expect(span).toBeGreaterThan(0);
    expect(span).toBeLessThanOrEqual(RECONCILE_SLICE_SEC);
  }
  expect(await history(store, { profile: 'test', limit: 5000 })).toHaveLength(1500);
  expect(report.linked).toBeGreaterThanOrEqual(10);
  for (let i = 0; i < 10; i++) {
    expect(await getRequest(store, `req-${i}`)).toMatchObject({ state: 'completed', exitCode: 0 });
  }
  expect((await getProfileSync(store, 'test'))?.accountingSyncedTo).toBeGreaterThanOrEqual(nowSec);
  expect(longestGapMs).toBeLessThan(400);

  // The next run meets the same records again (its window overlaps the last): none has changed,
  // so none is written. One whose stored copy differs (as a job that ended since would) is.
  await storedAsRunning(store, 2499, { endTime: null });
  const again = await reconcileProfile(
    { store, client, logger, settings: { initialLookbackSec: 12 * 3600, overlapSec: 600 } },
    'test',
  );
  expect(again.imported).toBe(1);
  expect((await history(store, { profile: 'test', limit: 1 }))[0]).toMatchObject({
    jobId: 2499,
    accountingState: 'COMPLETED',
  });
  const third = await reconcileProfile(
    { store, client, logger, settings: { initialLookbackSec: 12 * 3600, overlapSec: 600 } },
    'test',
  );
  expect(third.imported).toBe(0);
}, 60_000);

it('a record that comes again byte for byte after a run stored it is left unread; a new or changed one is read', async () => {
  const nowSec = Math.floor(Date.now() / 1000);
  const jobs = Array.from({ length: 200 }, (_, i) =>
    savedSimJob(5000 + i, {
      state: 'COMPLETED',
      submitTime: nowSec - 600 + i,
      eligibleTime: nowSec - 600 + i,
      startTime: nowSec - 500 + i,
      endTime: nowSec - 400 + i,
      exitCode: 0,
      nodes: 'sim-node1',
    }),
  );
  sim = await startSim({ minJobAgeSec: 60 }, false, jobs);
  const { store, client } = await connectWithHistory(sim.url);
  const known = new KnownRecords();
  const run = (withKnown: boolean) =>
    reconcileProfile(
      {
        store,
        client,
        logger,
        settings: { initialLookbackSec: 3600, overlapSec: 600 },
        ...(withKnown && { known }),
      },
      'test',
    );
  // The first run of a process reads every record.
  expect((await run(true)).imported).toBe(200);
  // A stored copy that differs from its record: read again, it would be written again. The record
  // comes again as it was, so it is not read; a job new to accounting is.
  await storedAsRunning(store, 5007);
  const submitted = await client.submit({ name: 'new', script: '#!/bin/sh\ntrue\n' }, 'new-request');
  await waitFor(
    async () => {
      const { data } = await client.listAccountingJobs({ startTime: nowSec - 600, accounts: ['lab'] });
      return data.some((job) => job.job_id === submitted.job_id) || undefined;
    },
    { what: 'accounting to hold the new job', timeoutMs: 20_000 },
  );
  const second = await run(true);
  expect(second.imported).toBe(1);
  const stored = await history(store, { profile: 'test', limit: 500 });
  expect(stored.find((row) => row.jobId === submitted.job_id)).toBeDefined();
  expect(stored.find((row) => row.jobId === 5007)).toMatchObject({ accountingState: 'RUNNING' });
  // Without what the last run stored, every record is read and compared.
  const unaided = await run(false);
  expect(stored.length).toBe(201);
  expect(unaided.imported).toBeGreaterThanOrEqual(1);
  expect((await history(store, { profile: 'test', limit: 500 })).find((row) => row.jobId === 5007)).toMatchObject({
    accountingState: 'COMPLETED',
  });
}, 60_000);
