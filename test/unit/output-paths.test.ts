import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readFileTail } from '../../src/lib/file-tail.js';
import { expandOutputPattern, outputPathsOf } from '../../src/sched/output-paths.js';

const job = { jobId: 128, name: 'align', user: 'alice', node: 'c1' };

describe("Slurm's output filename patterns (expand_stdio_fields, Slurm 25.11)", () => {
  it('expands the job id, name, user, node and a literal %', () => {
    expect(expandOutputPattern('%x-%j.out', job)).toBe('align-128.out');
    expect(expandOutputPattern('%u/%x.%j.%N.100%%', job)).toBe('alice/align.128.c1.100%');
  });

  it('zero-pads numeric fields, at most 10 digits, and ignores padding on text', () => {
    expect(expandOutputPattern('job%4j.out', job)).toBe('job0128.out');
    expect(expandOutputPattern('%12j', job)).toBe('0000000128');
    expect(expandOutputPattern('%4x-%3N', job)).toBe('align-c1');
  });

  it('gives the batch step its values: %J is the job id, %s "batch", %n and %t 0', () => {
    expect(expandOutputPattern('%J.%s.%n.%2t', job)).toBe('128.batch.0.00');
  });

  it('expands %A and %a of an array task, with padding', () => {
    const task = { ...job, jobId: 131, arrayJobId: 128, arrayTaskId: 3 };
    expect(expandOutputPattern('slurm-%A_%a.out', task)).toBe('slurm-128_3.out');
    expect(expandOutputPattern('%x-%A_%4a-%b.log', task)).toBe('align-128_0003-3.log');
    expect(expandOutputPattern('%j', task)).toBe('131');
  });

  it('gives a job that is no array task its own id for %A and NO_VAL for %a, as Slurm does', () => {
    expect(expandOutputPattern('%A_%a', job)).toBe('128_4294967294');
  });

  it('leaves letters it does not know as written, and a backslash turns expansion off', () => {
    expect(expandOutputPattern('%q-%3q-%j', job)).toBe('%q-%3q-128');
    expect(expandOutputPattern('out\\%j-%x', job)).toBe('out%j-%x');
    expect(expandOutputPattern('trailing%', job)).toBe('trailing');
  });

  it('is null when a field is not known yet (%N before the job ran, %u without a user)', () => {
    expect(expandOutputPattern('%N.out', { jobId: 1, name: 'n' })).toBeNull();
    expect(expandOutputPattern('%u.out', { jobId: 1, name: 'n', user: null })).toBeNull();
    expect(expandOutputPattern('%x_%j_%%_%A.out', { jobId: 1, name: 'n' })).toBe('n_1_%_1.out');
  });
});

describe('where a batch job writes its output', () => {
  it("defaults to slurm-%j.out in the job's working directory, stderr with stdout", () => {
    expect(outputPathsOf({ current_working_directory: '/scratch/al' }, job, '/tmp')).toEqual({
      stdout: '/scratch/al/slurm-128.out',
      stderr: '/scratch/al/slurm-128.out',
    });
  });

  it("an array task's default is slurm-%A_%a.out", () => {
    const task = { ...job, jobId: 131, arrayJobId: 128, arrayTaskId: 3 };
    expect(outputPathsOf({}, task, '/tmp').stdout).toBe('/tmp/slurm-128_3.out');
  });

  it('resolves relative patterns against the working directory as Slurm does (no normalising), keeps absolute ones', () => {
    expect(
      outputPathsOf(
        { current_working_directory: '/w/', standard_output: 'logs/%x-%j.out', standard_error: '/var/log/%j.err' },
        job,
        null,
      ),
    ).toEqual({ stdout: '/w/logs/align-128.out', stderr: '/var/log/128.err' });
    expect(outputPathsOf({ standard_output: './o.%j' }, job, '/home/a').stdout).toBe('/home/a/./o.128');
    expect(outputPathsOf({ standard_output: 'o.%j' }, job, null).stdout).toBe('o.128');
  });

  it('is null for a stream whose pattern needs what is not known', () => {
    expect(outputPathsOf({ standard_error: '%N.err' }, { jobId: 5, name: 'x' }, '/tmp')).toEqual({
      stdout: '/tmp/slurm-5.out',
      stderr: null,
    });
  });
});

describe('the bounded tail reader', () => {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-file-tail-'));

  it('reads the last lines, and never more than the byte bound from the end', () => {
    const file = join(dir, 'big.out');
    writeFileSync(file, `${Array.from({ length: 5000 }, (_, i) => `line ${i}`).join('\n')}\n`);
    const tail = readFileTail(file, { maxBytes: 1 << 20, maxLines: 3 });
    expect(tail).toMatchObject({ kind: 'ok', text: 'line 4997\nline 4998\nline 4999\n', truncated: true });
    const bounded = readFileTail(file, { maxBytes: 25, maxLines: 100 });
    // 25 bytes from the end hold a cut line, dropped, then whole lines only.
    expect(bounded).toMatchObject({ kind: 'ok', text: 'line 4998\nline 4999\n', truncated: true });
  });

  it('says what is wrong rather than throwing', () => {
    expect(readFileTail(join(dir, 'none.out'), { maxBytes: 10 })).toEqual({ kind: 'missing' });
    expect(readFileTail(dir, { maxBytes: 10 })).toEqual({ kind: 'not-a-file' });
    expect(readFileTail(join(dir, 'big.out'), { maxBytes: 10, protectedDirs: [dir] })).toEqual({ kind: 'protected' });
  });
});
