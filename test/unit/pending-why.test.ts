import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BACKOFF_MAX, dueForRead, givesWay, type LastRead, nextReads } from '../../src/requests/pending-details.js';
import { codecFor } from '../../src/sched/codecs/codec.js';
import { explainReason, isKnownReason } from '../../src/sched/slurm-reasons.js';
import { StartForecast } from '../../src/sim/start-forecast.js';
import { pendingView } from '../../src/views/pending-view.js';

function record(name: string): unknown {
  const url = new URL(`../fixtures/real-slurm-25.11/${name}`, import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { jobs: unknown[] }).jobs[0];
}

describe("a pending job's forecast, decoded from real Slurm 25.11.7 bodies", () => {
  const codec = codecFor('v0.0.44');

  it('a job waiting for Resources has the end of the job it waits for as its expected start, not as a start reached', () => {
    const job = codec.decodeControllerJob(record('pending_resources_v0.0.44.json'));
    expect(job).toMatchObject({ state: 'PENDING', reason: 'Resources', start_time: null, end_time: null });
    // start_time 1795935963 = the running job's start 1795935843 + its 2-minute limit.
    expect(job.expected_start).toBe(1795935963);
  });

  it('a held job has no forecast (start_time 0)', () => {
    const job = codec.decodeControllerJob(record('pending_held_v0.0.44.json'));
    expect(job).toMatchObject({ state: 'PENDING', reason: 'JobHeldUser', start_time: null, expected_start: null });
  });

  it('a job waiting for its --begin time is expected then', () => {
    const job = codec.decodeControllerJob(record('pending_begintime_v0.0.44.json'));
    expect(job).toMatchObject({ reason: 'BeginTime', start_time: null, expected_start: 1795939426 });
  });

  it('a running job has a start reached and no forecast', () => {
    const url = new URL('../fixtures/real-slurm-25.11/sched_jobs_v0.0.44.json', import.meta.url);
    const jobs = (JSON.parse(readFileSync(url, 'utf8')) as { jobs: unknown[] }).jobs;
    for (const raw of jobs) expect(codec.decodeControllerJob(raw).expected_start).toBeNull();
  });
});

describe('the reason table', () => {
  // Every reason the real cluster gives in the tier's tests, and the common ones of squeue(1)'s
  // JOB REASON CODES.
  const WAITS = [
    'Priority',
    'Resources',
    'Dependency',
    'DependencyNeverSatisfied',
    'JobHeldUser',
    'JobHeldAdmin',
    'BeginTime',
    'PartitionDown',
    'PartitionInactive',
    'PartitionNodeLimit',
    'PartitionTimeLimit',
    'PartitionConfig',
    'ReqNodeNotAvail',
    'Reservation',
    'NodeDown',
    'BadConstraints',
    'InvalidAccount',
    'InvalidQOS',
    'AccountNotAllowed',
    'AccountingPolicy',
    'AssocGrpCpuLimit',
    'AssocGrpMemLimit',
    'AssocGrpJobsLimit',
    'AssocMaxJobsLimit',
    'QOSMaxJobsPerUserLimit',
    'QOSMaxWallDurationPerJobLimit',
    'QOSGrpCpuLimit',
    'JobArrayTaskLimit',
    'Licenses',
  ];

  it('explains every reason a job waits for, with what the user can do', () => {
    for (const code of WAITS) {
      const explained = explainReason(code);
      expect(isKnownReason(code), code).toBe(true);
      expect(explained?.meaning, code).toMatch(/\w/);
      expect(explained?.action, code).toMatch(/\w/);
    }
  });

  it("keeps Slurm's details after a comma, and reads either spelling of a code", () => {
    const node = explainReason('ReqNodeNotAvail, Reserved for maintenance');
    expect(node?.code).toBe('ReqNodeNotAvail, Reserved for maintenance');
    expect(node?.meaning).toContain('reserved');
    expect(explainReason('AssocGrpCPULimit')?.meaning).toBe(explainReason('AssocGrpCpuLimit')?.meaning);
    // A member of a family the table does not list still reads as that family's limit.
    expect(explainReason('AssocGrpGRES')?.meaning).toContain('aggregate limit');
  });

  it("shows an unknown reason as Slurm's word; None is no reason", () => {
    expect(isKnownReason('SomethingNew')).toBe(false);
    expect(explainReason('SomethingNew')).toMatchObject({ code: 'SomethingNew', action: null });
    expect(explainReason('None')).toBeNull();
    expect(explainReason(null)).toBeNull();
  });

  it('the same table explains ends for summaries', () => {
    expect(explainReason('TimeLimit')?.meaning).toContain('time limit ran out');
  });

  it('is shown for pending requests only', () => {
    const pending = pendingView({ state: 'pending', reason: 'Resources', expectedStartAt: 1795935963000 });
    expect(pending).toMatchObject({ reason: 'Resources', expected_start: '2026-11-29T07:06:03.000Z' });
    expect(pending?.action).toMatch(/\w/);
    expect(pendingView({ state: 'running', reason: null, expectedStartAt: null })).toBeNull();
  });
});

describe("the simulator's start forecast", () => {
  it('places a waiting job at the end of the jobs it waits for, and the next behind it', () => {
    // 2 CPUs: a 2-CPU job runs until 1000.
    const forecast = new StartForecast(100, 0, [{ cpus: 2, endSec: 1000 }]);
    expect(forecast.place(1, 60)).toBe(1000);
    // The second 1-CPU job fits beside the first.
    expect(forecast.place(1, 600)).toBe(1000);
    // A 2-CPU job waits for both: the first ends at 1060, the second at 1600.
    expect(forecast.place(2, 60)).toBe(1600);
  });

  it('gives none behind a job without a time limit', () => {
    const forecast = new StartForecast(100, 0, [{ cpus: 2, endSec: null }]);
    expect(forecast.place(1, 60)).toBe(0);
  });
});

