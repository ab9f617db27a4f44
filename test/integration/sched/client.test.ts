import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { SchedClient } from '../../../src/sched/client.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { type ProfileInput, parseProfile } from '../../../src/sched/profile.js';
import {
  AuthenticationError,
  CancelFailedError,
  ForbiddenError,
  JobNotFoundError,
  NetworkError,
  RequestTimeoutError,
  SlurmRefusedError,
  UnexpectedResponseError,
  UpstreamUnavailableError,
} from '../../../src/sched/sched-errors.js';
import { validateAgainstSpec } from '../../../src/sched/spec-validator.js';
import { SUPPORTED_VERSIONS } from '../../../src/sched/versions.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, BOB_TOKEN, READONLY_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';

/** A logger whose lines the test can read (to see retries), silent otherwise. */
function recordingLogger() {
  const lines: { msg: string; [key: string]: unknown }[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

let sim: TestSim;
let tmp: string;
const clients: SchedClient[] = [];

function profile(overrides: Partial<ProfileInput> = {}, url = sim.url) {
  return parseProfile('test', {
    url,
    auth: { type: 'bearer', tokenEnv: 'SCHED_TOKEN' },
    account: 'lab',
    retries: { attempts: 2, baseDelayMs: 50, maxDelayMs: 200 },
    ...overrides,
  });
}

async function connect(overrides: Partial<ProfileInput> = {}, token = ALICE_TOKEN, url = sim.url) {
  const { logger, lines } = recordingLogger();
  const client = await SchedClient.connect(profile(overrides, url), { logger, env: { SCHED_TOKEN: token } });
  clients.push(client);
  return Object.assign(client, { logLines: lines });
}

function spec(overrides: Record<string, unknown> = {}) {
  return jobSpecSchema.parse({
    name: 'client-test',
    script: '#!/bin/sh\nsleep 0.2\n',
    current_working_directory: sim.workDir,
    ...overrides,
  });
}

beforeAll(async () => {
  sim = await startSim({ versions: ['v0.0.42', 'v0.0.43', 'v0.0.44'] });
  tmp = mkdtempSync(join(tmpdir(), 'schedflow-client-'));
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await sim.stop();
  rmSync(tmp, { recursive: true, force: true });
});

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
      await expect(attempt).rejects.toThrow(ConfigError);
      await expect(attempt).rejects.toThrow(/v0.0.42 .*is not served by the scheduler.*supports v0.0.43, v0.0.44/);
    } finally {
      await narrow.stop();
    }
  });

  it('a version schedflow does not speak is refused before any request', async () => {
    await expect(connect({ version: 'v0.0.41' })).rejects.toThrow(/not one schedflow speaks; use one of v0.0.42/);
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
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(/not served .* it supports v0\.0\.43, v0\.0\.42/);
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
  it('401 for a bad token: AuthenticationError, not retried', async () => {
    const client = await connect({}, ALICE_TOKEN);
    const bad = await SchedClient.connect(profile(), {
      logger: pino({ level: 'silent' }),
      env: { SCHED_TOKEN: 'nope-0123456789abcdef' },
    });
    clients.push(bad);
    const error = await bad.listJobs().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error).toMatchObject({ retryable: false, status: 401 });
    expect((error as Error).message).toMatch(/invalid or expired token/);
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

describe('freshness, stale-if-error, rate limits', () => {
  const setUpstream = (state: Record<string, string>) =>
    http(`${sim.url}/_sim/upstream`, { method: 'PUT', body: state });

  it('every read carries its freshness; polling reads accept stale data while the scheduler is down', async () => {
    const client = await connect({ retries: { attempts: 1 } });
    const fresh = await client.listJobs({ forPolling: true });
    expect(fresh.freshness).toMatchObject({ stale: false, maxAgeSec: 2 });
    expect(fresh.freshness.ageSec).toBeLessThanOrEqual(2);
    await setUpstream({ slurmctld: 'down' });
    try {
      await new Promise((r) => setTimeout(r, 2600));
      const stale = await client.listJobs({ forPolling: true });
      expect(stale.freshness.stale).toBe(true);
      expect(stale.freshness.ageSec).toBeGreaterThanOrEqual(2);
      expect(stale.data.jobs.map((j) => j.job_id)).toEqual(fresh.data.jobs.map((j) => j.job_id));
      await expect(client.listJobs()).rejects.toThrow(UpstreamUnavailableError);
    } finally {
      await setUpstream({ slurmctld: 'up' });
    }
  });

  it('the poller’s active-states accounting query keeps one URL, so an outage is served its cached answer', async () => {
    const client = await connect({ retries: { attempts: 1 } });
    const { job_id } = await client.submit(
      spec({ name: 'active-states', script: '#!/bin/sh\nsleep 5\n' }),
      'marker-active-states',
    );
    const query = { jobIds: [job_id], startTime: Math.floor(Date.now() / 1000) - 60, states: ['PENDING', 'RUNNING'] };
    const fresh = await client.listAccountingJobs(query, { forPolling: true });
    expect(fresh.data.map((j) => j.job_id)).toEqual([job_id]);
    await setUpstream({ slurmdbd: 'down' });
    try {
      // Past the accounting cache lifetime and into the next second: `end_time=now` would be a new URL by now.
      await new Promise((r) => setTimeout(r, 2100));
      const stale = await client.listAccountingJobs(query, { forPolling: true });
      expect(stale.freshness.stale).toBe(true);
      expect(stale.data.map((j) => j.job_id)).toEqual([job_id]);
    } finally {
      await setUpstream({ slurmdbd: 'up' });
      await client.cancel(job_id);
    }
  });

  it('429: retried with backoff honouring Retry-After, then succeeds', async () => {
    const limited = await startSim({ rateLimit: { capacity: 2, refillPerSecond: 1 } });
    try {
      const client = await connect(
        { rateLimit: { capacity: 50, refillPerSecond: 50 }, retries: { attempts: 4, baseDelayMs: 10, maxDelayMs: 50 } },
        ALICE_TOKEN,
        limited.url,
      );
      const started = Date.now();
      for (let i = 0; i < 3; i++) await client.listAccountingJobs({ jobNames: [`n${i}`] });
      const retries = client.logLines.filter((l) => l.msg === 'scheduler request failed; retrying');
      expect(retries.length).toBeGreaterThan(0);
      expect(retries[0]).toMatchObject({ code: 'SCHEDFLOW_ERR_SCHED_RATE_LIMITED', status: 429 });
      // Retry-After says 1 s; backoff alone would have waited at most 50 ms.
      expect(retries[0]?.delayMs as number).toBeGreaterThanOrEqual(1000);
      expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    } finally {
      await limited.stop();
    }
  });

  it('the client-side budget keeps a burst under the proxy limit: no 429 at all', async () => {
    const limited = await startSim({ rateLimit: { capacity: 3, refillPerSecond: 4 } });
    try {
      const client = await connect({ rateLimit: { capacity: 2, refillPerSecond: 3 } }, ALICE_TOKEN, limited.url);
      await Promise.all(Array.from({ length: 8 }, (_, i) => client.listAccountingJobs({ jobNames: [`b${i}`] })));
      expect(client.logLines.filter((l) => l.msg === 'scheduler request failed; retrying')).toEqual([]);
    } finally {
      await limited.stop();
    }
  });
});

describe('idempotent submission', () => {
  it('finds a job by its marker, in the controller and in accounting', async () => {
    const client = await connect();
    const { job_id } = await client.submit(spec({ name: 'marked' }), 'marker-1');
    expect((await client.findByMarker('marker-1'))?.job_id).toBe(job_id);
    expect(await client.findByMarker('marker-unknown')).toBeNull();
  });

  it('a job that has left the controller listing is found by its marker in accounting', async () => {
    const proxy = await startFlakyProxy(sim.url);
    try {
      const client = await connect({}, ALICE_TOKEN, proxy.url);
      const { job_id } = await client.submit(spec({ name: 'gone-from-controller' }), 'marker-acct');
      // slurmdbd's window ends at now, exclusive: a job that became eligible this very second is
      // not in it yet (as on a real cluster, where its record may not even have arrived).
      await new Promise((r) => setTimeout(r, 1100));
      // What the controller says once MinJobAge has passed: the job is no longer listed.
      proxy.rewrite = (req, body) =>
        /\/sched\/[^/]+\/jobs(\?|$)/.test(req.url) ? JSON.stringify({ ...JSON.parse(body), jobs: [] }) : body;
      const found = await client.findByMarker('marker-acct', { submittedAfter: Math.floor(Date.now() / 1000) - 60 });
      expect(found?.job_id).toBe(job_id);
      expect(proxy.requests.some((r) => r.url.includes('/scheddb/'))).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it('an answer lost and the marker lookup failing too: no second POST, a retryable error', async () => {
    const proxy = await startFlakyProxy(sim.url);
    try {
      const client = await connect({}, ALICE_TOKEN, proxy.url);
      proxy.dropAnswerOnce((r) => r.method === 'POST');
      for (let i = 0; i < 10; i++) proxy.dropAnswerOnce((r) => r.method === 'GET');
      const error = await client.submit(spec({ name: 'lost-twice' }), 'lost-2').catch((e: unknown) => e);
      expect(error).toMatchObject({ retryable: true });
      expect(proxy.requests.filter((r) => r.method === 'POST')).toHaveLength(1);
      expect(client.logLines.some((l) => /not submitting again/.test(l.msg))).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it('an answer lost after Slurm accepted the job: the retry adopts it, one job exists', async () => {
    const proxy = await startFlakyProxy(sim.url);
    try {
      const client = await connect({}, ALICE_TOKEN, proxy.url);
      proxy.dropAnswerOnce((r) => r.method === 'POST');
      const result = await client.submit(spec({ name: 'lost-answer' }), 'lost-1');
      expect(result.adopted).toBe(true);
      const submits = proxy.requests.filter((r) => r.method === 'POST');
      expect(submits).toHaveLength(1);
      const history = await client.listAccountingJobs({ jobNames: ['lost-answer'] });
      expect(history.data.map((j) => j.job_id)).toEqual([result.job_id]);
    } finally {
      await proxy.close();
    }
  });
});
