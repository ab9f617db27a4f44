import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-process.js';
import { jobWorkDir, realSlurm, slurmrestdProfile } from './cluster.js';

/** `schedflow sched …` against plain slurmrestd, as a user types it: the real cluster's answers in tables and JSON. */

const root = mkdtempSync(join(tmpdir(), 'schedflow-sched-cli-'));
const { input } = slurmrestdProfile(join(root, 'secrets'));
const flags = [
  '--url',
  realSlurm().url,
  '--flavor',
  'slurmrestd',
  '--auth',
  'header-pair',
  '--user',
  'alice',
  '--token-file',
  (input.auth as { tokenFile: string }).tokenFile,
  '--account',
  'lab',
];
const sched = (args: string[]) => runCli(['sched', ...flags, ...args], { cwd: root, timeoutMs: 60_000 });

function jobFile(name: string, extra: Record<string, unknown> = {}): string {
  const file = join(root, `${name}.yaml`);
  writeFileSync(
    file,
    JSON.stringify({
      name,
      script: '#!/bin/bash\nsleep 30\n',
      current_working_directory: jobWorkDir(),
      time_limit: 2,
      ...extra,
    }),
  );
  return file;
}

describe('schedflow sched on real slurmrestd', () => {
  it('pings and lists the versions it serves', async () => {
    const ping = await sched(['ping']);
    expect(ping.stderr).toBe('');
    expect(ping.code).toBe(0);
    const versions = await sched(['--json', 'versions']);
    expect(versions.code).toBe(0);
    expect(versions.stdout).toMatch(/v0\.0\.44/);
  });

  it('submits, shows the job and its state among several, and cancels it', async () => {
    const a = await sched(['--json', 'submit', jobFile('sf-cli-a')]);
    const b = await sched(['--json', 'submit', jobFile('sf-cli-b')]);
    expect(a.stderr).toBe('');
    const idA = (JSON.parse(a.stdout) as { job_id: number }).job_id;
    const idB = (JSON.parse(b.stdout) as { job_id: number }).job_id;

    const states = await sched(['--json', 'states', String(idA), String(idB)]);
    expect(states.code).toBe(0);
    const listed = (JSON.parse(states.stdout) as { jobs: { job_id: number; state: string }[] }).jobs;
    expect(listed.map((j) => j.job_id).sort()).toEqual([idA, idB].sort());

    const jobs = await sched(['jobs']);
    expect(jobs.stdout).toContain('sf-cli-a');
    const job = await sched(['job', String(idA)]);
    expect(job.stdout).toMatch(/sf-cli-a/);

    for (const id of [idA, idB]) {
      const cancel = await sched(['cancel', String(id)]);
      expect(cancel.stdout).toContain(`cancelled job ${id}`);
    }
    const history = await sched(['history', '--since', '10m']);
    expect(history.code).toBe(0);
  });

  it('says why Slurm refused a job, without a stack trace, and exits non-zero', async () => {
    const refused = await sched(['submit', jobFile('sf-cli-bad', { partition: 'no-such-partition' })]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/partition/i);
    expect(refused.stderr).not.toMatch(/\n\s+at /);
    const unknown = await sched(['cancel', '999999999']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/2017|invalid job id/i);
  });
});
