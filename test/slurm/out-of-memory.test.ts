import { execFile } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { attemptsOf } from '../../src/requests/attempts.js';
import { SchedClient } from '../../src/sched/client.js';
import type { SchedJob } from '../../src/sched/job-model.js';
import { killLeftovers } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { clusterDown, clusterUp, readClusterEnv, slurmrestdProfile } from './cluster.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

const exec = promisify(execFile);

/**
 * OUT_OF_MEMORY on real Slurm: a cluster of this file's own that enforces memory, as sites do,
 * with task/cgroup (the kernel's memory cgroup, v1 on this machine) and ConstrainRAMSpace. The
 * shared cluster enforces none (task/none), so a job over its memory there runs on.
 *
 * Without cgroups, `JobAcctGatherParams=OverMemoryKill` has slurmstepd kill a step whose sampled
 * RSS is over its memory, but Slurm then records the job FAILED (RaisedSignal:9), not
 * OUT_OF_MEMORY: only task/cgroup's OOM event gives that state. The second test holds that too.
 */

const OOM_CLUSTER = { SLURM_RUN: '/tmp/real-slurm-oom', SLURM_PORT_BASE: '28017' };

/** Holds 90 MB for two seconds: over 64M, within 128M (with the interpreter's own few MB). */
const HUNGRY = 'python3 -c "b=bytearray(90*1024*1024); import time; time.sleep(2)"';

let env: Record<string, string>;
let redis: TestRedis;
let d: RealDaemon;

async function slurm(command: string, args: string[]): Promise<string> {
  const bin = join(env.SLURM_PREFIX as string, 'bin', command);
  const { stdout } = await exec(bin, args, { env: { ...process.env, SLURM_CONF: env.SLURM_CONF }, timeout: 60_000 });
  return stdout;
}

/**
 * Rewrites this cluster's slurm.conf and cgroup.conf (`cluster.sh up` writes them afresh each
 * time) and has every daemon read them again; slurmd restarts its plugins on reconfigure.
 */
async function enforceMemory(how: { taskPlugin: string; cgroup: string; gatherParams: string | null }): Promise<void> {
  const conf = env.SLURM_CONF as string;
  const lines = readFileSync(conf, 'utf8')
    .split('\n')
    .filter((line) => !line.startsWith('JobAcctGatherParams='))
    .map((line) => (line.startsWith('TaskPlugin=') ? `TaskPlugin=${how.taskPlugin}` : line));
  if (how.gatherParams) lines.push(`JobAcctGatherParams=${how.gatherParams}`);
  writeFileSync(conf, `${lines.join('\n').trimEnd()}\n`);
  writeFileSync(join(dirname(conf), 'cgroup.conf'), how.cgroup);
  await slurm('scontrol', ['reconfigure']);
  await waitFor(
    async () => {
      // scontrol shows task/none as `(null)`.
      const shown = how.taskPlugin === 'task/none' ? '(null)' : how.taskPlugin;
      const config = await slurm('scontrol', ['show', 'config']).catch(() => '');
      if (!config.split('\n').some((line) => /^TaskPlugin\s+=/.test(line) && line.endsWith(`= ${shown}`))) {
        return undefined;
      }
      // One line per partition the node is in.
      const node = await slurm('sinfo', ['-h', '-N', '-n', 'localhost', '-o', '%T']).catch(() => '');
      return node.split('\n')[0] === 'idle' ? true : undefined;
    },
    { what: `the cluster to run with TaskPlugin=${how.taskPlugin}`, timeoutMs: 60_000, intervalMs: 1000 },
  );
}

beforeAll(async () => {
  env = readClusterEnv(await clusterUp(OOM_CLUSTER));
  redis = await startTestRedis();
  d = await startRealDaemon(redis, { url: env.SLURMRESTD_URL, jwt: env.ALICE_JWT });
});

afterAll(async () => {
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
  await clusterDown(OOM_CLUSTER);
});

interface Attempt {
  id: string;
  attempt: number;
  state: string;
  job_id: number | null;
  exit_code: number | null;
  reason: string | null;
}

async function submit(spec: Record<string, unknown>, retry: unknown): Promise<string> {
  const res = await d.api('POST', '/api/v1/jobs', { profile: 'real', spec, retry });
  expect(res.status, JSON.stringify(res.json)).toBe(201);
  return (res.json as { id: string }).id;
}

/** The request's attempts once the last has ended with none to follow. */
async function settled(id: string): Promise<Attempt[]> {
  return waitFor(
    async () => {
      const rows = await d.read((h) => attemptsOf(h, id));
      const last = rows.at(-1);
      if (!last || last.endedAt === null || last.retryDueAt !== null || last.nextAttemptId !== null) return undefined;
      const shown = await d.api('GET', `/api/v1/jobs/${id}`);
      return (shown.json as { attempts: Attempt[] }).attempts;
    },
    { what: `request ${id} to settle`, timeoutMs: 120_000, intervalMs: 500 },
  );
}

