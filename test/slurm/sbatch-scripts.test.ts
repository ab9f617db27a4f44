import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { SchedClient } from '../../src/sched/client.js';
import { sbatchSpec } from '../../src/sched/sbatch-script.js';
import { jobWorkDir, realSlurm, slurmCommand, slurmrestdProfile } from './cluster.js';

/**
 * The same sbatch script through Slurm's own sbatch (as alice) and through schedflow (its
 * `#SBATCH` lines read into a spec, submitted through slurmrestd as alice) gives the same job:
 * every field of `scontrol show job` compared, except the ones that name the submission itself.
 * The jobs are held (`-H`), so nothing runs; each is cancelled after.
 */

const exec = promisify(execFile);
const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'schedflow-slurm-sbatch-'));

/** Fields that differ between any two submissions, or by how (not what) the job was submitted. */
const SUBMISSION_FIELDS = new Set([
  'JobId',
  'ArrayJobId',
  'SubmitTime',
  'LastSchedEval',
  'AllocNode:Sid',
  'Command', // sbatch's script path; slurmrestd has none
  'SubmitLine',
  'Comment', // schedflow's request marker
  'OOMKillStep', // slurmrestd sends its default (0); sbatch leaves it unset
  'Reason', // a held job's reason is the same; kept out as the scheduler may be mid-pass
]);

/** Fields every record has, which the mapping must get right (the ones shown only when set are asserted per test). */
const MATTERS = [
  'JobName',
  'Partition',
  'Account',
  'QOS',
  'TimeLimit',
  'NumNodes',
  'NumTasks',
  'CPUs/Task',
  'StdOut',
  'StdErr',
  'WorkDir',
  'Features',
  'OverSubscribe',
  'Dependency',
  'EligibleTime', // --begin
  'Nice',
  'Requeue',
  'Priority',
];

let client: SchedClient;
const submitted: string[] = [];

beforeAll(async () => {
  client = await SchedClient.connect(slurmrestdProfile(join(dir, 'profile')).profile, { logger });
});

afterAll(async () => {
  await client?.close();
  for (const id of submitted) await slurmCommand('scancel', [id]).catch(() => undefined);
});

/**
 * `scontrol show job -o`, as a map; each job id's own number written as <id> so two records
 * compare. As a whole number only: on a new cluster job 20 is also the start of 2030-01-01.
 */
async function record(jobId: string): Promise<Record<string, string>> {
  const line = (await slurmCommand('scontrol', ['show', 'job', '-o', jobId])).trim().split('\n')[0] ?? '';
  const id = new RegExp(`(?<!\\d)${jobId}(?!\\d)`, 'g');
  return Object.fromEntries(
    line.split(/ (?=[A-Za-z:/]+=)/).map((pair) => {
      const at = pair.indexOf('=');
      return [pair.slice(0, at), pair.slice(at + 1).replace(id, '<id>')];
    }),
  );
}

/** Slurm's sbatch, run as alice in the jobs' folder: the job id, or its error. */
async function sbatch(file: string): Promise<{ jobId: string } | { error: string }> {
  const { prefix, slurmConf } = realSlurm();
  try {
    const { stdout } = await exec('runuser', ['-u', 'alice', '--', join(prefix, 'bin', 'sbatch'), '--parsable', file], {
      env: { ...process.env, SLURM_CONF: slurmConf },
      cwd: jobWorkDir(),
      timeout: 60_000,
    });
    const jobId = stdout.trim().split(';')[0] ?? '';
    submitted.push(jobId);
    return { jobId };
  } catch (error) {
    return { error: String((error as { stderr?: string }).stderr ?? error) };
  }
}

