import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { SchedClient } from '../../../src/sched/client.js';
import { ProfileCheckError } from '../../../src/sched/profile-check.js';
import {
  AuthenticationError,
  CancelFailedError,
  ForbiddenError,
  JobNotFoundError,
  NetworkError,
  RequestTimeoutError,
  SlurmRefusedError,
  UnexpectedResponseError,
} from '../../../src/sched/sched-errors.js';
import { validateAgainstSpec } from '../../../src/sched/spec-validator.js';
import { SUPPORTED_VERSIONS } from '../../../src/sched/versions.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, BOB_TOKEN, READONLY_TOKEN, startSim } from '../../helpers/sim.js';

import { clientFile, connect, profile, sim, spec, tmp } from './client-files.js';

/** The scheduler client against a simulator: versions, auth, operations, decoding, typed errors. */

clientFile();

describe('versions', () => {
  it('latest resolves through /meta/versions/latest and is logged', async () => {
    const client = await connect({ version: 'latest' });
    expect(client.version).toBe('v0.0.44');
    expect(client.logLines.find((l) => l.msg === 'scheduler API version')).toMatchObject({
      version: 'v0.0.44',
      requested: 'latest',
    });
  });

  it('a pinned version is used in every path', async () => {
    const client = await connect({ version: 'v0.0.42' });
    const { data } = await client.listJobs();
    expect(client.version).toBe('v0.0.42');
    expect(data.jobs).toEqual(expect.any(Array));
  });

  it('a pinned version the scheduler does not serve is a configuration error naming the served ones', async () => {
    const narrow = await startSim({ versions: ['v0.0.43', 'v0.0.44'] });
    try {
      const attempt = SchedClient.connect(profile({ version: 'v0.0.42' }, narrow.url), {
        logger: pino({ level: 'silent' }),
        env: { SCHED_TOKEN: ALICE_TOKEN },
      });
      await expect(attempt).rejects.toThrow(ProfileCheckError);
      await expect(attempt).rejects.toMatchObject({ kind: 'version', retryable: false });
      await expect(attempt).rejects.toThrow(/v0.0.42 .*is not served by the scheduler.*supports v0.0.43, v0.0.44/);
    } finally {
      await narrow.stop();
    }
  });

  it('a version schedflow does not speak is refused before any request', async () => {
    await expect(connect({ version: 'v0.0.41' })).rejects.toThrow(
      /not one schedflow speaks: set version to one of v0.0.42/,
    );
  });
});

