import { describe, expect, it } from 'vitest';
import { jobIdentity, ownRecord } from '../../src/requests/job-identity.js';
import type { SchedJob } from '../../src/sched/job-model.js';

/** Whether a scheduler record is a request's own job: ids come again after a slurmctld crash. */

const request = { id: 'req-1', name: 'align', createdAt: 1_700_000_000_000 };
const createdSec = request.createdAt / 1000;

describe('jobIdentity', () => {
  it('the marker decides wherever a comment is kept', () => {
    const base = { name: 'align', submit_time: createdSec + 5 };
    expect(jobIdentity({ ...base, source: 'controller', comment: 'schedflow:req-1' }, request)).toBe('ours');
    expect(jobIdentity({ ...base, source: 'controller', comment: 'schedflow:req-1 user text' }, request)).toBe('ours');
    expect(jobIdentity({ ...base, source: 'controller', comment: 'schedflow:req-2' }, request)).toBe('other');
    // Every schedflow job carries its marker in the controller: no comment there is another job.
    expect(jobIdentity({ ...base, source: 'controller', comment: '' }, request)).toBe('other');
    expect(jobIdentity({ ...base, source: 'accounting', comment: 'schedflow:req-2' }, request)).toBe('other');
    expect(jobIdentity({ ...base, source: 'accounting', comment: 'schedflow:req-1' }, request)).toBe('ours');
  });

  it('accounting without comments: the name and a submit time not before the request', () => {
    const base = { source: 'accounting' as const, comment: '' };
    expect(jobIdentity({ ...base, name: 'align', submit_time: createdSec + 5 }, request)).toBe('unsure');
    // A requeued job has a later submit time: that says nothing.
    expect(jobIdentity({ ...base, name: 'align', submit_time: createdSec + 86_400 }, request)).toBe('unsure');
    expect(jobIdentity({ ...base, name: 'other-name', submit_time: createdSec + 5 }, request)).toBe('other');
    expect(jobIdentity({ ...base, name: 'align', submit_time: createdSec - 3600 }, request)).toBe('other');
  });
});

describe('ownRecord', () => {
  const submittedAt = request.createdAt + 2000;
  const row = { ...request, submittedAt, jobConfirmedAt: null };
  const record = (name: string, submitSec: number, comment = ''): SchedJob =>
    ({
      job_id: 42,
      name,
      submit_time: submitSec,
      comment,
      source: 'accounting',
      state: 'PENDING',
    }) as unknown as SchedJob;
  const submittedSec = submittedAt / 1000;

  it('takes its own record; with no comment, the one that fits the submission', () => {
    const mine = record('align', submittedSec);
    expect(ownRecord([mine], row)).toEqual({ kind: 'ours', record: mine });
    const marked = record('align', submittedSec + 900, 'schedflow:req-1');
    expect(ownRecord([mine, marked], row)).toEqual({ kind: 'ours', record: marked });
    expect(ownRecord([], row)).toEqual({ kind: 'none' });
  });

  it('its own record beside another job submitted under the id since: suspect, the controller says whose job it has', () => {
    const marked = record('align', submittedSec, 'schedflow:req-1');
    const outside = record('outside-job', submittedSec + 30, 'schedflow:req-2');
    expect(ownRecord([marked, outside], row)).toEqual({ kind: 'suspect', record: marked });
    // The same second is no proof of order: asked too.
    const sameSecond = record('outside-job', submittedSec);
    expect(ownRecord([marked, sameSecond], row)).toEqual({ kind: 'suspect', record: marked });
    // Without comments in accounting (Slurm's default), its record by name and time: the same.
    const byName = record('align', submittedSec);
    expect(ownRecord([byName, outside], row)).toEqual({ kind: 'suspect', record: byName });
    // Another job that had the id before this one (ids come round again): its own record decides.
    const before = record('outside-job', submittedSec - 5, 'schedflow:req-0');
    expect(ownRecord([before, marked], row)).toEqual({ kind: 'ours', record: marked });
    // An ended record is this job's whole life, whatever had the id since.
    const ended = { ...marked, state: 'COMPLETED' } as SchedJob;
    expect(ownRecord([ended, outside], row)).toEqual({ kind: 'ours', record: ended });
    // The controller showed this request's marker after the other was submitted: it held the id then.
    const confirmed = { ...row, jobConfirmedAt: (submittedSec + 30 + 120) * 1000 };
    expect(ownRecord([marked, outside], confirmed)).toEqual({ kind: 'ours', record: marked });
    // Times unknown: nothing to go on, as before.
    expect(ownRecord([marked, record('outside-job', null as unknown as number)], row).kind).toBe('ours');
  });

  it('another job under the id, submitted since the request: reused (the controller lost it)', () => {
    const other = record('someone-else', submittedSec + 30);
    expect(ownRecord([other], row)).toEqual({ kind: 'reused', by: other });
    // An older job that had the id long before: not a reuse, just no record of this one yet.
    expect(ownRecord([record('someone-else', submittedSec - 86_400)], row)).toEqual({ kind: 'none' });
  });

  it('a same-name record submitted well after the submission is suspect until the controller says', () => {
    const late = record('align', submittedSec + 600);
    expect(ownRecord([late], row)).toEqual({ kind: 'suspect', record: late });
    // Once the controller's record showed the marker (a requeue), a later submit time is its own.
    expect(ownRecord([late], { ...row, jobConfirmedAt: submittedAt + 700_000 })).toEqual({
      kind: 'ours',
      record: late,
    });
  });

  it('a same-name record while a same-name submission is in flight is suspect: it may be that job, under a lost id', () => {
    const fits = record('align', submittedSec + 3);
    const attemptMs = submittedAt + 2500;
    expect(ownRecord([fits], row, new Map([['align', attemptMs]]))).toEqual({ kind: 'suspect', record: fits });
    // Even once the controller had confirmed the id: a crash can have lost the job since.
    expect(ownRecord([fits], { ...row, jobConfirmedAt: submittedAt + 1000 }, new Map([['align', attemptMs]]))).toEqual({
      kind: 'suspect',
      record: fits,
    });
    // Another name in flight, or an attempt begun long after the record was submitted: its own.
    expect(ownRecord([fits], row, new Map([['other', attemptMs]]))).toEqual({ kind: 'ours', record: fits });
    expect(ownRecord([fits], row, new Map([['align', attemptMs + 3_600_000]]))).toEqual({ kind: 'ours', record: fits });
  });
});
