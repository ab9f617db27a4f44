import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, cleanEnv, runCli as runProcess } from '../../helpers/cli-process.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, giveToJobUser, READONLY_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';

/**
 * `schedflow sched …` run the way a user runs it: a separate Node process (the run's build of
 * src/cli.ts, and through tsx for the entry point's own test), against one in-process
 * simulator, checking stdout, stderr and the exit code.
 */

let sim: TestSim;
let dir: string;
let aliceTokenFile: string;
let readonlyTokenFile: string;

/** Runs `schedflow <args>` in `dir`; resolves when it exits (or is killed at the timeout). */
function runCli(args: string[], { timeoutMs = 20_000, viaTsx = false } = {}): Promise<CliResult> {
  return runProcess(args, { cwd: dir, env: cleanEnv(), timeoutMs, viaTsx });
}

/** `schedflow sched --url <sim> --token-file <alice> --log-level error <args>`. */
function sched(args: string[], options: { token?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  const tokenFile = options.token ?? aliceTokenFile;
  return runCli(['sched', '--url', sim.url, '--token-file', tokenFile, '--log-level', 'error', ...args], options);
}

/** Expects a clean success: exit 0 and nothing on stderr. */
function ok(result: CliResult): string {
  expect(result.stderr, `stdout: ${result.stdout}`).toBe('');
  expect(result.code).toBe(0);
  return result.stdout;
}

function writeJobFile(name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

function writeTokenFile(name: string, token: string, mode: number): string {
  const file = join(dir, name);
  writeFileSync(file, `${token}\n`);
  chmodSync(file, mode);
  return file;
}

const SUBMITTED =
  /^submitted job (\d+) \(marker (\S+): not a request of the daemon, which does not follow this job; schedflow jobs submit queues one it follows\)\n$/;

function parseSubmitted(stdout: string): { jobId: number; requestId: string } {
  const match = SUBMITTED.exec(stdout);
  expect(match, stdout).not.toBeNull();
  return { jobId: Number(match?.[1]), requestId: String(match?.[2]) };
}

/** Rows of a `jobsTable` (columns are separated by at least two spaces), keyed by header. */
function parseTable(stdout: string): Record<string, string>[] {
  const lines = stdout.split('\n').filter((l) => l !== '' && !l.startsWith('('));
  const [header, ...rows] = lines.map((l) => l.split(/ {2,}/));
  return rows.map((cells) => Object.fromEntries((header ?? []).map((h, i) => [h, cells[i] ?? ''])));
}

async function controllerState(jobId: number): Promise<string | undefined> {
  const res = await http(`${sim.url}/sched/v0.0.44/job/${jobId}`, { headers: bearer(ALICE_TOKEN) });
  const job = (res.json as { jobs?: { job_state?: string[] }[] } | undefined)?.jobs?.[0];
  return job?.job_state?.[0];
}

/** A loopback port nobody listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

beforeAll(async () => {
  sim = await startSim();
  dir = mkdtempSync(join(tmpdir(), 'schedflow-cli-'));
  // Its jobs write here; the files the test writes stay root's, readable by root alone.
  giveToJobUser(dir);
  aliceTokenFile = writeTokenFile('alice.token', ALICE_TOKEN, 0o600);
  readonlyTokenFile = writeTokenFile('readonly.token', READONLY_TOKEN, 0o600);
});

afterAll(async () => {
  await sim?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('schedflow sched: connection and versions', () => {
  it('the entry point runs under tsx (--help loads every command); --version loads none', async () => {
    // The overall help loads every command's module, so all of them compile under tsx: seconds
    // of tsx's work, more on a loaded machine. The file's first test, it runs while the whole
    // run is starting: the build's --help too was once killed at the usual 20 s (load 12).
    const [tsx, built, version] = await Promise.all([
      runCli(['--help'], { viaTsx: true, timeoutMs: 60_000 }),
      runCli(['--help'], { timeoutMs: 60_000 }),
      runCli(['--version'], { timeoutMs: 60_000 }),
    ]);
    expect(ok(tsx)).toMatch(/^Usage: schedflow /);
    for (const command of ['start', 'jobs', 'runs', 'tokens', 'pipelines', 'sched', 'sim', 'setup']) {
      expect(tsx.stdout).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    }
    expect(ok(built)).toBe(tsx.stdout);
    expect(ok(version)).toMatch(/^\d+\.\d+\.\d+\n$/);
  }, 90_000);

  it('ping prints ok, the URL and the API version in use; --json works before and after the subcommand', async () => {
    const [text, jsonBefore, jsonAfter] = await Promise.all([
      sched(['ping']),
      sched(['--json', 'ping']),
      sched(['ping', '--json']),
    ]);
    expect(ok(text)).toMatch(
      new RegExp(`^ok: ${sim.url.replace(/[.]/g, '\\.')} answered in \\d+ ms \\(API v0\\.0\\.44\\)\\n$`),
    );
    for (const result of [jsonBefore, jsonAfter]) {
      const body = JSON.parse(ok(result)) as Record<string, unknown>;
      expect(body).toEqual({ ok: true, latencyMs: expect.any(Number), version: 'v0.0.44' });
    }
  });

  it('versions lists v0.0.42..44 and marks the one in use; --api-version pins another', async () => {
    const [latest, pinned, json] = await Promise.all([
      sched(['versions']),
      sched(['--api-version', 'v0.0.42', 'versions']),
      sched(['--json', 'versions']),
    ]);
    expect(ok(latest)).toBe('v0.0.42\nv0.0.43\nv0.0.44  (in use)\n');
    expect(ok(pinned)).toBe('v0.0.42  (in use)\nv0.0.43\nv0.0.44\n');
    expect(JSON.parse(ok(json))).toEqual({ supported: ['v0.0.42', 'v0.0.43', 'v0.0.44'], inUse: 'v0.0.44' });
  });
});

// Several commands each, every one a process that connects (the profile check's authenticated
// request included) and waits out the proxy's cache: 3 to 9 s alone, past 30 s in a loaded suite.
describe('schedflow sched: submitting, reading and cancelling jobs', { timeout: 90_000 }, () => {
  it('submit runs a YAML job; job --json shows the request marker; history lists it COMPLETED with exit 0', async () => {
    const outFile = join(dir, 'hello.out');
    const jobFile = writeJobFile(
      'job.yaml',
      [
        'name: cli-hello',
        'script: |',
        '  #!/bin/sh',
        '  echo "$GREETING from $SLURM_JOB_ID" > hello.out',
        'environment:',
        '  PATH: /usr/bin:/bin',
        '  GREETING: hello from the cli',
        `current_working_directory: ${dir}`,
        'time_limit: "0:05:00"',
        'memory_per_node: 1G',
        '',
      ].join('\n'),
    );
    const submitted = await sched(['submit', jobFile]);
    const { jobId, requestId } = parseSubmitted(ok(submitted));
    expect(requestId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

    // Global flags go before the subcommand (after it works too, see the ping test).
    const shown = JSON.parse(ok(await sched(['--json', 'job', String(jobId)]))) as {
      data: Record<string, unknown>;
      freshness: Record<string, unknown>;
    };
    expect(shown.data).toMatchObject({
      job_id: jobId,
      name: 'cli-hello',
      comment: `schedflow:${requestId}`,
      account: 'lab',
      user: 'alice',
      partition: 'debug',
      time_limit: { minutes: 5 },
      memory_per_node_mb: 1024,
      working_directory: dir,
    });
    expect(shown.freshness).toMatchObject({ stale: false });

    // The script really ran, with the environment given as a map.
    const output = await waitFor(async () => (existsSync(outFile) ? readFileSync(outFile, 'utf8') : undefined), {
      what: 'the job to write hello.out',
    });
    expect(output).toBe(`hello from the cli from ${jobId}\n`);

    // Accounting answers are cached for 2 s: poll until the record shows the end.
    const row = await waitFor(
      async () => {
        const rows = parseTable(ok(await sched(['history', '--since', '1h'])));
        const found = rows.find((r) => r.JOBID === String(jobId));
        return found?.STATE === 'COMPLETED' ? found : undefined;
      },
      { what: `job ${jobId} COMPLETED in history`, timeoutMs: 15_000, intervalMs: 300 },
    );
    expect(row).toMatchObject({ NAME: 'cli-hello', ACCOUNT: 'lab', USER: 'alice', EXIT: '0' });

    const history = JSON.parse(ok(await sched(['--json', 'history', '--since', '1h', '--name', 'cli-hello']))) as {
      jobs: Record<string, unknown>[];
    };
    expect(history.jobs).toHaveLength(1);
    expect(history.jobs[0]).toMatchObject({
      source: 'accounting',
      job_id: jobId,
      state: 'COMPLETED',
      exit_code: 0,
      comment: `schedflow:${requestId}`,
    });
  });

  it('submit --request-id twice makes one job; the second finds it', async () => {
    const jobFile = writeJobFile('idem.yaml', 'name: cli-idem\nscript: "#!/bin/sh\\ntrue\\n"\n');
    const requestId = `req-${Date.now()}`;
    const first = parseSubmitted(ok(await sched(['submit', '--request-id', requestId, jobFile])));
    expect(first.requestId).toBe(requestId);
    // Immediately: the proxy's cached listing predates the first job, so the lookup must wait it out.
    const second = await sched(['submit', '--request-id', requestId, jobFile]);
    expect(ok(second)).toMatch(
      new RegExp(`^already submitted as job ${first.jobId} \\(marker ${requestId}: not a request`),
    );
    const asJson = JSON.parse(ok(await sched(['--json', 'submit', '--request-id', requestId, jobFile])));
    expect(asJson).toMatchObject({ job_id: first.jobId, adopted: true, marker: requestId, tracked: false });

    const listing = JSON.parse(ok(await sched(['--json', 'jobs']))) as { jobs: Record<string, unknown>[] };
    const named = listing.jobs.filter((j) => j.name === 'cli-idem');
    expect(named.map((j) => j.job_id)).toEqual([first.jobId]);
    expect(named[0]?.comment).toBe(`schedflow:${requestId}`);
  });

  it('cancel ends a running job; cancelling it again is Slurm error 2021, an unknown job 2017', async () => {
    const jobFile = writeJobFile('sleeper.yaml', 'name: cli-sleeper\nscript: "#!/bin/sh\\nsleep 30\\n"\n');
    const { jobId } = parseSubmitted(ok(await sched(['submit', jobFile])));
    await waitFor(async () => ((await controllerState(jobId)) === 'RUNNING' ? true : undefined), {
      what: `job ${jobId} RUNNING`,
    });

    expect(ok(await sched(['cancel', String(jobId)]))).toBe(`cancelled job ${jobId}\n`);

    const again = await sched(['cancel', String(jobId)]);
    expect(again.code).toBe(3);
    expect(again.stdout).toBe('');
    expect(again.stderr).toContain(`cancel of job ${jobId} failed`);
    expect(again.stderr).toContain('Slurm error 2021');

    const unknown = await sched(['cancel', '999999']);
    expect(unknown.code).toBe(3);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr).toContain('cancel of job 999999 failed');
    expect(unknown.stderr).toContain('Slurm error 2017');

    await waitFor(async () => ((await controllerState(jobId)) === 'CANCELLED' ? true : undefined), {
      what: `job ${jobId} CANCELLED`,
    });
  });

  it('jobs prints a table: header row JOBID …, one row per job, a count line', async () => {
    const res = await http(`${sim.url}/sched/v0.0.44/job/submit`, {
      method: 'POST',
      headers: bearer(ALICE_TOKEN),
      body: {
        job: {
          name: 'cli-table',
          script: '#!/bin/sh\ntrue\n',
          current_working_directory: dir,
          environment: ['PATH=/usr/bin:/bin'],
        },
      },
    });
    expect(res.status, res.text).toBe(200);
    const jobId = (res.json as { job_id: number }).job_id;
    // The listing is cached for 2 s: poll until it includes the new job.
    const stdout = await waitFor(
      async () => {
        const out = ok(await sched(['jobs']));
        return parseTable(out).some((r) => r.JOBID === String(jobId)) ? out : undefined;
      },
      { what: `job ${jobId} in the jobs table`, timeoutMs: 10_000, intervalMs: 300 },
    );
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^JOBID {2}NAME +STATE +REASON +PARTITION +ACCOUNT +USER +SUBMITTED +ELAPSED +EXIT$/);
    expect(lines.at(-1)).toMatch(/^\(\d+ jobs, as of \d+ s ago\)$/);
    const rows = parseTable(stdout);
    expect(rows.length).toBe(lines.length - 2);
    expect(rows.find((r) => r.JOBID === String(jobId))).toMatchObject({
      NAME: 'cli-table',
      PARTITION: 'debug',
      ACCOUNT: 'lab',
      USER: 'alice',
    });
  });

  it('job 999999 exits 3 with a not-found message', async () => {
    const result = await sched(['job', '999999']);
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe('schedflow: no job 999999 in the controller or in accounting\n');
  });
});

describe('schedflow sched: errors and exit codes', () => {
  it('an invalid job file exits 2 naming file:line:col of each problem', async () => {
    writeJobFile('bad.yaml', 'name: bad\nscript: echo hi\ntasks: two\n');
    // A relative path, as a user types it: the messages use the name as given.
    const result = await sched(['submit', 'bad.yaml']);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('bad.yaml:2:9: script: the script must start with an interpreter line');
    expect(result.stderr).toContain('bad.yaml:3:8: tasks:');
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it('a job file that does not exist exits 2 without a stack trace', async () => {
    const result = await sched(['submit', 'nope.yaml']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('schedflow: nope.yaml: cannot read: no such file\n');
  });

  it('a token file other users can read exits 2 and says chmod 600', async () => {
    const open = writeTokenFile('open.token', ALICE_TOKEN, 0o644);
    const result = await sched(['jobs'], { token: open });
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`refusing token file ${open}`);
    expect(result.stderr).toContain('chmod 600');
  });

  it('submitting for another account than the token is bound to exits 3 (account restriction)', async () => {
    const jobFile = writeJobFile('other.yaml', 'name: cli-other\nscript: "#!/bin/sh\\ntrue\\n"\n');
    const result = await sched(['--account', 'other', 'submit', jobFile]);
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('account restriction');
    expect(result.stderr).toContain('may only submit to account "lab", not "other"');
  });

  it('a read-only token cannot submit: exit 3 naming the missing scope', async () => {
    const jobFile = writeJobFile('ro.yaml', 'name: cli-ro\nscript: "#!/bin/sh\\ntrue\\n"\n');
    const result = await sched(['submit', jobFile], { token: readonlyTokenFile });
    expect(result.code).toBe(3);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('scope');
    expect(result.stderr).toContain('sched:jobs:manage');
  });

  it('a URL where nothing listens exits 4 after the retries', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const result = await runCli(
      ['sched', '--url', url, '--token-file', aliceTokenFile, '--log-level', 'error', 'jobs'],
      { timeoutMs: 30_000 },
    );
    expect(result.code).toBe(4);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(`schedflow: cannot reach the scheduler at ${url} (ECONNREFUSED)\n`);
  }, 40_000);

  it('--api-version v0.0.41 exits 2 naming the supported versions', async () => {
    const result = await sched(['--api-version', 'v0.0.41', 'ping']);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('v0.0.41');
    expect(result.stderr).toContain('v0.0.42, v0.0.43, v0.0.44');
  });

  it('no --url and a config folder without profiles exits 2 asking for a profile', async () => {
    const empty = join(dir, 'empty-config');
    mkdirSync(empty, { recursive: true });
    const result = await runCli(['sched', '--config', empty, '--log-level', 'error', 'ping']);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`no scheduler profile in ${join(empty, 'profiles')}`);
    expect(result.stderr).toContain('--url');
  });

  it('a profile in <config>/profiles is used when there is no --url', async () => {
    const profiles = join(dir, 'cfg', 'profiles');
    mkdirSync(profiles, { recursive: true });
    writeFileSync(
      join(profiles, 'lab.yaml'),
      `url: ${sim.url}\nauth:\n  type: bearer\n  tokenFile: ${aliceTokenFile}\naccount: lab\n`,
    );
    const config = join(dir, 'cfg');
    // ping is anonymous; jobs proves the profile's token file is used.
    const [ping, jobs] = await Promise.all([
      runCli(['sched', '--config', config, '--log-level', 'error', 'ping']),
      runCli(['sched', '--config', config, '--log-level', 'error', '--json', 'jobs']),
    ]);
    expect(ok(ping)).toMatch(/^ok: .* \(API v0\.0\.44\)\n$/);
    const listing = JSON.parse(ok(jobs)) as { jobs: { account: string }[] };
    expect(listing.jobs.length).toBeGreaterThan(0);
    expect(new Set(listing.jobs.map((j) => j.account))).toEqual(new Set(['lab']));
  });
});
