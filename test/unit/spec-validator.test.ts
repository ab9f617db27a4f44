import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { validateAgainstSpec, withoutNulls } from '../../src/sched/spec-validator.js';
import { SUPPORTED_VERSIONS } from '../../src/sched/versions.js';

const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`../fixtures/real-slurm-25.11/${name}`, import.meta.url), 'utf8'));

describe('slurmrestd documents, with the two quirks handled', () => {
  for (const version of SUPPORTED_VERSIONS) {
    it(`accepts every real Slurm 25.11 body of ${version}`, () => {
      const cases: [string, string][] = [
        [`sched_jobs_${version}.json`, 'openapi_job_info_resp'],
        [`scheddb_jobs_${version}.json`, 'openapi_slurmdbd_jobs_resp'],
        [`submit_${version}.json`, 'openapi_job_submit_response'],
        [`cancel_${version}.json`, 'openapi_kill_job_resp'],
      ];
      for (const [file, schema] of cases) {
        const result = validateAgainstSpec(version, schema, fixture(file));
        expect(result.errors, file).toEqual([]);
      }
    });
  }

  it('rejects a body whose member has the wrong type', () => {
    const body = fixture('sched_jobs_v0.0.44.json') as { jobs: Record<string, unknown>[] };
    const first = body.jobs[0];
    if (!first) throw new Error('fixture has no jobs');
    first.job_state = 'COMPLETED';
    const result = validateAgainstSpec('v0.0.44', 'openapi_job_info_resp', body);
    expect(result.ok).toBe(false);
    expect(result.errors.join('\n')).toContain('/jobs/0/job_state');
  });

  it('enforces slash-path requirements as nested ones (kill_jobs_resp_job error/code)', () => {
    const body = {
      status: [{ error: { string: 'x', message: 'y' }, step_id: 'batch', job_id: 1, federation: { sibling: '' } }],
    };
    const result = validateAgainstSpec('v0.0.44', 'openapi_kill_job_resp', body);
    expect(result.ok).toBe(false);
    expect(result.errors.join('\n')).toContain("must have required property 'code'");
  });

  it('reads null members as absent', () => {
    expect(withoutNulls({ a: null, b: { c: null, d: 1 }, e: [null, { f: null }] })).toEqual({
      b: { d: 1 },
      e: [null, {}],
    });
  });
});
