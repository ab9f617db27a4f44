import { describe, expect, it } from 'vitest';
import { jobIdentity } from '../../src/tracking/job-identity.js';

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
