import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tasksOf } from '../../src/db/array-tasks.js';
import { killLeftovers } from '../helpers/cli-process.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { clusterDown, clusterUp, readClusterEnv } from './cluster.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

/**
 * A cluster without accounting (no slurmdbd; `/slurmdb/...` answers 404), as some sites run:
 * every job still reaches its true final state with its exit code, from the controller.
 */

const NO_ACCOUNTING = {
  SLURM_ACCOUNTING: 'none',
  SLURM_RUN: '/tmp/real-slurm-noacct',
  SLURM_PORT_BASE: '27917',
};

let redis: TestRedis;
let d: RealDaemon;

beforeAll(async () => {
  const env = readClusterEnv(await clusterUp(NO_ACCOUNTING));
  redis = await startTestRedis();
  d = await startRealDaemon(redis, { url: env.SLURMRESTD_URL, jwt: env.ALICE_JWT });
});

afterAll(async () => {
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
  await clusterDown(NO_ACCOUNTING);
});

describe('a cluster without accounting', () => {
  it('follows every job to its final state with its exit code; nothing stays running', async () => {
    const ok = await d.submit(realSpec('sf-noacct-ok', 'sleep 2; echo ok'));
    const bad = await d.submit(realSpec('sf-noacct-bad', 'exit 6'));
    const cancelled = await d.submit(realSpec('sf-noacct-cancel', 'sleep 600'));
    await d.waitForState(cancelled, 'running', 60_000);
    expect((await d.api('DELETE', `/api/v1/jobs/${cancelled}`)).status).toBe(202);

    const done = await d.waitForState(ok, 'completed', 90_000);
    expect(done.exit_code).toBe(0);
    expect(done.started_at).not.toBeNull();
    expect(done.ended_at).not.toBeNull();
    expect((await d.waitForState(bad, 'failed', 90_000)).exit_code).toBe(6);
    await d.waitForState(cancelled, 'cancelled', 90_000);
  });

  it('says the accounts of the user are unknown there, and refuses nothing for them', async () => {
    expect(d.process.stdout).toContain(
      'profile real: accounts unknown: the scheduler serves no accounting (404) (Slurm decides at submit; checked again later)',
    );
    const ready = await d.api('GET', '/readyz');
    expect((ready.json as { detail?: Record<string, string> }).detail?.['accounts:real']).toMatch(/^accounts unknown/);
    const other = await d.api('POST', '/api/v1/jobs', {
      profile: 'real',
      spec: realSpec('sf-noacct-other', 'true', { account: 'other' }),
    });
    expect(other.status).toBe(201);
  });

  it("follows an array's every task to its end from the controller's records (`<job id>_<task id>`)", async () => {
    // Throttled, so tasks 2 and 3 leave the array's pending record under job ids nothing else names.
    const body = 'sleep 1\n[ "$SLURM_ARRAY_TASK_ID" = 1 ] && exit 4\ntrue';
    const id = await d.submit(realSpec('sf-noacct-array', body, { array: '0-3%2' }));
    const ended = await d.waitForState(id, 'failed', 90_000);
    expect(ended.exit_code).toBe(4);
    expect(ended.reason).toContain('1 of 4 tasks did not complete (1: failed, exit 4)');
    const tasks = await d.read((h) => tasksOf(h, id));
    expect(tasks.map((task) => [task.taskId, task.state, task.exitCode])).toEqual([
      [0, 'completed', 0],
      [1, 'failed', 4],
      [2, 'completed', 0],
      [3, 'completed', 0],
    ]);
    // Each task its own job, the last to start the array's; times and node from the controller.
    expect(new Set(tasks.map((task) => task.jobId)).size).toBe(4);
    expect(tasks.map((task) => task.jobId)).toContain(ended.job_id);
    expect(tasks.every((task) => task.nodes && task.startedAt && task.endedAt)).toBe(true);
  });
});
