import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { SchedClient } from '../../src/sched/client.js';
import type { JobSpecInput } from '../../src/sched/job-spec.js';
import { jobSpecSchema } from '../../src/sched/job-spec.js';
import { ProfileCheckError } from '../../src/sched/profile-check.js';
import { CancelFailedError, JobNotFoundError, SlurmRefusedError } from '../../src/sched/sched-errors.js';
import { SUPPORTED_VERSIONS } from '../../src/sched/versions.js';
import { waitFor } from '../helpers/http.js';
import { jobWorkDir, realSlurm, script, slurmrestdProfile } from './cluster.js';

const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'schedflow-slurm-client-'));

const spec = (extra: Partial<JobSpecInput> = {}) =>
  jobSpecSchema.parse({
    name: 'sf-client',
    script: script('echo hello from $SLURM_JOB_ID'),
    current_working_directory: jobWorkDir(),
    time_limit: 5,
    ...extra,
  });

const connect = (version: (typeof SUPPORTED_VERSIONS)[number] | 'latest', user: 'alice' | 'bob' = 'alice') =>
  SchedClient.connect(slurmrestdProfile(join(dir, `${user}-${version}`), { version, user }).profile, { logger });

describe('plain slurmrestd connection', () => {
  it('refuses an anonymous request with 401, and schedflow connects with credentials on every request', async () => {
    const res = await fetch(`${realSlurm().url}/slurm/v0.0.44/ping`);
    expect(res.status).toBe(401);
    const client = await connect('latest');
    try {
      expect(client.version).toBe('v0.0.44');
      expect(await client.supportedVersions()).toEqual([...SUPPORTED_VERSIONS].reverse());
      expect((await client.ping()).ok).toBe(true);
    } finally {
      await client.close();
    }
  });

  it('says a refused token is a credential problem', async () => {
    const { profile } = slurmrestdProfile(join(dir, 'bad'), { jwt: 'not-a-jwt' });
    const error = await SchedClient.connect(profile, { logger }).catch((e: unknown) => e);
    // Said as the profile check says it: which token, Slurm's words, and the fix.
    expect(error).toBeInstanceOf(ProfileCheckError);
    expect((error as ProfileCheckError).kind).toBe('credentials');
    expect((error as Error).message).toMatch(/refused the token.*511: Protocol authentication error.*put a valid/);
  });
});

