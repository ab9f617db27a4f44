import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { apiClient } from '../../helpers/api.js';
import { type CliResult, REPO, untilEnd } from '../../helpers/cli-process.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { type RecordedRequest, startFlakyProxy } from '../../helpers/flaky-proxy.js';

/**
 * The examples docs/http-api.md shows (examples/python/submit_and_wait.py with `requests`,
 * examples/shell/submit-and-wait.sh with curl and jq), run as a reader would run them against
 * a daemon on the simulator: a job to its end, a 429 waited out and an answer lost on the way
 * (retried with the same Idempotency-Key: one job), a refused field printed and not sent again.
 */

const env = daemonTestEnv();

interface Example {
  name: string;
  command: string;
  args: string[];
}

/**
 * The first python3 that has `requests`: the PATH's, else Debian's (test/setup.sh installs
 * python3-requests for it, which a pyenv or venv python3 first on the PATH does not see).
 */
const PYTHON =
  ['python3', '/usr/bin/python3'].find((python) => spawnSync(python, ['-c', 'import requests']).status === 0) ??
  'python3';

const EXAMPLES: Example[] = [
  { name: 'python', command: PYTHON, args: [join(REPO, 'examples/python/submit_and_wait.py')] },
  // Run by its path, as the docs show it: its #! line and its mode are part of the example.
  { name: 'shell', command: join(REPO, 'examples/shell/submit-and-wait.sh'), args: [] },
];

function runExample(example: Example, url: string, token: string, extraArgs: string[] = []): Promise<CliResult> {
  const child = spawn(example.command, [...example.args, ...extraArgs], {
    env: { ...process.env, SCHEDFLOW_URL: url, SCHEDFLOW_TOKEN: token },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return untilEnd(child, 45_000);
}

/** What the examples need, said plainly where it is missing: they are never skipped. */
function requireTool(command: string, args: string[], missing: string): void {
  const probe = spawnSync(command, args, { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(`${missing} (${command} ${args.join(' ')}: ${probe.error?.message ?? probe.stderr.trim()})`);
  }
}

beforeAll(() => {
  requireTool(
    PYTHON,
    ['-c', 'import requests'],
    'the Python example needs python3 with requests: run `bash test/setup.sh` (Debian: apt-get install python3-requests) or `pip install requests`',
  );
  requireTool('jq', ['--version'], 'the shell example needs jq: run `bash test/setup.sh` (Debian: apt-get install jq)');
  requireTool('curl', ['--version'], 'the shell example needs curl (Debian: apt-get install curl)');
});

const isSubmit = (r: RecordedRequest) => r.method === 'POST' && r.url === '/api/v1/jobs';
const FINAL = /^([0-9a-f-]{36}) (\S+) exit_code=(\S+)\n$/;

describe.each(EXAMPLES)('the $name example of docs/http-api.md', (example) => {
  it('submits the hello job, waits for its end and prints it: exit 0', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);

    const run = await runExample(example, api.url, token);
    expect(run.stderr).toContain('submitted ');
    expect(run.code, run.stderr).toBe(0);
    const [, id, state, exitCode] = FINAL.exec(run.stdout) ?? [];
    expect([state, exitCode]).toEqual(['completed', '0']);

    // What it printed is what the daemon recorded.
    const shown = await api.call('GET', `/api/v1/jobs/${id}`, { token });
    expect(shown.json).toMatchObject({ id, state: 'completed', exit_code: 0, origin: 'api' });
  });

  it('waits out a 429 (Retry-After) and a lost answer, with one Idempotency-Key: one job', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const proxy = await startFlakyProxy(api.url);
    env.defer(() => proxy.close());
    // The first try is refused as the daemon refuses past its rate limit; the second makes the
    // job but its answer never arrives; the third is answered with the job the second made.
    proxy.answerOnce(isSubmit, {
      status: 429,
      headers: { 'content-type': 'application/json', 'retry-after': '1' },
      body: JSON.stringify({
        error: {
          code: 'SCHEDFLOW_ERR_RATE_LIMITED',
          message: 'rate limit of 300 requests per minute reached for this token; retry in 1 s',
        },
      }),
    });
    proxy.dropAnswerOnce(isSubmit);

    const run = await runExample(example, proxy.url, token);
    expect(run.code, run.stderr).toBe(0);
    expect(FINAL.exec(run.stdout)?.[2]).toBe('completed');
    expect(run.stderr).toContain('429 SCHEDFLOW_ERR_RATE_LIMITED');
    expect(run.stderr).toContain('(replayed)');

    const posts = proxy.requests.filter(isSubmit);
    expect(posts.map((p) => p.status)).toEqual([429, 201, 201]);
    const keys = new Set(posts.map((p) => p.headers['idempotency-key']));
    expect(keys.size).toBe(1);
    expect([...keys][0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const [first, second] = posts as [RecordedRequest, RecordedRequest];
    expect(second.atMs - first.atMs).toBeGreaterThanOrEqual(1000);

    const jobs = await api.call('GET', '/api/v1/jobs', { token });
    expect((jobs.json as { items: unknown[] }).items).toHaveLength(1);
  });

  it('prints a refused field (400) and exits 2 without sending it again', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const proxy = await startFlakyProxy(api.url);
    env.defer(() => proxy.close());
    const dir = mkdtempSync(join(tmpdir(), 'schedflow-example-'));
    env.defer(async () => rmSync(dir, { recursive: true, force: true }));
    const jobFile = join(dir, 'bad.json');
    writeFileSync(jobFile, JSON.stringify({ spec: { name: 'bad', script: 'echo no interpreter line' } }));

    const run = await runExample(example, proxy.url, token, [jobFile]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('refused: 400 SCHEDFLOW_ERR_VALIDATION');
    expect(run.stderr).toContain('  body spec.script: the script must start with an interpreter line');
    expect(proxy.requests.filter(isSubmit)).toHaveLength(1);
  });
});