describe('every auth scheme, both flavors', () => {
  it('bearer over the proxy flavor', async () => {
    const client = await connect();
    expect((await client.ping()).ok).toBe(true);
    await client.listJobs();
  });

  it('the X-Sched-User-Name / X-Sched-User-Token pair', async () => {
    const client = await connect({ auth: { type: 'header-pair', user: 'alice', tokenEnv: 'SCHED_TOKEN' } });
    const { data } = await client.listAccountingJobs();
    expect(data).toEqual(expect.any(Array));
  });

  it('plain slurmrestd: /slurm paths with X-SLURM-USER-NAME / X-SLURM-USER-TOKEN', async () => {
    const proxy = await startFlakyProxy(sim.url);
    try {
      const client = await connect(
        { flavor: 'slurmrestd', auth: { type: 'header-pair', user: 'alice', tokenEnv: 'SCHED_TOKEN' } },
        ALICE_TOKEN,
        proxy.url,
      );
      await client.ping();
      await client.listJobs();
      const paths = proxy.requests.map((r) => r.url);
      expect(paths).toContain('/slurm/v0.0.44/jobs');
      expect(paths).toContain('/slurm/v0.0.44/ping');
      const jobs = proxy.requests.find((r) => r.url === '/slurm/v0.0.44/jobs');
      expect(jobs?.headers['x-slurm-user-name']).toBe('alice');
      expect(jobs?.headers['x-slurm-user-token']).toBe(ALICE_TOKEN);
    } finally {
      await proxy.close();
    }
  });

  it('plain slurmrestd has no /meta: the versions it serves are probed through /slurm/{v}/ping', async () => {
    const proxy = await startFlakyProxy(sim.url);
    // A slurmrestd built without v0.0.44 (Slurm 25.05): 404 for what it does not have.
    proxy.notFound = (r) => r.url.startsWith('/meta/') || r.url.startsWith('/slurm/v0.0.44/');
    try {
      const overrides = {
        flavor: 'slurmrestd' as const,
        auth: { type: 'header-pair' as const, user: 'alice', tokenEnv: 'SCHED_TOKEN' },
      };
      const latest = await connect({ ...overrides, version: 'latest' }, ALICE_TOKEN, proxy.url);
      expect(latest.version).toBe('v0.0.43');
      expect(proxy.requests.map((r) => r.url)).toContain('/slurm/v0.0.42/ping');
      const error = await connect({ ...overrides, version: 'v0.0.44' }, ALICE_TOKEN, proxy.url).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ProfileCheckError);
      expect((error as Error).message).toMatch(/not served .* \(it supports v0\.0\.43, v0\.0\.42\)/);
    } finally {
      await proxy.close();
    }
  });

  it('MUNGE: a fresh credential for every request', async () => {
    const proxy = await startFlakyProxy(sim.url);
    try {
      const client = await connect({ auth: { type: 'munge' } }, '', proxy.url);
      await client.listJobs();
      await client.listJobs();
      const creds = proxy.requests.filter((r) => r.url.endsWith('/jobs')).map((r) => r.headers.authorization);
      expect(creds).toHaveLength(2);
      expect(creds[0]).toMatch(/^MUNGE /);
      expect(creds[0]).not.toBe(creds[1]);
    } finally {
      await proxy.close();
    }
  });

  it('a token file readable by others is refused; a missing variable is named', async () => {
    const file = join(tmp, 'token');
    writeFileSync(file, ALICE_TOKEN, { mode: 0o644 });
    const fromFile = profile({ auth: { type: 'bearer', tokenFile: file } });
    await expect(SchedClient.connect(fromFile, { logger: pino({ level: 'silent' }) })).rejects.toThrow(/chmod 600/);
    await expect(SchedClient.connect(profile(), { logger: pino({ level: 'silent' }), env: {} })).rejects.toThrow(
      /SCHED_TOKEN is not set/,
    );
  });
});