describe.each([...SUPPORTED_VERSIONS, 'latest'] as const)('the client on real slurmrestd %s', (version) => {
  let alice: SchedClient;
  let bob: SchedClient;
  beforeAll(async () => {
    alice = await connect(version);
    bob = await connect(version, 'bob');
  });
  afterAll(async () => {
    await alice?.close();
    await bob?.close();
  });

  it('submits, lists, reads one job and several states, follows it into accounting', async () => {
    const since = Math.floor(Date.now() / 1000) - 5;
    const requestId = `client-${version}-${Date.now()}`;
    const first = await alice.submit(spec({ script: script('sleep 2; echo one') }), requestId);
    const second = await alice.submit(spec({ script: script('exit 3') }), `${requestId}-b`);
    expect(first.adopted).toBe(false);

    const states = await alice.listJobStates([first.job_id, second.job_id]);
    expect(states.data.map((j) => j.job_id).sort()).toEqual([first.job_id, second.job_id].sort());
    for (const entry of states.data) expect(['PENDING', 'RUNNING', 'COMPLETED', 'FAILED']).toContain(entry.state);

    const listing = await alice.listJobs();
    const listed = listing.data.jobs.find((j) => j.job_id === first.job_id);
    expect(listed).toMatchObject({ name: 'sf-client', account: 'lab', user: 'alice', partition: 'debug' });
    expect(listed?.comment).toBe(`schedflow:${requestId}`);

    const one = await alice.getJob(first.job_id);
    expect(one.data).toMatchObject({ job_id: first.job_id, working_directory: jobWorkDir() });

    // The marker lookup finds the job a lost answer would have hidden.
    expect((await alice.findByMarker(requestId, { submittedAfter: since, jobName: 'sf-client' }))?.job_id).toBe(
      first.job_id,
    );

    const ended = await waitFor(
      async () => {
        const { data } = await alice.listAccountingJobs({ startTime: since, accounts: ['lab'] });
        const a = data.find((j) => j.job_id === first.job_id);
        const b = data.find((j) => j.job_id === second.job_id);
        return a?.state === 'COMPLETED' && b?.state === 'FAILED' ? [a, b] : undefined;
      },
      { what: 'both jobs to end in accounting', timeoutMs: 90_000, intervalMs: 1000 },
    );
    const [done, failed] = ended;
    expect(done).toMatchObject({ exit_code: 0, nodes: 'localhost', account: 'lab', user: 'alice' });
    expect(done?.start_time).toBeGreaterThanOrEqual(since);
    expect(done?.end_time).toBeGreaterThanOrEqual(done?.start_time ?? Number.POSITIVE_INFINITY);
    expect(done?.elapsed_sec).toBeGreaterThanOrEqual(2);
    expect(failed).toMatchObject({ exit_code: 3 });

    // Accounting by id, as the poller asks.
    const byId = await alice.listAccountingJobs({ jobIds: [first.job_id, second.job_id], startTime: since });
    expect(byId.data.map((j) => j.job_id).sort()).toEqual([first.job_id, second.job_id].sort());
  });

  it('refuses an unknown partition and a forbidden account at once, with Slurm’s words and no retry', async () => {
    const started = Date.now();
    const partition = await alice
      .submit(spec({ partition: 'no-such-partition' }), `refused-${version}-${started}`)
      .catch((e: unknown) => e);
    expect(partition).toBeInstanceOf(SlurmRefusedError);
    expect((partition as SlurmRefusedError).retryable).toBe(false);
    expect((partition as Error).message).toMatch(/partition/i);

    // bob may not use the partition only account lab may use, nor charge account lab.
    const account = await bob
      .submit(spec({ partition: 'lab-owner' }), `refused-acct-${version}-${started}`)
      .catch((e: unknown) => e);
    expect(account).toBeInstanceOf(SlurmRefusedError);
    expect((account as SlurmRefusedError).errorNumber).toBe(2045);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('cancels its own job, is refused another user’s, and says an unknown job is unknown', async () => {
    const mine = await alice.submit(spec({ script: script('sleep 120') }), `cancel-${version}-${Date.now()}`);
    const theirs = await bob.submit(spec({ script: script('sleep 120') }), `cancel-bob-${version}-${Date.now()}`);
    try {
      await alice.cancel(mine.job_id);
      const refused = await alice.cancel(theirs.job_id).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(CancelFailedError);
      expect((refused as Error).message).toMatch(/denied|permission|not allowed/i);
      // An id Slurm could have given answers 200 with the error in status[]; one it never gives, 404.
      const unknown = await alice.cancel(9_999_999).catch((e: unknown) => e);
      expect(unknown).toBeInstanceOf(CancelFailedError);
      expect((unknown as CancelFailedError).slurmCode).toBe(2017);
      const invalid = await alice.cancel(999_999_999).catch((e: unknown) => e);
      expect(invalid).toBeInstanceOf(JobNotFoundError);
      const gone = await alice.getJob(999_999_999).catch((e: unknown) => e);
      expect(gone).toBeInstanceOf(JobNotFoundError);
      await waitFor(
        async () => ((await alice.listJobStates([mine.job_id])).data[0]?.state === 'CANCELLED' ? true : undefined),
        { what: 'the cancelled job to be CANCELLED', timeoutMs: 30_000, intervalMs: 500 },
      );
    } finally {
      await bob.cancel(theirs.job_id);
    }
  });
});