describe("the spacing of a pending job's reads", () => {
  const EVERY = 30_000;
  /** Reads one job each time it is due, its record saying the same: the spacings it gets. */
  function spacingsWhileUnchanged(reads: number, noReason = false): number[] {
    const read = new Map<string, LastRead>();
    let now = 0;
    const seen: number[] = [];
    for (let i = 0; i < reads; i++) {
      expect(dueForRead([{ id: 'a' }], read, now)).toHaveLength(1);
      const next = nextReads([{ id: 'a', unchanged: true, noReason }], read, now, EVERY, false).get('a') as LastRead;
      read.set('a', next);
      seen.push(next.everyMs);
      // Not due a moment before its spacing ends.
      expect(dueForRead([{ id: 'a' }], read, now + next.everyMs - 1)).toHaveLength(0);
      now += next.everyMs;
    }
    return seen;
  }

  it('doubles while the record says the same, up to BACKOFF_MAX intervals', () => {
    expect(spacingsWhileUnchanged(6)).toEqual([30_000, 60_000, 120_000, 240_000, 240_000, 240_000]);
    expect(BACKOFF_MAX * EVERY).toBe(240_000);
  });

  it('a job without a reason is read again after 5 s at first, then less often too: never every cycle for good', () => {
    expect(spacingsWhileUnchanged(7, true)).toEqual([5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 240_000]);
  });

  it('starts again at the interval on a change, or when the job was not found', () => {
    const read = new Map<string, LastRead>([
      ['a', { at: 0, everyMs: 240_000 }],
      ['b', { at: 0, everyMs: 240_000 }],
    ]);
    const next = nextReads(
      [
        { id: 'a', unchanged: false, noReason: false },
        { id: 'b', unchanged: false, noReason: false },
      ],
      read,
      240_000,
      EVERY,
      false,
    );
    expect([...next.values()]).toEqual([
      { at: 240_000, everyMs: EVERY },
      { at: 240_000, everyMs: EVERY },
    ]);
  });

  it('a read before it was due keeps the spacing; one listing gives its unchanged jobs one spacing, so they come due together', () => {
    // a: read at 0, due at 120 s; b: read at 50 s, due at 110 s; c: never read.
    const read = new Map<string, LastRead>([
      ['a', { at: 0, everyMs: 120_000 }],
      ['b', { at: 50_000, everyMs: 60_000 }],
    ]);
    const now = 110_000;
    expect(dueForRead([{ id: 'a' }, { id: 'b' }, { id: 'c' }], read, now).map((r) => r.id)).toEqual(['b', 'c']);
    const outcomes = [
      { id: 'a', unchanged: true, noReason: false },
      { id: 'b', unchanged: true, noReason: false },
      { id: 'c', unchanged: false, noReason: false },
    ];
    // Read one by one, a (not due) would keep 120 s and b (due) double to 120 s.
    expect(nextReads(outcomes.slice(0, 2), read, now, EVERY, false).get('a')?.everyMs).toBe(120_000);
    const listed = nextReads(outcomes, read, now, EVERY, true);
    expect(listed.get('a')).toEqual({ at: now, everyMs: 120_000 });
    expect(listed.get('b')).toEqual({ at: now, everyMs: 120_000 });
    // A change, or a first read, starts again at the interval.
    expect(listed.get('c')).toEqual({ at: now, everyMs: EVERY });
  });
});

describe('the pending reads give way to submissions', () => {
  const EVERY = 30_000;
  /** A profile connection as pending details see it: submitting or not, waiting for its budget or not. */
  const client = (state: { submitting: boolean; waiting: boolean }) => ({
    submissionsWaiting: () => state.waiting,
    submittingWithin: () => state.submitting,
  });

  it('a listing waits while submissions flow, single reads do not', () => {
    const c = client({ submitting: true, waiting: false });
    expect(givesWay(c, 3, 0, EVERY)).toBe(false);
    expect(givesWay(c, 4, 0, EVERY)).toBe(true);
  });

  it('any read waits while submissions wait for the budget', () => {
    expect(givesWay(client({ submitting: false, waiting: true }), 1, 0, EVERY)).toBe(true);
  });

  it('for at most BACKOFF_MAX intervals at a time: a stream of submissions does not starve the forecasts', () => {
    const state = { submitting: true, waiting: false };
    const c = client(state);
    expect(givesWay(c, 100, 1_000, EVERY)).toBe(true);
    expect(givesWay(c, 100, 1_000 + EVERY * BACKOFF_MAX - 1, EVERY)).toBe(true);
    expect(givesWay(c, 100, 1_000 + EVERY * BACKOFF_MAX, EVERY)).toBe(false);
    // Then a new wait of as long, from the next cycle that gives way.
    expect(givesWay(c, 100, 2_000 + EVERY * BACKOFF_MAX, EVERY)).toBe(true);
    // Once the submissions have stopped, no waiting, and the next burst starts a wait of its own.
    state.submitting = false;
    expect(givesWay(c, 100, 3_000 + EVERY * BACKOFF_MAX, EVERY)).toBe(false);
    state.submitting = true;
    expect(givesWay(c, 100, 4_000 + EVERY * BACKOFF_MAX * 2, EVERY)).toBe(true);
  });
});