/** The same script through schedflow: its spec as `schedflow jobs submit` reads the file, submitted as the daemon would. */
async function throughSchedflow(file: string, script: string): Promise<{ jobId: string } | { error: string }> {
  const spec = sbatchSpec(script, { defaultName: basename(file) });
  try {
    // sbatch runs in the jobs' folder, its default working directory; a spec names it.
    const { job_id } = await client.submit({ current_working_directory: jobWorkDir(), ...spec }, randomUUID());
    submitted.push(String(job_id));
    return { jobId: String(job_id) };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

function writeScript(name: string, text: string): string {
  const file = join(jobWorkDir(), name);
  writeFileSync(file, text);
  chmodSync(file, 0o644);
  return file;
}

async function compare(name: string, text: string): Promise<Record<string, string>> {
  const file = writeScript(name, text);
  const theirs = await sbatch(file);
  const ours = await throughSchedflow(file, text);
  if (!('jobId' in theirs) || !('jobId' in ours))
    throw new Error(`sbatch: ${JSON.stringify(theirs)}; schedflow: ${JSON.stringify(ours)}`);
  const [a, b] = [await record(theirs.jobId), await record(ours.jobId)];
  const differ = [...new Set([...Object.keys(a), ...Object.keys(b)])].filter(
    (key) => !SUBMISSION_FIELDS.has(key) && a[key] !== b[key],
  );
  expect(Object.fromEntries(differ.map((key) => [key, { sbatch: a[key], schedflow: b[key] }]))).toEqual({});
  for (const key of MATTERS) expect(b, key).toHaveProperty(key);
  return b;
}

describe('an sbatch script through sbatch and through schedflow on real Slurm', () => {
  it('gives the same job: names, account, QOS, time, counts, memory, output, array, exclusive, mail, begin, nice, requeue', async () => {
    const job = await compare(
      'sf-sbatch-1.sh',
      `#!/bin/bash
# the options are read up to the first command
#SBATCH -J sf-sbatch-1 -p debug
#SBATCH --account=lab --qos=normal
#SBATCH -t 1-02:30
#SBATCH -N 1 -n 1 -c 2 --mem=300M
#SBATCH -o ${jobWorkDir()}/out-%j.txt -e ${jobWorkDir()}/err-%A_%a.txt -D ${jobWorkDir()}
#SBATCH --array=0-3%2 --exclusive   # a comment
#SBATCH --mail-type=BEGIN,END,TIME_LIMIT_90 --mail-user=alice@example.org
#SBATCH --begin=2030-01-01T08:00:00 --nice=10 --requeue -H
echo hello
#SBATCH --time=5
`,
    );
    expect(job).toMatchObject({
      JobName: 'sf-sbatch-1',
      TimeLimit: '1-02:30:00',
      'CPUs/Task': '2',
      OverSubscribe: 'NO',
      Requeue: '1',
      Nice: '10',
      MinMemoryNode: '300M',
      MailUser: 'alice@example.org',
      MailType: 'BEGIN,END,TIME_LIMIT_90',
      EligibleTime: '2030-01-01T08:00:00',
    });
    expect(job.ArrayTaskId).toBe('0-3%2');
  });

  it('gives the same job: long options with spaces, short clusters, per-CPU memory, dependency, mail ALL, export, default nice, no-requeue', async () => {
    // A held job to depend on, so both dependencies are the same (a singleton's would depend on the other).
    const before = await sbatch(
      writeScript('sf-sbatch-before.sh', `#!/bin/bash\n#SBATCH -H -D ${jobWorkDir()}\ntrue\n`),
    );
    if (!('jobId' in before)) throw new Error(before.error);
    const job = await compare(
      'sf-sbatch-2.sh',
      `#!/bin/bash
#
#SBATCH --job-name sf-sbatch-2 --partition lab-owner
#SBATCH -A lab -q normal -t90:30
#SBATCH --nodes=1 --ntasks 2 --mem-per-cpu=200M
#SBATCH --output=o-%x-%A.out --chdir=${jobWorkDir()}
#SBATCH --dependency=afterok:${before.jobId} --mail-type=ALL
#SBATCH --export=NONE,FOO=bar --nice --no-requeue
#SBATCH -H
echo hello
`,
    );
    expect(job).toMatchObject({
      TimeLimit: '01:31:00',
      NumTasks: '2',
      MinMemoryCPU: '200M',
      Dependency: `afterok:${before.jobId}(unfulfilled)`,
      MailType: expect.stringMatching(/^INVALID_DEPEND,BEGIN,END,FAIL,REQUEUE,STAGE_OUT$/),
      Requeue: '0',
    });
    expect(job.Nice).toBe('100');
  });

  it('gives the same job: the name from the file, a time in days and hours, memory in G, exclusive=user', async () => {
    const job = await compare(
      'sf-sbatch-3.sh',
      `#!/bin/sh
#SBATCH -t 2-3 --mem=1G --exclusive=user -HD ${jobWorkDir()}
true
`,
    );
    expect(job).toMatchObject({
      JobName: 'sf-sbatch-3.sh',
      TimeLimit: '2-03:00:00',
      MinMemoryNode: '1G',
      OverSubscribe: 'USER',
    });
  });

  it('gives the same job with --constraint on a feature the node has', async () => {
    // A feature for this test only, taken off again: the cluster's node has none.
    await slurmCommand('scontrol', [
      'update',
      'NodeName=localhost',
      'AvailableFeatures=sftest',
      'ActiveFeatures=sftest',
    ]);
    try {
      const job = await compare(
        'sf-sbatch-4.sh',
        `#!/bin/bash\n#SBATCH --constraint=sftest -H -D ${jobWorkDir()}\ntrue\n`,
      );
      expect(job.Features).toBe('sftest');
    } finally {
      await slurmCommand('scontrol', ['update', 'NodeName=localhost', 'AvailableFeatures=', 'ActiveFeatures=']);
    }
  });

  it('--gres: both refused the same way on a cluster without GRES', async () => {
    const text = `#!/bin/bash\n#SBATCH --gres=gpu:1 -H -D ${jobWorkDir()}\ntrue\n`;
    const file = writeScript('sf-sbatch-5.sh', text);
    const theirs = await sbatch(file);
    const ours = await throughSchedflow(file, text);
    expect(theirs).toMatchObject({ error: expect.stringContaining('Invalid generic resource (gres) specification') });
    expect(ours).toMatchObject({ error: expect.stringContaining('Invalid generic resource (gres) specification') });
  });
});
