import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killLeftovers } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { slurmCommand } from './cluster.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

/**
 * Slurm refuses a submission over an association's MaxSubmitJobs with error 2050. That is no
 * bad job: the request waits, visibly, and is submitted once the user's other jobs end, in
 * the order the requests were accepted.
 */

let redis: TestRedis;
let d: RealDaemon;

const setLimit = (value: number) =>
  slurmCommand('sacctmgr', ['-i', 'modify', 'user', 'alice', 'where', 'account=lab', 'set', `MaxSubmitJobs=${value}`]);

beforeAll(async () => {
  // Jobs other files left pending would count against the limit.
  await slurmCommand('scancel', ['-u', 'alice']);
  await waitFor(async () => ((await slurmCommand('squeue', ['-h', '-u', 'alice'])).trim() === '' ? true : undefined), {
    what: "alice's jobs to leave the queue",
    timeoutMs: 60_000,
    intervalMs: 500,
  });
  redis = await startTestRedis();
  d = await startRealDaemon(redis);
  await setLimit(2);
});

afterAll(async () => {
  await setLimit(-1);
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

describe('a submission over MaxSubmitJobs', () => {
  it('waits with Slurm’s reason and is submitted, in order, once earlier jobs end', async () => {
    const ids: string[] = [];
    // Accepted one after the other, so their order is the order of acceptance.
    for (let i = 0; i < 5; i++) ids.push(await d.submit(realSpec(`sf-limit-${i}`, 'sleep 4')));
    const waiting = await d.waitForState(ids[4] as string, 'waiting', 60_000);
    expect(waiting.job_id).toBeNull();
    expect(`${waiting.reason} ${waiting.error?.message}`).toMatch(/policy|limit/i);

    const ended = [];
    for (const id of ids) ended.push(await d.waitForState(id, 'completed', 180_000));
    // One Slurm job each; those that waited were submitted in the order they were accepted.
    expect(new Set(ended.map((j) => j.job_id)).size).toBe(5);
    const held = ended.filter((j) => j.transitions.some((t) => t.to === 'waiting'));
    expect(held.length).toBeGreaterThanOrEqual(3);
    // The first in line shows Slurm's own reason.
    const reasons = held.flatMap((j) => j.transitions.filter((t) => t.to === 'waiting').map((t) => t.reason));
    expect(reasons).toContain("Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)");
    const heldIds = held.map((j) => j.job_id as number);
    expect([...heldIds].sort((a, b) => a - b)).toEqual(heldIds);
    for (const job of ended) expect(job.transitions.some((t) => t.to === 'submit_failed')).toBe(false);
  });
});
