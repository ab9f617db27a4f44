import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SourceError } from '../../src/lib/yaml-source.js';
import { loadProfiles } from '../../src/sched/profile.js';

const dir = mkdtempSync(join(tmpdir(), 'schedflow-profiles-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a profile file', () => {
  it('is read as job and pipeline files are: each problem at its file:line:column, a slip named', () => {
    writeFileSync(
      join(dir, 'lab.yaml'),
      [
        'url: http://127.0.0.1:6820',
        'flavor: slurmrestd',
        'auth:',
        '  type: munge',
        'acount: lab',
        'version: 44',
        '',
      ].join('\n'),
    );
    let thrown: unknown;
    try {
      loadProfiles(dir);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(SourceError);
    const problems = (thrown as SourceError).problems.map((p) => p.slice(p.indexOf('lab.yaml')));
    expect(problems).toEqual(
      expect.arrayContaining([
        'lab.yaml:5:9: acount: unknown field "acount"; did you mean "account"?',
        expect.stringMatching(/^lab\.yaml:6:10: version: /),
      ]),
    );
  });
});
