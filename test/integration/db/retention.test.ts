import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { connectionOf, openDatabase } from '../../../src/db/database.js';
import type { History } from '../../../src/db/history.js';
import { historySpace, returnFreePages } from '../../../src/db/history-space.js';
import { usageOfRunSteps } from '../../../src/db/job-usage.js';
import {
  countPrunable,
  PRUNE_SLICE_ROWS,
  pruneHistory,
  type RetentionSettings,
  readPruneRecord,
  recordPrune,
} from '../../../src/db/retention.js';
import { lockedRun, updateRunFrom } from '../../../src/db/runs.js';
import type { JobRequestRow, RequestState } from '../../../src/db/schema.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/**
 * Retention (src/db/retention.ts) on SQLite and PostgreSQL: rows of every kind, old and live,
 * pruned in slices; what must stay stays (live requests, a live run's steps, an attempt chain
 * with a live attempt, pending deliveries), nothing is left orphaned, a pipeline's trend reads
 * the same after the prune, and SQLite gives the freed pages back.
 */

const histories = testHistories();

const DAY = 86_400_000;
const NOW = 400 * DAY;
const OLD = NOW - 200 * DAY;
const RETENTION: RetentionSettings = {
  requestsMs: 90 * DAY,
  summariesMs: 180 * DAY,
  deliveriesMs: 30 * DAY,
  accountingMs: 30 * DAY,
  runsMs: 90 * DAY,
  // nightly's last two ended runs (succeeded or failed) stay, as its trend reads them.
  keepRunsPerPipeline: 2,
  auditMs: 100 * DAY,
};

function request(id: string, state: RequestState, at: number, extra: Partial<JobRequestRow> = {}) {
  return {
    id,
    profile: 'p',
    name: id,
    spec: { script: '#!/bin/bash\ntrue', cpus_per_task: 2, time_limit: 60, environment: ['A=B'] },
    origin: 'api' as const,
    state,
    jobId: null as number | null,
    createdAt: at,
    updatedAt: at,
    startedAt: at + 1000,
    endedAt: state === 'running' ? null : at + 61_000,
    summaryCheckedAt: at + 62_000,
    ...extra,
  };
}