describe('operations and decoding in every version', () => {
  for (const version of SUPPORTED_VERSIONS) {
    it(`${version}: submit, listJobs, getJob, accounting, jobs/state`, async () => {
      const client = await connect({ version });
      const since = Math.floor(Date.now() / 1000) - 5;
      const { job_id } = await client.submit(
        spec({ name: `ops-${version}`, script: '#!/bin/sh\nexit 4\n' }),
        `ops-${version}`,
      );
      const failed = await waitFor(
        async () => {
          const { data } = await client.getJob(job_id);
          return data.state === 'FAILED' ? data : undefined;
        },
        { what: 'the job to fail' },
      );
      expect(failed).toMatchObject({ job_id, exit_code: 4, reason: 'NonZeroExitCode', account: 'lab', user: 'alice' });
      expect(failed.comment).toBe(`schedflow:ops-${version}`);
      const listing = await client.listJobs();
      expect(listing.data.jobs.map((j) => j.job_id)).toContain(job_id);
      const states = await client.listJobStates([job_id]);
      expect(states.data[0]).toMatchObject({ job_id, state: 'FAILED' });
      const history = await client.listAccountingJobs({ startTime: since, jobIds: [job_id] });
      expect(history.data[0]).toMatchObject({ source: 'accounting', job_id, state: 'FAILED', exit_code: 4 });
      expect((await client.getAccountingJob(job_id)).data?.elapsed_sec).toEqual(expect.any(Number));
    });
  }

  it('the bodies the client sends validate against the version’s job_submit_req', async () => {
    const proxy = await startFlakyProxy(sim.url);
    try {
      for (const version of SUPPORTED_VERSIONS) {
        const client = await connect({ version, partition: 'lab-owner' }, ALICE_TOKEN, proxy.url);
        await client.submit(
          spec({
            environment: { GREETING: 'hi' },
            time_limit: '0:30:00',
            memory_per_node: '1G',
            comment: 'nightly',
            nice: 10,
          }),
          `body-${version}`,
        );
        const sent = proxy.requests.find((r) => r.method === 'POST' && r.url === `/sched/${version}/job/submit`);
        const body = JSON.parse(sent?.body ?? '{}');
        expect(validateAgainstSpec(version, 'job_submit_req', body).errors).toEqual([]);
        expect(body.job).toMatchObject({
          account: 'lab',
          partition: 'lab-owner',
          comment: `schedflow:body-${version} nightly`,
          time_limit: { set: true, infinite: false, number: 30 },
          memory_per_node: { set: true, infinite: false, number: 1024 },
          environment: ['PATH=/usr/local/bin:/usr/bin:/bin', 'GREETING=hi'],
          nice: 10,
        });
      }
    } finally {
      await proxy.close();
    }
  });

  it('listJobs with update_time reports "unchanged" when slurmctld says nothing changed', async () => {
    const quiet = await startSim();
    try {
      const client = await connect({}, ALICE_TOKEN, quiet.url);
      await client.submit(spec({ name: 'one' }), 'update-time-1');
      const first = await client.listJobs();
      expect(first.data).toMatchObject({ changed: true });
      expect(first.data.jobs).toHaveLength(1);
      const next = await client.listJobs({ updateTime: (first.data.lastUpdate ?? 0) + 3600 });
      expect(next.data).toMatchObject({ jobs: [], changed: false });
      const older = await client.listJobs({ updateTime: 1 });
      expect(older.data.jobs).toHaveLength(1);
    } finally {
      await quiet.stop();
    }
  });
});

describe('list answers read as they arrive (large or of unknown length)', () => {
  it('decodes the same records from a chunked answer as from a whole one, in every version; a cut or bad body is a typed error', async () => {
    const proxy = await startFlakyProxy(sim.url);
    try {
      for (const version of SUPPORTED_VERSIONS) {
        const direct = await connect({ version });
        const streamed = await connect({ version, retries: { attempts: 1 } }, ALICE_TOKEN, proxy.url);
        const since = Math.floor(Date.now() / 1000) - 5;
        const ids: number[] = [];
        for (let i = 0; i < 3; i++) {
          ids.push(
            (await direct.submit(spec({ name: `streamed-${version}-${i}` }), `streamed-${version}-${i}`)).job_id,
          );
        }
        const query = { startTime: since, jobIds: ids };
        await waitFor(async () => ((await direct.listAccountingJobs(query)).data.length === 3 ? true : undefined), {
          what: 'three accounting records',
        });
        proxy.chunkBytes = 97;
        const whole = await direct.listAccountingJobs(query);
        const parts = await streamed.listAccountingJobs(query);
        expect(parts.data.map((j) => j.job_id).sort()).toEqual([...ids].sort());
        expect(parts.data).toEqual(whole.data);
        const wanted = new Set(ids.slice(0, 2));
        const listing = await streamed.listJobs({ jobIds: wanted });
        expect(listing.data.jobs.map((j) => j.job_id).sort()).toEqual([...wanted].sort());
        expect(listing.data.changed).toBe(true);
        expect((await streamed.listJobStates(ids)).data.map((j) => j.job_id).sort()).toEqual([...ids].sort());

        proxy.rewrite = (req, body) => (req.url.includes('/jobs') ? body.slice(0, body.length - 40) : body);
        const cut = await streamed.listAccountingJobs(query).catch((e: unknown) => e);
        expect(cut).toBeInstanceOf(UnexpectedResponseError);
        expect((cut as Error).message).toMatch(/truncated JSON|invalid JSON/);
        proxy.rewrite = (req, body) => (req.url.includes('/jobs') ? body.replace('"jobs"', '"jobz"') : body);
        await expect(streamed.listAccountingJobs(query)).rejects.toThrow(/without a "jobs" array/);
        proxy.rewrite = undefined;
        proxy.chunkBytes = undefined;
      }
    } finally {
      await proxy.close();
    }
  });
});

