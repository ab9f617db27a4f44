import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidJobUpdateError } from '../../../src/errors.js';
import { SchedClient } from '../../../src/sched/client.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { parseProfile } from '../../../src/sched/profile.js';
import { JobNotFoundError, JobUpdateRefusedError } from '../../../src/sched/sched-errors.js';
import { SUPPORTED_VERSIONS } from '../../../src/sched/versions.js';
import { waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';

/** SchedClient.updateJob against the simulator, every version, both flavors: hold, release, update, refusals. */

let sim: TestSim;
const clients: SchedClient[] = [];

beforeAll(async () => {
  sim = await startSim({ cpus: 2 });
});
afterAll(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await sim.stop();
});

async function connect(version: string, flavor: 'proxy' | 'slurmrestd') {
  const auth =
    flavor === 'proxy'
      ? { type: 'bearer' as const, tokenEnv: 'SCHED_TOKEN' }
      : { type: 'header-pair' as const, user: 'alice', tokenEnv: 'SCHED_TOKEN' };
  const profile = parseProfile('test', { url: sim.url, flavor, auth, account: 'lab', version });
  const client = await SchedClient.connect(profile, {
    logger: pino({ level: 'silent' }),
    env: { SCHED_TOKEN: ALICE_TOKEN },
  });
  clients.push(client);
  return client;
}

/** The controller's record as slurmrestd answers it (no proxy cache in the way). */
async function record(jobId: number): Promise<Record<string, unknown>> {
  const res = await fetch(`${sim.url}/slurm/v0.0.44/job/${jobId}`, {
    headers: { 'X-SLURM-USER-NAME': 'alice', 'X-SLURM-USER-TOKEN': ALICE_TOKEN },
  });
  const body = (await res.json()) as { jobs: Record<string, unknown>[] };
  return body.jobs[0] as Record<string, unknown>;
}

const spec = (overrides: Record<string, unknown> = {}) =>
  jobSpecSchema.parse({
    name: 'update-test',
    script: '#!/bin/sh\nsleep 60\n',
    current_working_directory: sim.workDir,
    time_limit: 10,
    ...overrides,
  });

/** A job that holds both CPUs, so the next one waits. */
async function blocker(client: SchedClient): Promise<number> {
  const { job_id: jobId } = await client.submit(spec({ cpus_per_task: 2 }), `blocker-${Math.random()}`);
  await waitFor(async () => ((await record(jobId)).job_state as string[])[0] === 'RUNNING' || undefined);
  return jobId;
}

describe.each(SUPPORTED_VERSIONS.flatMap((v) => (['proxy', 'slurmrestd'] as const).map((f) => [v, f] as const)))(
  '%s over %s',
  (version, flavor) => {
    it('holds, updates and releases a pending job; a held job is not started; a running one refuses a partition', async () => {
      const client = await connect(version, flavor);
      const block = await blocker(client);
      const { job_id: jobId } = await client.submit(spec(), `waiter-${version}-${flavor}`);

      await client.updateJob(jobId, { hold: true });
      expect(await record(jobId)).toMatchObject({
        hold: true,
        state_reason: 'JobHeldUser',
        priority: { number: 0 },
      });
      await client.updateJob(String(jobId), {
        timeLimitMin: 5,
        name: 'renamed',
        comment: 'moved',
        partition: 'lab-owner',
        nice: 5,
      });
      expect(await record(jobId)).toMatchObject({
        time_limit: { set: true, number: 5 },
        name: 'renamed',
        comment: 'moved',
        partition: 'lab-owner',
        nice: 5,
      });
      // Held, it stays pending when the CPUs come free.
      await client.cancel(block);
      await new Promise((r) => setTimeout(r, 1500));
      expect((await record(jobId)).job_state).toEqual(['PENDING']);

      await client.updateJob(jobId, { hold: false });
      await waitFor(async () => ((await record(jobId)).job_state as string[])[0] === 'RUNNING' || undefined);
      expect(await record(jobId)).toMatchObject({ hold: false, state_reason: 'None' });

      const partition = await client.updateJob(jobId, { partition: 'debug' }).catch((e: unknown) => e);
      expect(partition).toBeInstanceOf(JobUpdateRefusedError);
      expect(partition).toMatchObject({ slurmCode: 2073, slurmWords: 'Job is no longer pending execution' });
      expect(String(partition)).toMatch(
        /Slurm refused to update job \d+ \(partition debug\): Job is no longer pending/,
      );
      // A user may lower a running job's limit, not raise it.
      await client.updateJob(jobId, { timeLimitMin: 4 });
      const raise = await client.updateJob(jobId, { timeLimitMin: 8 }).catch((e: unknown) => e);
      expect(raise).toMatchObject({ slurmCode: 2002, slurmWords: 'Access/permission denied' });
      await client.cancel(jobId);
    });
  },
);

describe('refusals', () => {
  it('an unknown job is not found; a partition whose MaxTime the job exceeds, a negative nice, an unknown QOS are refused in Slurm words', async () => {
    const client = await connect('v0.0.44', 'proxy');
    await expect(client.updateJob(99_999_999, { name: 'x' })).rejects.toBeInstanceOf(JobNotFoundError);
    const block = await blocker(client);
    const { job_id: jobId } = await client.submit(spec({ time_limit: 120 }), 'refusals-waiter');
    // lab-owner's MaxTime is 60.
    await expect(client.updateJob(jobId, { partition: 'lab-owner' })).rejects.toMatchObject({
      slurmCode: 2051,
      slurmWords: 'Requested time limit is invalid (missing or exceeds some limit)',
    });
    await expect(client.updateJob(jobId, { nice: -5 })).rejects.toMatchObject({ slurmCode: 2002 });
    await expect(client.updateJob(jobId, { qos: 'nosuch' })).rejects.toMatchObject({
      slurmCode: 2066,
      slurmWords: 'Invalid qos specification',
    });
    await expect(client.updateJob(jobId, { partition: 'nosuch' })).rejects.toMatchObject({ slurmCode: 2000 });
    await client.cancel(jobId);
    await client.cancel(block);
  });

  it('a malformed id or an empty update is refused before any request', async () => {
    const client = await connect('v0.0.44', 'proxy');
    await expect(client.updateJob('12;rm', { name: 'x' })).rejects.toBeInstanceOf(InvalidJobUpdateError);
    await expect(client.updateJob(12, {})).rejects.toThrow(/changes nothing/);
    await expect(client.updateJob(12, { timeLimitMin: 1.5 })).rejects.toThrow(/whole number of minutes/);
  });
});