async function fill(h: History): Promise<void> {
  const t = h.t;
  const runs = [
    // Old, ended, but nightly's last two ended runs: kept for its trend, with their usage.
    { id: 'run-kept', state: 'succeeded' as const, createdAt: OLD + DAY },
    { id: 'run-old', state: 'succeeded' as const, createdAt: OLD },
    // Old and ended: gone, with their transitions, misses, deliveries, summary and usage.
    { id: 'run-gone', state: 'failed' as const, createdAt: OLD - 10 * DAY },
    { id: 'run-skipped', state: 'skipped' as const, createdAt: OLD - 5 * DAY },
    // Its one step request goes in the same prune (its usage kept, then removed with the run).
    { id: 'run-gone-step', state: 'cancelled' as const, createdAt: OLD - 2 * DAY },
    // Kept: a step request still there (lost: accounting may resolve it).
    { id: 'run-lost-step', state: 'cancelled' as const, createdAt: OLD - 20 * DAY },
    { id: 'run-live', state: 'running' as const, createdAt: OLD },
  ];
  await h.run(
    h.db.insert(t.pipelineRuns).values(
      runs.map((r) => ({
        ...r,
        pipeline: 'nightly',
        trigger: 'schedule' as const,
        params: {},
        definition: {},
        updatedAt: r.createdAt,
        startedAt: r.createdAt,
        endedAt: r.state === 'running' ? null : r.createdAt + 120_000,
        summaryCheckedAt: r.state === 'running' ? null : r.createdAt + 120_001,
      })),
    ),
  );
  await h.run(
    h.db.insert(t.runTransitions).values(
      runs.flatMap((r) => [
        { runId: r.id, fromState: null, toState: 'queued' as const, at: r.createdAt, source: 'schedule' as const },
        {
          runId: r.id,
          fromState: 'queued' as const,
          toState: r.state,
          at: r.createdAt + 1,
          source: 'pipeline' as const,
        },
      ]),
    ),
  );
  const usage = (requestId: string, runId: string, step: string) => ({
    requestId,
    profile: 'p',
    jobId: null,
    runId,
    step,
    attempt: 1,
    state: 'completed' as const,
    elapsedSec: 60,
    timeLimitMin: 60,
    cpus: 2,
    cpuTimeSec: 100,
    spec: {},
    endedAt: OLD,
    keptAt: OLD + DAY,
  });
  // Usage kept by earlier prunes, whose requests are gone.
  await h.run(
    h.db
      .insert(t.jobUsage)
      .values([
        usage('pruned-g1', 'run-gone', 'align'),
        usage('pruned-g2', 'run-gone', 'call'),
        usage('pruned-k1', 'run-kept', 'align'),
      ]),
  );
  let jobId = 1000;
  const rows = [
    // Old and ended: a single job, more than a slice of them, and a pipeline step of two attempts.
    ...Array.from({ length: PRUNE_SLICE_ROWS + 5 }, (_, i) => request(`old-${i}`, 'completed', OLD + i)),
    request('step-a1', 'failed', OLD, { runId: 'run-old', step: 'align', attempt: 1, nextAttemptId: 'step-a2' }),
    request('step-a2', 'completed', OLD, { runId: 'run-old', step: 'align', attempt: 2, firstAttemptId: 'step-a1' }),
    request('step-b', 'completed', OLD, { runId: 'run-old', step: 'call' }),
    request('step-c', 'completed', OLD, { runId: 'run-gone-step', step: 'align' }),
    request('lost-step', 'lost', OLD, { runId: 'run-lost-step', step: 'align' }),
    // Old but kept: a live request, a live run's ended step, a chain with a live attempt.
    request('live', 'running', OLD),
    request('lost', 'lost', OLD),
    request('live-run-step', 'completed', OLD, { runId: 'run-live', step: 'align' }),
    request('chain-1', 'failed', OLD, { nextAttemptId: 'chain-2' }),
    request('chain-2', 'running', NOW - DAY, { firstAttemptId: 'chain-1' }),
    // Old with a webhook still to deliver.
    request('undelivered', 'completed', OLD),
    // Recent.
    request('new', 'completed', NOW - DAY),
  ].map((r) => ({ ...r, jobId: jobId++ }));
  await h.run(h.db.insert(t.jobRequests).values(rows));
  await h.run(
    h.db.insert(t.jobTransitions).values(
      rows.flatMap((r) => [
        { requestId: r.id, fromState: null, toState: 'queued' as const, at: r.createdAt, source: 'api' as const },
        {
          requestId: r.id,
          fromState: 'queued' as const,
          toState: r.state,
          at: r.createdAt + 1,
          source: 'poll' as const,
        },
      ]),
    ),
  );
  await h.run(
    h.db.insert(t.arrayTasks).values([
      { requestId: 'old-0', taskId: 0, state: 'completed' },
      { requestId: 'live', taskId: 0, state: 'running' },
    ]),
  );
  await h.run(
    h.db
      .insert(t.requestReplays)
      .values([{ requestId: 'old-1', tokenName: 'lims', key: 'k', count: 2, firstAt: OLD, lastAt: OLD }]),
  );
  await h.run(
    h.db.insert(t.deadlineMisses).values([
      { subject: 'request:old-2', requestId: 'old-2', kind: 'max_pending', at: OLD, detail: 'late' },
      { subject: 'run:run-gone', runId: 'run-gone', kind: 'finish_by', at: OLD, detail: 'late' },
    ]),
  );
  const delivery = (
    id: string,
    requestId: string | null,
    state: 'pending' | 'delivered',
    at: number,
    runId: string | null = null,
  ) => ({
    id,
    event: 'job.finished' as const,
    url: 'https://hooks.example/x',
    requestId,
    runId,
    payload: {},
    state,
    createdAt: at,
    deliveredAt: state === 'delivered' ? at : null,
    updatedAt: at,
  });
  await h.run(
    h.db.insert(t.webhookDeliveries).values([
      delivery('d-old', 'old-3', 'delivered', OLD),
      delivery('d-new-request', 'new', 'delivered', NOW - 60 * DAY),
      delivery('d-pending', 'undelivered', 'pending', OLD),
      delivery('d-recent', 'new', 'delivered', NOW - DAY),
      // Within the deliveries' retention, but its run goes.
      delivery('d-run-gone', null, 'delivered', NOW - 20 * DAY, 'run-gone'),
    ]),
  );
  const summary = (id: string, requestId: string | null, runId: string | null, at: number) => ({
    id,
    requestId,
    runId,
    state: 'ready' as const,
    text: 'ok',
    createdAt: at,
    updatedAt: at,
    completedAt: at,
  });
  await h.run(
    h.db.insert(t.summaries).values([
      summary('s-old-request', 'old-4', null, OLD),
      summary('s-run-old', null, 'run-old', OLD),
      summary('s-run-live', null, 'run-live', NOW - 100 * DAY),
      // Within the summaries' retention, but its run goes.
      summary('s-run-gone', null, 'run-gone', NOW - 100 * DAY),
    ]),
  );
  // Accounting: the steps' records (what the trends read), a live request's, an external job's.
  const record = (id: number, requestId: string | null, endSec: number | null) => ({
    profile: 'p',
    jobId: id,
    requestId,
    name: 'j',
    account: 'lab',
    user: 'u',
    partition: 'debug',
    state: 'completed',
    rawState: 'COMPLETED',
    elapsedSec: 3000,
    timeLimitMin: 60,
    cpus: 2,
    cpuTimeSec: 1500,
    startTime: endSec === null ? Math.floor(OLD / 1000) : endSec - 3000,
    endTime: endSec,
    comment: '',
    syncedAt: OLD,
  });
  const jobOf = (id: string) => rows.find((r) => r.id === id)?.jobId as number;
  const oldSec = Math.floor(OLD / 1000) + 3000;
  await h.run(
    h.db
      .insert(t.accountingJobs)
      .values([
        record(jobOf('step-a2'), 'step-a2', oldSec),
        record(jobOf('step-b'), 'step-b', oldSec),
        record(jobOf('step-c'), 'step-c', oldSec),
        record(jobOf('live'), 'live', null),
        record(jobOf('new'), 'new', Math.floor((NOW - 50 * DAY) / 1000)),
        record(99_999, null, oldSec),
        record(99_998, null, Math.floor((NOW - DAY) / 1000)),
      ]),
  );
  await h.run(
    h.db.insert(t.auditLog).values([
      { at: OLD, actor: 'token:lims', action: 'request.accept', outcome: 'ok' as const },
      { at: NOW - DAY, actor: 'token:lims', action: 'request.accept', outcome: 'ok' as const },
    ]),
  );
}