describe('typed errors', () => {
  it("401 for a bad token: AuthenticationError, not retried, found at connect (the proxy's /ping needs none)", async () => {
    const client = await connect({}, ALICE_TOKEN);
    const error = await SchedClient.connect(profile(), {
      logger: pino({ level: 'silent' }),
      env: { SCHED_TOKEN: 'nope-0123456789abcdef' },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProfileCheckError);
    expect(error).toMatchObject({ kind: 'credentials', retryable: false });
    expect((error as Error).message).toMatch(/refused the token in \$SCHED_TOKEN \(401: invalid or expired token\)/);
    const cause = (error as Error).cause;
    expect(cause).toBeInstanceOf(AuthenticationError);
    expect(cause).toMatchObject({ retryable: false, status: 401 });
    expect(client.version).toBe('v0.0.44');
  });

  it('403 for a missing scope says scope; 403 for another account says account', async () => {
    const readonly = await connect({}, READONLY_TOKEN);
    const scope = await readonly.submit(spec(), 'scope-1').catch((e: unknown) => e);
    expect(scope).toBeInstanceOf(ForbiddenError);
    expect(scope).toMatchObject({ reason: 'scope', retryable: false });
    expect((scope as Error).message).toMatch(/sched:jobs:manage/);
    const alice = await connect();
    const account = await alice.submit(spec({ account: 'other' }), 'account-1').catch((e: unknown) => e);
    expect(account).toMatchObject({ reason: 'account', retryable: false });
    expect((account as Error).message).toMatch(/account restriction.*"lab"/);
  });

  it('a 500 carrying a Slurm error is a refusal (fatal) with Slurm’s message and number', async () => {
    const bob = await connect({ account: 'other', partition: 'lab-owner' }, BOB_TOKEN);
    const error = await bob.submit(spec(), 'refused-1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SlurmRefusedError);
    expect(error).toMatchObject({ retryable: false, errorNumber: 2045, status: 500 });
    expect((error as Error).message).toMatch(/Invalid account or account\/partition combination specified/);
  });

  it('a cancel answered 200 with an error in status[] fails; unknown jobs are not found', async () => {
    const client = await connect();
    const cancel = await client.cancel(999_999).catch((e: unknown) => e);
    expect(cancel).toBeInstanceOf(CancelFailedError);
    expect(cancel).toMatchObject({ slurmCode: 2017 });
    await expect(client.getJob(999_999)).rejects.toThrow(JobNotFoundError);
    expect((await client.getAccountingJob(999_999)).data).toBeNull();
  });

  it('nothing listening: NetworkError, retryable, after the configured attempts', async () => {
    const dead = await startSim();
    const url = dead.url;
    const client = await connect({}, ALICE_TOKEN, url);
    await dead.stop();
    const error = await client.listJobs().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NetworkError);
    expect(error).toMatchObject({ retryable: true });
    expect(client.logLines.filter((l) => l.msg === 'scheduler request failed; retrying')).toHaveLength(1);
  });

  it('no answer in time: RequestTimeoutError', async () => {
    const proxy = await startFlakyProxy(sim.url);
    try {
      const client = await connect(
        { timeouts: { connectMs: 1000, requestMs: 300 }, retries: { attempts: 1 } },
        ALICE_TOKEN,
        proxy.url,
      );
      proxy.hang = true;
      await expect(client.listJobs()).rejects.toThrow(RequestTimeoutError);
    } finally {
      await proxy.close();
    }
  });
});