/** Accounting's records of the attempts' Slurm jobs: what Slurm itself says of them. */
async function accounting(attempts: Attempt[]): Promise<SchedJob[]> {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-oom-'));
  const client = await SchedClient.connect(
    slurmrestdProfile(dir, { url: env.SLURMRESTD_URL, jwt: env.ALICE_JWT }).profile,
    { logger: createLogger({ level: 'silent' }) },
  );
  try {
    return await Promise.all(
      attempts.map((a) =>
        waitFor(async () => (await client.getAccountingJob(a.job_id as number)).data ?? undefined, {
          what: `accounting's record of job ${a.job_id}`,
          timeoutMs: 30_000,
          intervalMs: 1000,
        }),
      ),
    );
  } finally {
    await client.close();
  }
}

/**
 * task/cgroup with cgroup/v1 needs the kernel's v1 memory controller, writable (as root): this
 * machine has it; one with only cgroup v2 mounted skips the test, saying why.
 */
function cgroupV1Memory(): boolean {
  try {
    accessSync('/sys/fs/cgroup/memory', constants.W_OK);
    return true;
  } catch {
    return false;
  }
}
const NO_CGROUP = cgroupV1Memory() ? '' : ' [skipped: no writable cgroup v1 memory controller on this machine]';

const RETRY = { on: ['OUT_OF_MEMORY'], limit: 3, escalate: { memory_per_node: { factor: 2, max: '1G' } } };

describe('OUT_OF_MEMORY on real Slurm', () => {
  it.skipIf(NO_CGROUP !== '')(
    `task/cgroup kills a job over its memory; it is retried with its memory doubled and completes${NO_CGROUP}`,
    async () => {
      await enforceMemory({
        taskPlugin: 'task/cgroup',
        cgroup: 'CgroupPlugin=cgroup/v1\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n',
        gatherParams: null,
      });
      const id = await submit(realSpec('sf-oom', HUNGRY, { memory_per_node: '64M' }), RETRY);
      const attempts = await settled(id);
      expect(attempts.map((a) => [a.attempt, a.state, a.exit_code, a.reason])).toEqual([
        [1, 'out_of_memory', null, null],
        [2, 'completed', 0, 'OUT_OF_MEMORY on attempt 1; memory_per_node 64M → 128M'],
      ]);
      expect(
        (await d.read((h) => attemptsOf(h, id))).map((a) => (a.spec as { memory_per_node: number }).memory_per_node),
      ).toEqual([64, 128]);
      const first = await d.job(id);
      expect(first).toMatchObject({ raw_state: 'OUT_OF_MEMORY', reason: 'OutOfMemory' });

      // Slurm's own records of the two jobs: the kill as OUT_OF_MEMORY, signal 125 (sacct's 0:125).
      const records = await accounting(attempts);
      expect(records.map((r) => [r.state, r.memory_per_node_mb, r.exit_code, r.signal])).toEqual([
        ['OUT_OF_MEMORY', 64, null, { id: 125, name: '125' }],
        ['COMPLETED', 128, 0, null],
      ]);
    },
  );

  it('with OverMemoryKill and no cgroup, Slurm kills the job but records it FAILED (signal 9): no OUT_OF_MEMORY retry', async () => {
    await enforceMemory({ taskPlugin: 'task/none', cgroup: 'CgroupPlugin=disabled\n', gatherParams: 'OverMemoryKill' });
    // Sampled every JobAcctGatherFrequency (5 s): the job must outlive a sample to be seen.
    const body = 'python3 -c "b=bytearray(200*1024*1024); import time; time.sleep(30)"';
    const id = await submit(realSpec('sf-overmemorykill', body, { memory_per_node: '64M' }), RETRY);
    const attempts = await settled(id);
    expect(attempts.map((a) => [a.attempt, a.state, a.exit_code])).toEqual([[1, 'failed', null]]);
    const shown = await d.job(id);
    // slurmctld says RaisedSignal:9(Killed); accounting's record, read last, names the signal KILL.
    expect(shown.raw_state).toBe('FAILED');
    expect(shown.reason).toMatch(/^RaisedSignal:9\(/);
    const [record] = await accounting(attempts);
    expect(record).toMatchObject({ state: 'FAILED', exit_code: null, signal: { id: 9, name: 'KILL' } });
    // Killed well before its 30 s were up, and over its 64 MB by jobacct_gather's own count.
    expect(record?.elapsed_sec).toBeLessThan(20);
    expect(record?.peak_memory_mb).toBeGreaterThan(64);
  });
});