async function ids(h: History, table: 'jobRequests' | 'webhookDeliveries' | 'summaries'): Promise<string[]> {
  const t = h.t[table];
  return (await h.all(h.db.select({ id: t.id }).from(t))).map((r) => r.id).sort();
}

describe.each(DIALECTS)('retention on %s', (dialect) => {
  it('prunes old detail in slices, keeps what is live, leaves no orphans, and the trend reads the same', async () => {
    const h = await histories.make(dialect);
    await fill(h);
    const trendBefore = await usageOfRunSteps(h, 'run-old');
    const keptTrendBefore = await usageOfRunSteps(h, 'run-kept');
    expect(keptTrendBefore).toHaveLength(1);
    expect(trendBefore.map((u) => [u.step, u.requestId, u.elapsedSec, u.cpuTimeSec])).toEqual([
      ['align', 'step-a2', 3000, 1500],
      ['call', 'step-b', 3000, 1500],
    ]);

    const expected = await countPrunable(h, RETENTION, NOW);
    const removed = await pruneHistory(h, RETENTION, NOW);
    expect(removed).toEqual(expected);
    expect(removed).toMatchObject({
      job_requests: PRUNE_SLICE_ROWS + 5 + 4,
      job_transitions: (PRUNE_SLICE_ROWS + 5 + 4) * 2,
      array_tasks: 1,
      request_replays: 1,
      // old-2's with its request, run-gone's with its run.
      deadline_misses: 2,
      // old-3's with its request, d-new-request past the deliveries' 30 days, d-run-gone with its run.
      webhook_deliveries: 3,
      // old-4's with its request, run-old's past 180 days, s-run-gone with its run.
      summaries: 3,
      // The steps' with their requests; the external old one and `new`'s (50 days) past 30 days.
      accounting_jobs: 5,
      // run-gone, run-skipped, and run-gone-step once its step request went.
      pipeline_runs: 3,
      run_transitions: 3 * 2,
      // run-gone's two kept earlier, step-c's kept by this prune before its run went.
      job_usage: 3,
      audit_log: 1,
    });

    expect(await ids(h, 'jobRequests')).toEqual(
      ['chain-1', 'chain-2', 'live', 'live-run-step', 'lost', 'lost-step', 'new', 'undelivered'].sort(),
    );
    expect(await ids(h, 'webhookDeliveries')).toEqual(['d-pending', 'd-recent']);
    expect(await ids(h, 'summaries')).toEqual(['s-run-live']);
    const runIds = (await h.all(h.db.select({ id: h.t.pipelineRuns.id }).from(h.t.pipelineRuns)))
      .map((r) => r.id)
      .sort();
    expect(runIds).toEqual(['run-kept', 'run-live', 'run-lost-step', 'run-old']);
    // No row of a run that is gone.
    const runChildren = [
      ...(await h.all(h.db.select({ id: h.t.runTransitions.runId }).from(h.t.runTransitions))),
      ...(await h.all(h.db.select({ id: h.t.deadlineMisses.runId }).from(h.t.deadlineMisses))),
      ...(await h.all(h.db.select({ id: h.t.summaries.runId }).from(h.t.summaries))),
      ...(await h.all(h.db.select({ id: h.t.jobUsage.runId }).from(h.t.jobUsage))),
    ];
    expect(runChildren.filter((c) => c.id !== null && !runIds.includes(c.id))).toEqual([]);
    expect(await usageOfRunSteps(h, 'run-kept')).toEqual(keptTrendBefore);
    const records = await h.all(h.db.select().from(h.t.accountingJobs));
    expect(records.map((r) => r.requestId).sort()).toEqual(['live', null].sort());
    expect((await h.all(h.db.select().from(h.t.auditLog))).map((r) => r.at)).toEqual([NOW - DAY]);

    // No child without its request.
    const requestIds = new Set(await ids(h, 'jobRequests'));
    const children = [
      ...(await h.all(h.db.select({ id: h.t.jobTransitions.requestId }).from(h.t.jobTransitions))),
      ...(await h.all(h.db.select({ id: h.t.arrayTasks.requestId }).from(h.t.arrayTasks))),
      ...(await h.all(h.db.select({ id: h.t.requestReplays.requestId }).from(h.t.requestReplays))),
      ...(await h.all(h.db.select({ id: h.t.webhookDeliveries.requestId }).from(h.t.webhookDeliveries))),
    ];
    expect(children.filter((c) => c.id !== null && !requestIds.has(c.id))).toEqual([]);

    // The trend of the pruned run reads the kept usage: the same figures.
    expect(await usageOfRunSteps(h, 'run-old')).toEqual(trendBefore);

    // A second prune finds nothing; its record adds up.
    expect(Object.values(await countPrunable(h, RETENTION, NOW)).every((n) => n === 0)).toBe(true);
    await recordPrune(h, NOW, removed, 0);
    await recordPrune(h, NOW + 1, await pruneHistory(h, RETENTION, NOW + 1), 0);
    const record = await readPruneRecord(h);
    expect(record?.totals.job_requests).toBe(PRUNE_SLICE_ROWS + 9);
    expect(record?.totals.pipeline_runs).toBe(3);

    // Kept for the trend alone: without it, nightly's last two ended runs would go (their
    // requests are gone now), not the live one, nor the one with a request left.
    expect((await countPrunable(h, { ...RETENTION, keepRunsPerPipeline: 0 }, NOW)).pipeline_runs).toBe(2);
    expect(record?.last.job_requests).toBe(0);

    // Retention off: nothing is removed.
    const off = {
      requestsMs: 0,
      summariesMs: 0,
      deliveriesMs: 0,
      accountingMs: 0,
      runsMs: 0,
      keepRunsPerPipeline: 0,
      auditMs: 0,
    };
    expect(Object.values(await pruneHistory(h, off, NOW * 10)).every((n) => n === 0)).toBe(true);

    const space = await historySpace(h);
    expect(space.tables.find((t) => t.table === 'job_requests')?.rows).toBe(8);
    // run-old's three steps (this prune), run-kept's one.
    expect(space.tables.find((t) => t.table === 'job_usage')?.rows).toBe(4);
    if (dialect === 'postgres') expect(space.tables.every((t) => (t.bytes ?? 0) > 0)).toBe(true);
  });

  it.runIf(dialect === 'postgres')(
    "reads the sizes of schedflow's schema whatever the connection's search_path",
    async () => {
      const h = await histories.make(dialect);
      await h.run(
        h.db.insert(h.t.auditLog).values({ at: OLD, actor: 'token:lims', action: 'request.accept', outcome: 'ok' }),
      );
      // A role not named schedflow finds its own name, then public, on its search_path: no
      // schedflow there. The history's queries name the schema themselves.
      const other = await histories.again(h, '-c search_path=public');
      const space = await historySpace(other);
      expect(space.tables.find((t) => t.table === 'audit_log')?.rows).toBe(1);
      expect(space.tables.every((t) => (t.bytes ?? 0) > 0)).toBe(true);
    },
  );

  it.runIf(dialect === 'sqlite')(
    'switches an older file to incremental auto_vacuum at open, unless another process of the data dir runs',
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'schedflow-vacuum-'));
      try {
        const file = join(dir, 'history.sqlite');
        const older = new Database(file);
        older.exec('create table t (x)');
        older.close();
        const mode = (opened: { db: unknown; close(): void }) => {
          const value = connectionOf(opened.db as Parameters<typeof connectionOf>[0]).pragma('auto_vacuum', {
            simple: true,
          });
          opened.close();
          return value;
        };
        // No VACUUM under another role: the file stays as it is.
        expect(mode(openDatabase(file, { vacuumAtOpen: false }))).toBe(0);
        expect(mode(openDatabase(file))).toBe(2);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it.runIf(dialect === 'sqlite')('gives the freed pages of the SQLite file back', async () => {
    const h = await histories.make(dialect);
    const space = await historySpace(h);
    expect(space.autoVacuum).toBe('incremental');
    const big = 'x'.repeat(4000);
    await h.transaction(async (tx) => {
      for (let i = 0; i < 500; i++) {
        await tx.run(
          tx.db
            .insert(tx.t.auditLog)
            .values({ at: OLD, actor: 'token:lims', action: 'request.accept', outcome: 'ok', detail: big }),
        );
      }
    });
    const before = await historySpace(h);
    await pruneHistory(h, { ...RETENTION, requestsMs: 0 }, NOW);
    const freed = (await historySpace(h)).freePages ?? 0;
    expect(freed).toBeGreaterThan(400);
    expect(await returnFreePages(h)).toBe(freed);
    const after = await historySpace(h);
    expect(after.freePages).toBe(0);
    expect(after.totalBytes).toBeLessThan(before.totalBytes / 4);
  });
  // PostgreSQL alone: SQLite's transactions are one writer at a time and never await anything but
  // the history, so a prune cannot start inside a resume's.
  it.skipIf(dialect === 'sqlite')(
    'a run resumed while a prune is under way keeps its steps (the prune waits for the run, then sees it active)',
    async () => {
      const h = await histories.make(dialect);
      const other = await histories.again(h);
      const t = h.t;
      await h.run(
        h.db.insert(t.pipelineRuns).values({
          id: 'run-failed',
          pipeline: 'nightly',
          trigger: 'api',
          params: {},
          definition: {},
          state: 'failed',
          createdAt: OLD,
          updatedAt: OLD,
          startedAt: OLD,
          endedAt: OLD + 120_000,
        }),
      );
      await h.run(
        h.db
          .insert(t.jobRequests)
          .values([
            request('kept-a', 'completed', OLD, { runId: 'run-failed', step: 'a', jobId: 1 }),
            request('failed-b', 'failed', OLD, { runId: 'run-failed', step: 'b', jobId: 2 }),
          ]),
      );
      // The resume's transaction (src/pipelines/run-resume.ts): the run locked and moved back to
      // running; the prune, on another connection, starts while it is open.
      let pruning: Promise<unknown> | undefined;
      await h.transaction(async (tx) => {
        await lockedRun(tx, 'run-failed');
        await updateRunFrom(tx, 'run-failed', 'failed', { state: 'running', attempt: 2, updatedAt: NOW });
        pruning = pruneHistory(other, RETENTION, NOW);
        // Real time: the prune must reach its reads while this transaction holds the run.
        await new Promise((r) => setTimeout(r, 300));
      });
      await pruning;
      expect(await ids(h, 'jobRequests')).toEqual(['failed-b', 'kept-a']);
    },
  );
});
