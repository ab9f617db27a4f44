import { describe, expect, it } from 'vitest';
import { InvalidJobUpdateError } from '../../src/errors.js';
import { describeJobUpdate, jobIdOfUpdate, jobUpdateBody, MAX_NICE } from '../../src/sched/job-update.js';
import { validateAgainstSpec } from '../../src/sched/spec-validator.js';
import { SUPPORTED_VERSIONS } from '../../src/sched/versions.js';

/**
 * The body `updateJob` posts to `{ctl}/job/{id}`, per version: what real Slurm 25.11.7 takes
 * (test/slurm/job-update.test.ts is the judge of that), and the version's own document.
 */
describe('jobUpdateBody', () => {
  for (const version of SUPPORTED_VERSIONS) {
    describe(version, () => {
      it('sends every field as the job_desc_msg member Slurm reads, and validates against the document', () => {
        const body = jobUpdateBody(version, {
          timeLimitMin: 45,
          partition: 'lab-owner',
          qos: 'normal',
          nice: 10,
          name: 'renamed',
          comment: 'moved',
          hold: true,
        });
        expect(body).toEqual({
          // Without `set: true` slurmrestd answers 200 and leaves the limit as it was.
          time_limit: { set: true, infinite: false, number: 45 },
          partition: 'lab-owner',
          qos: 'normal',
          nice: 10,
          name: 'renamed',
          comment: 'moved',
          hold: true,
        });
        expect(validateAgainstSpec(version, 'job_desc_msg', body).errors).toEqual([]);
      });

      it('sends only what the update names: a release is `hold: false` alone', () => {
        expect(jobUpdateBody(version, { hold: false })).toEqual({ hold: false });
        expect(jobUpdateBody(version, { name: 'x' })).toEqual({ name: 'x' });
        expect(jobUpdateBody(version, { comment: '' })).toEqual({ comment: '' });
        expect(validateAgainstSpec(version, 'job_desc_msg', { hold: false }).errors).toEqual([]);
      });
    });
  }

  it('refuses an update that changes nothing, an unknown field, and values Slurm does not take', () => {
    const refused = (update: unknown) => () => jobUpdateBody('v0.0.44', update as never);
    expect(refused({})).toThrow(/changes nothing/);
    expect(refused({ hold: undefined })).toThrow(/changes nothing/);
    expect(refused({ account: 'lab' })).toThrow(InvalidJobUpdateError);
    expect(refused({ timeLimitMin: 0 })).toThrow(/at least 1 minute/);
    expect(refused({ timeLimitMin: 1.5 })).toThrow(/whole number of minutes/);
    expect(refused({ nice: MAX_NICE + 1 })).toThrow(InvalidJobUpdateError);
    expect(refused({ partition: '' })).toThrow(/partition must not be empty/);
    expect(refused({ name: 'two\nlines' })).toThrow(/job name must be one line/);
    expect(jobUpdateBody('v0.0.44', { nice: -MAX_NICE })).toEqual({ nice: -MAX_NICE });
  });
});

describe('jobIdOfUpdate', () => {
  it('takes a job id as a number or digits, and one array task as 123_4', () => {
    expect(jobIdOfUpdate(123)).toBe('123');
    expect(jobIdOfUpdate(' 123 ')).toBe('123');
    expect(jobIdOfUpdate('123_4')).toBe('123_4');
  });

  it('refuses what is no job id', () => {
    for (const id of ['', '0', 'abc', '123_', '123_[1-3]', '-5', '12.5']) {
      expect(() => jobIdOfUpdate(id)).toThrow(InvalidJobUpdateError);
    }
  });
});

describe('describeJobUpdate', () => {
  it('says the update in words, the comment without its text', () => {
    expect(describeJobUpdate({ hold: true })).toBe('hold');
    expect(describeJobUpdate({ hold: false, timeLimitMin: 30, partition: 'b', comment: 'secret-ish' })).toBe(
      'release, time limit 30 min, partition b, comment',
    );
  });
});
