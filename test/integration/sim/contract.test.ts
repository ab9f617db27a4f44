import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../../src/lib/clock.js';
import { codecFor } from '../../../src/sched/codecs/codec.js';
import { validateAgainstSpec } from '../../../src/sched/spec-validator.js';
import { type ApiVersion, SUPPORTED_VERSIONS } from '../../../src/sched/versions.js';
import { bearer, http, rawGet, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, BOB_TOKEN, DBONLY_TOKEN, READONLY_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';
import { untilNextSecond } from '../../helpers/wall-clock.js';

type Json = Record<string, unknown>;

let sim: TestSim;
const alice = bearer(ALICE_TOKEN);

function jobBody(overrides: Json = {}): Json {
  return {
    job: {
      name: 'contract',
      script: '#!/bin/sh\nsleep 0.2\n',
      current_working_directory: sim.workDir,
      environment: ['PATH=/usr/bin:/bin'],
      ...overrides,
    },
  };
}

async function submit(overrides: Json = {}, headers = alice, version = 'v0.0.44') {
  return http(`${sim.url}/sched/${version}/job/submit`, { method: 'POST', headers, body: jobBody(overrides) });
}

function expectValid(version: ApiVersion, schema: string, body: unknown): void {
  const result = validateAgainstSpec(version, schema, body);
  expect(result.errors).toEqual([]);
}

beforeAll(async () => {
  sim = await startSim();
});

afterAll(async () => {
  await sim.stop();
});

describe('section 4: meta endpoints need no authentication', () => {
  it('GET /meta/versions/supported is a JSON array of the supported versions', async () => {
    const res = await http(`${sim.url}/meta/versions/supported`);
    expect(res.status).toBe(200);
    expect(res.json).toEqual(['v0.0.42', 'v0.0.43', 'v0.0.44']);
  });

  it('GET /meta/versions/latest is the latest version as plain text', async () => {
    const res = await http(`${sim.url}/meta/versions/latest`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toBe('v0.0.44');
  });

  it('GET /ping answers pong', async () => {
    const res = await http(`${sim.url}/ping`);
    expect(res.status).toBe(200);
    expect(res.text).toBe('pong');
  });
});

describe('section 4: every endpoint, every version, bodies valid against the spec', () => {
  const jobIds = new Map<ApiVersion, { ok: number; failed: number }>();
  const since = Math.floor(Date.now() / 1000) - 60;

  beforeAll(async () => {
    for (const version of SUPPORTED_VERSIONS) {
      const ok = await submit({ name: `ok-${version}` }, alice, version);
      const failed = await submit({ name: `fail-${version}`, script: '#!/bin/sh\nexit 3\n' }, alice, version);
      expect(ok.status).toBe(200);
      expect(failed.status).toBe(200);
      jobIds.set(version, { ok: (ok.json as Json).job_id as number, failed: (failed.json as Json).job_id as number });
    }
    // Let every job finish so listings hold completed and failed records as well.
    await waitFor(
      async () => {
        const res = await http(`${sim.url}/sched/v0.0.44/jobs/state`, { headers: alice });
        const states = (res.json as { jobs: { state: string[] }[] }).jobs.map((j) => j.state[0]);
        return states.every((s) => s !== 'RUNNING' && s !== 'PENDING') ? true : undefined;
      },
      { what: 'all contract jobs to finish' },
    );
  });

  for (const version of SUPPORTED_VERSIONS) {
    describe(version, () => {
      it('POST /sched/{v}/job/submit answers job_id (openapi_job_submit_response)', async () => {
        const res = await submit({ name: 'submit-shape' }, alice, version);
        expect(res.status).toBe(200);
        expectValid(version, 'openapi_job_submit_response', res.json);
        expect((res.json as Json).job_id).toEqual(expect.any(Number));
        expect(((res.json as Json).meta as Json).plugin).toMatchObject({ data_parser: `data_parser/${version}` });
      });

      it('GET /sched/{v}/jobs lists jobs with job_state arrays (openapi_job_info_resp)', async () => {
        const res = await http(`${sim.url}/sched/${version}/jobs`, { headers: alice });
        expect(res.status).toBe(200);
        expectValid(version, 'openapi_job_info_resp', res.json);
        const jobs = (res.json as { jobs: Json[] }).jobs;
        const ids = jobIds.get(version);
        const failed = jobs.find((j) => j.job_id === ids?.failed);
        expect(failed).toMatchObject({
          job_state: ['FAILED'],
          exit_code: { return_code: { set: true, infinite: false, number: 3 } },
        });
      });

      it('GET /sched/{v}/job/{id} returns that job; an unknown id is 404 with Slurm error 2017', async () => {
        const id = jobIds.get(version)?.ok;
        const res = await http(`${sim.url}/sched/${version}/job/${id}`, { headers: alice });
        expect(res.status).toBe(200);
        expectValid(version, 'openapi_job_info_resp', res.json);
        expect((res.json as { jobs: Json[] }).jobs[0]).toMatchObject({ job_id: id, job_state: ['COMPLETED'] });
        const missing = await http(`${sim.url}/sched/${version}/job/999999`, { headers: alice });
        expect(missing.status).toBe(404);
        expectValid(version, 'openapi_job_info_resp', missing.json);
        expect((missing.json as { errors: Json[] }).errors[0]?.error_number).toBe(2017);
      });

      it('GET /sched/{v}/jobs/state lists job ids (strings) and states, as real slurmrestd, not its document', async () => {
        const ids = jobIds.get(version);
        const res = await http(`${sim.url}/sched/${version}/jobs/state?job_id=${ids?.ok}&job_id=${ids?.failed}`, {
          headers: alice,
        });
        expect(res.status).toBe(200);
        expect((res.json as { jobs: Json[] }).jobs).toEqual([
          { job_id: String(ids?.ok), state: ['COMPLETED'] },
          { job_id: String(ids?.failed), state: ['FAILED'] },
        ]);
        // The document's CSV form: a raw comma is refused with a bare 500, an encoded one with 422.
        const csv = await http(`${sim.url}/sched/${version}/jobs/state?job_id=${ids?.ok},${ids?.failed}`, {
          headers: alice,
        });
        expect(csv).toMatchObject({ status: 500, text: 'Unspecified error' });
        const encoded = await http(`${sim.url}/sched/${version}/jobs/state?job_id=${ids?.ok}%2C${ids?.failed}`, {
          headers: alice,
        });
        expect(encoded.status).toBe(422);
        expect((encoded.json as { errors: Json[] }).errors[0]).toMatchObject({ error_number: 9000 });
      });

      it('GET /sched/{v}/jobs/state with many ids answers as slurmrestd 25.11.7: one entry per id asked, in order, up to an 80 KiB request', async () => {
        const ids = jobIds.get(version);
        // An id asked twice comes twice, in the order asked; an unknown one is left out.
        const res = await http(
          `${sim.url}/sched/${version}/jobs/state?job_id=${ids?.failed}&job_id=99999999&job_id=${ids?.ok}&job_id=${ids?.failed}`,
          { headers: alice },
        );
        expect((res.json as { jobs: Json[] }).jobs.map((j) => j.job_id)).toEqual(
          [ids?.failed, ids?.ok, ids?.failed].map(String),
        );
        // 5,000 ids of 8 digits (80 KB of URL) are read; 5,200 are past slurmrestd's 80 KiB request head.
        const many = (count: number) =>
          [ids?.ok, ...Array.from({ length: count }, (_, i) => 60_000_000 + i)].map((id) => `job_id=${id}`).join('&');
        const long = await http(`${sim.url}/sched/${version}/jobs/state?${many(5000)}`, { headers: alice });
        expect(long.status).toBe(200);
        expect((long.json as { jobs: Json[] }).jobs).toEqual([{ job_id: String(ids?.ok), state: ['COMPLETED'] }]);
        const tooLong = await http(`${sim.url}/sched/${version}/jobs/state?${many(5200)}`, { headers: alice });
        expect(tooLong).toMatchObject({ status: 500, text: 'Insane message length' });
      });

      it('DELETE /sched/{v}/job/{id} cancels (openapi_kill_job_resp); an unknown job is 200 with code 2017', async () => {
        const sub = await submit({ name: 'to-cancel', script: '#!/bin/sh\nsleep 30\n' }, alice, version);
        const id = (sub.json as Json).job_id;
        const res = await http(`${sim.url}/sched/${version}/job/${id}`, { method: 'DELETE', headers: alice });
        expect(res.status).toBe(200);
        expectValid(version, 'openapi_kill_job_resp', res.json);
        expect((res.json as Json).status).toEqual([]);
        const unknown = await http(`${sim.url}/sched/${version}/job/999999`, { method: 'DELETE', headers: alice });
        expect(unknown.status).toBe(200);
        expectValid(version, 'openapi_kill_job_resp', unknown.json);
        const status = (unknown.json as { status: { error: Json }[] }).status;
        expect(status[0]?.error).toMatchObject({ code: 2017, string: 'Invalid job id specified' });
      });

      it('GET /scheddb/{v}/jobs?start_time= returns accounting records with state.current', async () => {
        const res = await http(`${sim.url}/scheddb/${version}/jobs?start_time=${since}`, { headers: alice });
        expect(res.status).toBe(200);
        expectValid(version, 'openapi_slurmdbd_jobs_resp', res.json);
        const jobs = (res.json as { jobs: Json[] }).jobs;
        const failed = jobs.find((j) => j.job_id === jobIds.get(version)?.failed);
        expect(failed).toMatchObject({
          state: { current: ['FAILED'], reason: 'None' },
          time: { elapsed: expect.any(Number) },
        });
        expect(((res.json as Json).meta as Json).plugin).toMatchObject({ type: 'openapi/slurmdbd' });
      });

      it('GET /scheddb/{v}/job/{id} returns one accounting record', async () => {
        const id = jobIds.get(version)?.ok;
        const res = await http(`${sim.url}/scheddb/${version}/job/${id}`, { headers: alice });
        expect(res.status).toBe(200);
        expectValid(version, 'openapi_slurmdbd_jobs_resp', res.json);
        expect((res.json as { jobs: Json[] }).jobs[0]).toMatchObject({ job_id: id, state: { current: ['COMPLETED'] } });
      });

      it('GET /sched/{v}/partitions and /nodes list the simulated cluster', async () => {
        const partitions = await http(`${sim.url}/sched/${version}/partitions`, { headers: alice });
        expect(partitions.status).toBe(200);
        expectValid(version, 'openapi_partition_resp', partitions.json);
        expect((partitions.json as { partitions: Json[] }).partitions.map((p) => p.name)).toEqual([
          'debug',
          'lab-owner',
        ]);
        const nodes = await http(`${sim.url}/sched/${version}/nodes`, { headers: alice });
        expect(nodes.status).toBe(200);
        expectValid(version, 'openapi_nodes_resp', nodes.json);
        expect((nodes.json as { nodes: Json[] }).nodes[0]).toMatchObject({ cpus: 2 });
      });
    });
  }

  it('accounting filters: job_name, account, state, step (job ids)', async () => {
    const ids = jobIds.get('v0.0.43');
    const byName = await http(`${sim.url}/scheddb/v0.0.44/jobs?job_name=fail-v0.0.43`, { headers: alice });
    expect((byName.json as { jobs: Json[] }).jobs.map((j) => j.job_id)).toEqual([ids?.failed]);
    // A state query needs its window: without end_time slurmdbd ends it where it starts.
    const now = Math.floor(Date.now() / 1000);
    const byState = await http(
      `${sim.url}/scheddb/v0.0.44/jobs?state=FAILED&account=lab&start_time=${since}&end_time=${now + 60}`,
      { headers: alice },
    );
    const failedIds = (byState.json as { jobs: Json[] }).jobs.map((j) => j.job_id);
    expect(failedIds).toContain(ids?.failed);
    expect(failedIds).not.toContain(ids?.ok);
    const byId = await http(`${sim.url}/scheddb/v0.0.44/jobs?step=${ids?.ok}`, { headers: alice });
    expect((byId.json as { jobs: Json[] }).jobs.map((j) => j.job_id)).toEqual([ids?.ok]);
    const otherAccount = await http(`${sim.url}/scheddb/v0.0.44/jobs?account=other`, { headers: alice });
    expect((otherAccount.json as { jobs: Json[] }).jobs).toEqual([]);
  });

  it('start_time filters by usage: jobs that ended before it are not returned', async () => {
    const future = Math.floor(Date.now() / 1000) + 3600;
    const later = await http(`${sim.url}/scheddb/v0.0.44/jobs?job_name=ok-v0.0.44&start_time=${future}`, {
      headers: alice,
    });
    expect(later.status).toBe(200);
    expect((later.json as { jobs: Json[] }).jobs).toEqual([]);
    const earlier = await http(`${sim.url}/scheddb/v0.0.44/jobs?job_name=ok-v0.0.44&start_time=${since}`, {
      headers: alice,
    });
    expect((earlier.json as { jobs: Json[] }).jobs).toHaveLength(1);
    const bad = await http(`${sim.url}/scheddb/v0.0.44/jobs?start_time=yesterday`, { headers: alice });
    expect(bad.status).toBe(422);
    expect((bad.json as { errors: Json[] }).errors.map((e) => e.error_number)).toEqual([9202, 9000]);
  });
});

describe('section 5: authentication', () => {
  it('rejects unauthenticated requests with 401 on controller and accounting endpoints', async () => {
    for (const path of ['/sched/v0.0.44/jobs', '/scheddb/v0.0.44/jobs']) {
      const res = await http(`${sim.url}${path}`);
      expect(res.status).toBe(401);
      expect((res.json as Json).message).toMatch(/authentication required/);
    }
  });

  it('rejects a malformed Authorization header with 401', async () => {
    const res = await http(`${sim.url}/sched/v0.0.44/jobs`, { headers: { authorization: 'Bearer' } });
    expect(res.status).toBe(401);
    const basic = await http(`${sim.url}/sched/v0.0.44/jobs`, { headers: { authorization: 'Basic abc' } });
    expect(basic.status).toBe(401);
  });

  it('rejects an unknown or expired bearer token with 401', async () => {
    const res = await http(`${sim.url}/sched/v0.0.44/jobs`, { headers: bearer('not-a-token-0123456789') });
    expect(res.status).toBe(401);
    expect(res.text).not.toContain('not-a-token');
  });

  it('accepts the X-Sched-User-Name / X-Sched-User-Token pair', async () => {
    const res = await http(`${sim.url}/sched/v0.0.44/jobs`, {
      headers: { 'x-sched-user-name': 'alice', 'x-sched-user-token': ALICE_TOKEN },
    });
    expect(res.status).toBe(200);
  });

  it('rejects a header pair whose user name does not match the token, or that is incomplete', async () => {
    const wrong = await http(`${sim.url}/sched/v0.0.44/jobs`, {
      headers: { 'x-sched-user-name': 'bob', 'x-sched-user-token': ALICE_TOKEN },
    });
    expect(wrong.status).toBe(401);
    const half = await http(`${sim.url}/sched/v0.0.44/jobs`, { headers: { 'x-sched-user-token': ALICE_TOKEN } });
    expect(half.status).toBe(401);
  });

  it('serves plain slurmrestd paths (/slurm, /slurmdb) with X-SLURM-USER-NAME / X-SLURM-USER-TOKEN', async () => {
    const headers = { 'x-slurm-user-name': 'alice', 'x-slurm-user-token': ALICE_TOKEN };
    const jobs = await http(`${sim.url}/slurm/v0.0.44/jobs/`, { headers });
    expect(jobs.status).toBe(200);
    expectValid('v0.0.44', 'openapi_job_info_resp', jobs.json);
    const history = await http(`${sim.url}/slurmdb/v0.0.42/jobs/`, { headers });
    expect(history.status).toBe(200);
  });
});

describe('bodies the simulator cannot read', () => {
  const slurmrestd = { 'x-slurm-user-name': 'alice', 'x-slurm-user-token': ALICE_TOKEN };
  const post = (path: string, headers: Record<string, string>, body: string) =>
    http(`${sim.url}${path}`, { method: 'POST', headers, body });

  it("another media type than JSON: slurmrestd's 415 text after its credential check; the proxy's JSON error", async () => {
    const text = { 'content-type': 'text/plain' };
    const plain = await post('/slurm/v0.0.44/job/submit', { ...slurmrestd, ...text }, JSON.stringify(jobBody()));
    expect(plain.status).toBe(415);
    expect(plain.headers.get('content-type')).toBe('text/plain');
    expect(plain.headers.get('connection')).toBe('close');
    expect(plain.text).toBe('MIME type is unknown to any loaded plugins');
    // slurmrestd authenticates before it reads the body.
    const anonymous = await post('/slurm/v0.0.44/job/submit', text, 'x');
    expect(anonymous.status).toBe(401);
    expect(anonymous.text).toBe('Authentication failure');
    const proxy = await post('/sched/v0.0.44/job/submit', { ...alice, 'content-type': 'application/yaml' }, 'job: {}');
    expect(proxy.status).toBe(415);
    expect(proxy.json).toEqual({
      error: 'Unsupported Media Type',
      message: 'send the body as JSON, with Content-Type: application/json',
      status: 415,
    });
    const unauthenticated = await post('/sched/v0.0.44/job/submit', { 'content-type': 'application/yaml' }, 'job: {}');
    expect(unauthenticated.status).toBe(401);
  });

  it('a bare NaN, or a word where a number belongs: read as a real slurmrestd reads them (test/fixtures/differential)', async () => {
    const json = { 'content-type': 'application/json' };
    type Answer = { job_id?: number; errors: unknown[]; warnings: { source: string }[] };
    for (const [path, headers] of [
      ['/slurm/v0.0.44/job/submit', slurmrestd],
      ['/sched/v0.0.44/job/submit', alice],
    ] as const) {
      // json-c reads NaN; data_parser warns that it got a float and the job is made.
      const nan = JSON.stringify(jobBody({ tasks: 'NAN_HERE' })).replace('"NAN_HERE"', 'NaN');
      const made = await post(path, { ...headers, ...json }, nan);
      expect(made.status, path).toBe(200);
      expect((made.json as Answer).job_id).toEqual(expect.any(Number));
      expect((made.json as Answer).warnings.map((w) => w.source)).toEqual(['#/job/tasks/']);
      // A word for an integer: a warning, no job, and no error either.
      const dropped = await post(path, { ...headers, ...json }, JSON.stringify(jobBody({ tasks: 'four' })));
      expect(dropped.status, path).toBe(200);
      expect(dropped.json).toMatchObject({ errors: [], warnings: [{ source: '#/job/tasks/' }] });
      expect((dropped.json as Answer).job_id).toBeUndefined();
      // Still not JSON at all: slurmrestd's own 400.
      const broken = await post(path, { ...headers, ...json }, '{"job": ');
      expect(broken.status, path).toBe(400);
      expect(broken.text).toBe('Failure during parsing');
    }
  });
});

describe('section 5 and 7: scopes and the account restriction', () => {
  it('403 when the token lacks sched:jobs:manage for submit', async () => {
    const res = await submit({}, bearer(READONLY_TOKEN));
    expect(res.status).toBe(403);
    expect((res.json as Json).message).toMatch(/scope "sched:jobs:manage"/);
  });

  it('403 when the token lacks scheddb:read for accounting', async () => {
    const res = await http(`${sim.url}/scheddb/v0.0.44/jobs`, { headers: bearer(READONLY_TOKEN) });
    expect(res.status).toBe(403);
    expect((res.json as Json).message).toMatch(/scope "scheddb:read"/);
  });

  it('403 when the token lacks sched:read for the controller', async () => {
    const res = await http(`${sim.url}/sched/v0.0.44/jobs`, { headers: bearer(DBONLY_TOKEN) });
    expect(res.status).toBe(403);
    expect((res.json as Json).message).toMatch(/scope "sched:read"/);
  });

  it('403 when a bearer caller submits to another account', async () => {
    const res = await submit({ account: 'other' });
    expect(res.status).toBe(403);
    expect((res.json as Json).message).toMatch(/account restriction.*"lab".*"other"/);
  });

  it("a submission without account is charged to the token's account", async () => {
    const res = await submit({ name: 'no-account' });
    const id = (res.json as Json).job_id;
    const job = await http(`${sim.url}/sched/v0.0.44/job/${id}`, { headers: alice });
    expect((job.json as { jobs: Json[] }).jobs[0]?.account).toBe('lab');
  });

  it('403 when a bearer caller cancels a job of another account', async () => {
    const res = await submit({ name: 'alice-job', script: '#!/bin/sh\nsleep 5\n' });
    const id = (res.json as Json).job_id;
    const cancel = await http(`${sim.url}/sched/v0.0.44/job/${id}`, { method: 'DELETE', headers: bearer(BOB_TOKEN) });
    expect(cancel.status).toBe(403);
    expect((cancel.json as Json).message).toMatch(/account restriction.*"lab"/);
  });

  it('a partition that does not allow the account: Slurm refuses with HTTP 500 and error 2045', async () => {
    const res = await submit({ partition: 'lab-owner' }, bearer(BOB_TOKEN));
    expect(res.status).toBe(500);
    expectValid('v0.0.44', 'openapi_job_submit_response', res.json);
    expect((res.json as { errors: Json[] }).errors[0]).toMatchObject({
      error_number: 2045,
      error: 'Invalid account or account/partition combination specified',
    });
  });

  it('Slurm takes a script without an interpreter line (it fails to exec: exit 8) and refuses a job larger than the node', async () => {
    const noShebang = await submit({ script: 'echo hi\n' });
    expect(noShebang.status).toBe(200);
    const id = (noShebang.json as Json).job_id;
    const ended = await waitFor(
      async () => {
        const res = await http(`${sim.url}/sched/v0.0.44/job/${id}`, { headers: alice });
        const job = (res.json as { jobs: Json[] }).jobs[0];
        return (job?.job_state as string[] | undefined)?.[0] === 'FAILED' ? job : undefined;
      },
      { what: 'the script without #! to fail' },
    );
    // slurmstepd's execve() fails with ENOEXEC, and the errno is the exit code.
    expect(ended.exit_code).toMatchObject({ return_code: { number: 8 } });
    const tooBig = await submit({ tasks: 3 });
    expect(tooBig.status).toBe(500);
    expect((tooBig.json as { errors: Json[] }).errors[0]?.error_number).toBe(2005);
    const tooMuchMemory = await submit({ memory_per_node: { set: true, number: 999_999 } });
    expect((tooMuchMemory.json as { errors: Json[] }).errors[0]?.error_number).toBe(2014);
    const badPartition = await submit({ partition: 'nope' });
    expect((badPartition.json as { errors: Json[] }).errors[0]?.error_number).toBe(2000);
  });
});

describe('section 7 and 9: versions', () => {
  it('400 with a message for an unsupported version', async () => {
    const res = await http(`${sim.url}/sched/v0.0.41/jobs`, { headers: alice });
    expect(res.status).toBe(400);
    expect((res.json as Json).message).toMatch(/unsupported API version "v0.0.41".*v0.0.42, v0.0.43, v0.0.44/);
    const db = await http(`${sim.url}/scheddb/v9/jobs`, { headers: alice });
    expect(db.status).toBe(400);
  });

  it('latest resolves to v0.0.44', async () => {
    const res = await http(`${sim.url}/sched/latest/jobs`, { headers: alice });
    expect(res.status).toBe(200);
    expect(((res.json as Json).meta as Json).plugin).toMatchObject({ data_parser: 'data_parser/v0.0.44' });
  });
});

describe('section 4 caching', () => {
  it('GET answers carry Cache-Control, Date, Expires and Age', async () => {
    const res = await http(`${sim.url}/sched/v0.0.44/partitions`, { headers: alice });
    expect(res.headers.get('cache-control')).toMatch(/max-age=2\b/);
    const date = Date.parse(res.headers.get('date') ?? '');
    const expires = Date.parse(res.headers.get('expires') ?? '');
    expect(expires - date).toBe(2000);
    expect(Number(res.headers.get('age'))).toBeGreaterThanOrEqual(0);
  });

  it('the meta answers and /ping, which the proxy makes itself, carry them too, always fresh', async () => {
    for (const path of ['/meta/versions/supported', '/meta/versions/latest', '/ping']) {
      const res = await http(`${sim.url}${path}`);
      expect(res.headers.get('cache-control'), path).toMatch(/max-age=\d+/);
      const maxAge = Number(/max-age=(\d+)/.exec(res.headers.get('cache-control') ?? '')?.[1]);
      expect(maxAge, path).toBeGreaterThanOrEqual(2);
      expect(maxAge, path).toBeLessThanOrEqual(60);
      const date = Date.parse(res.headers.get('date') ?? '');
      expect(Date.parse(res.headers.get('expires') ?? '') - date, path).toBe(maxAge * 1000);
      expect(res.headers.get('age'), path).toBe('0');
    }
  });

  it('a repeated query within the lifetime returns the cached (slightly stale) answer', async () => {
    // A simulator whose proxy clock the test moves to the end of the lifetime.
    const clock = new ManualClock();
    const clocked = await startSim({}, false, [], clock);
    try {
      const url = `${clocked.url}/scheddb/v0.0.44/jobs?job_name=cache-probe`;
      const first = await http(url, { headers: alice });
      expect((first.json as { jobs: Json[] }).jobs).toEqual([]);
      const submitted = await http(`${clocked.url}/sched/v0.0.44/job/submit`, {
        method: 'POST',
        headers: alice,
        body: { job: { ...(jobBody().job as Json), name: 'cache-probe', current_working_directory: clocked.workDir } },
      });
      expect(submitted.status, submitted.text).toBe(200);
      await clock.advance(1999);
      const second = await http(url, { headers: alice });
      expect((second.json as { jobs: Json[] }).jobs).toEqual([]);
      expect(second.headers.get('date')).toBe(first.headers.get('date'));
      expect(Number(second.headers.get('age'))).toBe(1);
      // Accounting's window ends at now, exclusive, in whole seconds of real time: the job is in
      // it from the next second on.
      await untilNextSecond();
      await clock.advance(1);
      const fresh = await http(url, { headers: alice });
      expect((fresh.json as { jobs: Json[] }).jobs).toHaveLength(1);
      expect(Number(fresh.headers.get('age'))).toBe(0);
    } finally {
      await clocked.stop();
    }
  });
});

describe('section 4 caching: stale-if-error', () => {
  // A simulator of their own for the cache's tests, whose clock they move past the 2 s lifetime
  // (the proxy's cache and rate limit read it; the jobs run in real time).
  const clock = new ManualClock();
  let clocked: TestSim;
  const url = () => `${clocked.url}/sched/v0.0.44/nodes`;
  const upstreamOf = (target: TestSim) => (state: Json) =>
    http(`${target.url}/_sim/upstream`, { headers: target.admin, method: 'PUT', body: state }).then((r) =>
      expect(r.status).toBe(200),
    );
  const setUpstream = (state: Json) => upstreamOf(sim)(state);
  const setClockedUpstream = (state: Json) => upstreamOf(clocked)(state);

  beforeAll(async () => {
    clocked = await startSim({}, false, [], clock);
  });

  afterAll(async () => {
    await setUpstream({ slurmctld: 'up', slurmdbd: 'up' });
    await clocked.stop();
  });

  it('without the directive, an unreachable scheduler gives 500', async () => {
    await http(url(), { headers: alice });
    await setClockedUpstream({ slurmctld: 'down' });
    await clock.advance(2100);
    const res = await http(url(), { headers: alice });
    expect(res.status).toBe(500);
    expect((res.json as Json).message).toMatch(/unreachable/);
    await setClockedUpstream({ slurmctld: 'up' });
  });

  it('with stale-if-error=300, the last cached answer is served past its expiry, with its age', async () => {
    const first = await http(url(), { headers: alice });
    expect(first.status).toBe(200);
    await setClockedUpstream({ slurmctld: 'down' });
    await clock.advance(2600);
    const stale = await http(url(), { headers: { ...alice, 'cache-control': 'stale-if-error=300' } });
    expect(stale.status).toBe(200);
    expect(stale.text).toBe(first.text);
    expect(Number(stale.headers.get('age'))).toBeGreaterThanOrEqual(2);
    expect(Date.parse(stale.headers.get('expires') ?? '')).toBeLessThan(clock.now());
    await setClockedUpstream({ slurmctld: 'up' });
  });

  it('stale data is not served beyond the window the request allows', async () => {
    await http(url(), { headers: alice });
    await setClockedUpstream({ slurmctld: 'down' });
    await clock.advance(3600);
    const res = await http(url(), { headers: { ...alice, 'cache-control': 'stale-if-error=1' } });
    expect(res.status).toBe(500);
    await setClockedUpstream({ slurmctld: 'up' });
  });

  it('submissions fail with 500 while the scheduler is unreachable; accounting has its own switch', async () => {
    await setUpstream({ slurmctld: 'down' });
    const res = await submit();
    expect(res.status).toBe(500);
    await setUpstream({ slurmctld: 'up', slurmdbd: 'down' });
    const history = await http(`${sim.url}/scheddb/v0.0.44/jobs?job_name=never-cached`, { headers: alice });
    expect(history.status).toBe(500);
    const controller = await http(`${sim.url}/sched/v0.0.44/jobs?update_time=1`, { headers: alice });
    expect(controller.status).toBe(200);
  });

  it('the admin switch answers loopback callers only and validates its input', async () => {
    const bad = await http(`${sim.url}/_sim/upstream`, {
      headers: sim.admin,
      method: 'PUT',
      body: { slurmctld: 'maybe' },
    });
    expect(bad.status).toBe(400);
  });

  it('the admin routes refuse another host however the path is spelled (the router decodes it)', async () => {
    // A request from this machine's own non-loopback address is, to the server, another host.
    const external = Object.values(networkInterfaces())
      .flat()
      .find((a) => a?.family === 'IPv4' && !a.internal)?.address;
    if (!external) throw new Error('this test needs a non-loopback IPv4 address on the machine');
    const open = await startSim({ host: '0.0.0.0' });
    try {
      const port = Number(new URL(open.url).port);
      const spellings = ['/_sim/upstream', '/%5Fsim/upstream', '/%5fsim/upstream', '/_sim/%75pstream', '/_sim/stats'];
      for (const path of spellings) {
        // The loopback answer shows each spelling does reach an admin route.
        expect((await rawGet('127.0.0.1', port, path, { headers: open.admin })).status, `${path} from loopback`).toBe(
          200,
        );
        const remote = await rawGet(external, port, path, { localAddress: external, headers: open.admin });
        expect(remote.status, `${path} from ${external}`).toBe(403);
        expect(remote.body).toContain('loopback clients only');
      }
    } finally {
      await open.stop();
    }
  });
});

describe('section 7 and 8: per-IP rate limit', () => {
  it('429 with Retry-After once the bucket is empty, and service again after it refills', async () => {
    const clock = new ManualClock();
    const limited = await startSim({ rateLimit: { capacity: 3, refillPerSecond: 1 } }, false, [], clock);
    try {
      const statuses: number[] = [];
      let retryAfter: string | null = null;
      for (let i = 0; i < 5; i++) {
        const res = await http(`${limited.url}/ping`);
        statuses.push(res.status);
        if (res.status === 429) retryAfter = res.headers.get('retry-after');
      }
      expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
      expect(statuses.slice(3)).toEqual([429, 429]);
      expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
      await clock.advance(1100);
      expect((await http(`${limited.url}/ping`)).status).toBe(200);
    } finally {
      await limited.stop();
    }
  });
});

describe('accounting: the MaxRSS the simulator measures', () => {
  it("reports a script's real peak memory as its batch step's tres.requested.max mem, in bytes", async () => {
    const script = '#!/bin/sh\npython3 -c "b=bytearray(60*1024*1024); import time; time.sleep(1.5)"\n';
    const memory_per_node = { set: true, infinite: false, number: 256 };
    const sub = await submit({ name: 'peak-memory', script, memory_per_node });
    expect(sub.status).toBe(200);
    const id = (sub.json as Json).job_id as number;
    const record = await waitFor(
      async () => {
        const res = await http(`${sim.url}/scheddb/v0.0.44/job/${id}`, { headers: alice });
        const body = res.json as { jobs: { state: { current: string[] } }[] };
        const [state] = body.jobs[0]?.state.current ?? ['PENDING'];
        return state === 'PENDING' || state === 'RUNNING' ? undefined : body;
      },
      { what: 'the peak-memory job to end' },
    );
    expectValid('v0.0.44', 'openapi_slurmdbd_jobs_resp', record);
    const job = codecFor('v0.0.44').decodeAccountingJob(record.jobs[0]);
    expect(job.state).toBe('COMPLETED');
    // 60 MiB of bytearray plus the interpreter; well under what the job asked for.
    expect(job.peak_memory_mb).toBeGreaterThanOrEqual(60);
    expect(job.peak_memory_mb).toBeLessThan(job.memory_per_node_mb ?? 0);
    expect(job.memory_per_node_mb).toBe(256);
  });
});

describe('an OOM kill, as real Slurm with task/cgroup reports it', () => {
  const real = (name: string) =>
    (
      JSON.parse(readFileSync(new URL(`../../fixtures/real-slurm-25.11/${name}`, import.meta.url), 'utf8')) as {
        jobs: Json[];
      }
    ).jobs[0] as Json;

  it('ends OUT_OF_MEMORY, reason OutOfMemory, exit code SIGNALED 125 in the job and its batch step', async () => {
    const script = '#!/bin/sh\npython3 -c "b=bytearray(100*1024*1024); import time; time.sleep(15)"\n';
    const memory_per_node = { set: true, infinite: false, number: 32 };
    const sub = await submit({ name: 'oom', script, memory_per_node });
    expect(sub.status).toBe(200);
    const id = (sub.json as Json).job_id as number;
    const controller = await waitFor(
      async () => {
        const res = await http(`${sim.url}/sched/v0.0.44/job/${id}`, { headers: alice });
        const job = (res.json as { jobs: Json[] }).jobs[0];
        return (job?.job_state as string[] | undefined)?.includes('OUT_OF_MEMORY') ? job : undefined;
      },
      { what: 'the oom job to be killed' },
    );
    const captured = real('oom_job_v0.0.44.json');
    expect(controller.job_state).toEqual(captured.job_state);
    expect(controller.state_reason).toBe(captured.state_reason);
    expect(controller.exit_code).toEqual(captured.exit_code);

    const res = await http(`${sim.url}/scheddb/v0.0.44/job/${id}`, { headers: alice });
    expectValid('v0.0.44', 'openapi_slurmdbd_jobs_resp', res.json);
    const record = (res.json as { jobs: Json[] }).jobs[0] as Json;
    const recorded = real('oom_slurmdb_job_v0.0.44.json');
    expect(record.state).toEqual(recorded.state);
    expect(record.exit_code).toEqual(recorded.exit_code);
    const batch = (job: Json) => (job.steps as Json[]).map((step) => [step.state, step.exit_code]);
    expect(batch(record)).toEqual(batch(recorded));

    expect(codecFor('v0.0.44').decodeAccountingJob(record)).toMatchObject({
      state: 'OUT_OF_MEMORY',
      exit_code: null,
      signal: { id: 125, name: '125' },
    });
  });
});
