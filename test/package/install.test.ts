import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../helpers/cli-process.js';
import { freePort } from '../helpers/free-port.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';

/**
 * The package as an administrator gets it: `npm pack` (its prepack and prepare: a clean build
 * of dist/), `npm install -g` of the tarball into a prefix of its own (the dependencies only,
 * better-sqlite3 built for this Node or its prebuilt binary), then the installed `schedflow`
 * run from `/`, as the unprivileged user a service runs as, with nothing of the repository:
 * `--version`, and `start --config DIR --data-dir DIR` with a job through it.
 *
 * Its own tier (`npm run test:package`, run by CI after `npm test`): the install compiles
 * better-sqlite3 where its prebuilt binary cannot be downloaded (this workplace), minutes of
 * CPU, too long for `npm test`. The registry is asked only for what npm's cache lacks
 * (`--prefer-offline`).
 */

/** Run as root, the daemon is started as this unprivileged user (test/setup.sh makes it), as the unit's User=. */
const SERVICE_USER = 'schedflow-job';
const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { name: string; version: string };

let root: string;
let prefix: string;
let installed: string;
let files: string[];
let redis: TestRedis | undefined;
const children = new Set<ChildProcess>();

interface Ran {
  status: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a command to its end without blocking this process: a synchronous npm install of
 * minutes held the test worker's event loop, and vitest's worker timed out on its reports.
 */
function run(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    child.on('error', reject);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      children.delete(child);
      if (signal) stderr += `\n[${command} killed by ${signal}; timeout ${options.timeoutMs} ms]`;
      resolve({ status, stdout, stderr });
    });
  });
}

/** This environment without npm's own variables: those of `npm run` would steer the npm started here (its prefix, its scripts). */
function npmEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
}

/** The command line that runs `argv` as the service user when this test is root; as is otherwise. */
function asServiceUser(argv: string[]): string[] {
  if (process.getuid?.() !== 0) return argv;
  const uid = execFileSync('id', ['-u', SERVICE_USER], { encoding: 'utf8' }).trim();
  const gid = execFileSync('id', ['-g', SERVICE_USER], { encoding: 'utf8' }).trim();
  // setpriv execs the command itself (runuser would stay between): the signal reaches the daemon.
  return ['setpriv', `--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--', ...argv];
}

/** Gives `path` to the service user when this test is root, as `install -o schedflow` would. */
function ownedByServiceUser(path: string): void {
  if (process.getuid?.() !== 0) return;
  const uid = Number(execFileSync('id', ['-u', SERVICE_USER], { encoding: 'utf8' }));
  const gid = Number(execFileSync('id', ['-g', SERVICE_USER], { encoding: 'utf8' }));
  chownSync(path, uid, gid);
}

/** Only what a service has: the installed command's folder first, no variable of the repository's. */
function serviceEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return {
    PATH: `${join(prefix, 'bin')}:/usr/local/bin:/usr/bin:/bin`,
    LANG: 'C.UTF-8',
    ...extra,
  };
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'schedflow-package-'));
  // The service user must reach the installed package below it.
  chmodSync(root, 0o755);
  prefix = join(root, 'prefix');
  const packed = await run('npm', ['pack', '--json', '--pack-destination', root], {
    cwd: REPO,
    env: npmEnv(),
    timeoutMs: 600_000,
  });
  if (packed.status !== 0) throw new Error(`npm pack failed:\n${packed.stdout}\n${packed.stderr}`);
  const [manifest] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
  if (!manifest) throw new Error(`npm pack printed no manifest: ${packed.stdout}`);
  files = manifest.files.map((f) => f.path);
  const install = await run(
    'npm',
    ['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', join(root, manifest.filename)],
    { cwd: root, env: npmEnv(), timeoutMs: 900_000 },
  );
  if (install.status !== 0) throw new Error(`npm install -g failed:\n${install.stdout}\n${install.stderr}`);
  installed = join(prefix, 'lib', 'node_modules', pkg.name);
  redis = await startTestRedis();
}, 1_200_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await redis?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('holds the build, the migrations, the unit and the examples, and no sources or tests', () => {
    for (const needed of [
      'package.json',
      'dist/src/cli.js',
      'dist/workers/submit.js',
      // The client (`schedflow/client`) with its declarations, and the document its types are made from.
      'dist/src/client/index.js',
      'dist/src/client/index.d.ts',
      'dist/src/client/api-types.d.ts',
      'docs/openapi.json',
      // JSON the code imports: the simulator's answer templates, Slurm's OpenAPI documents.
      'dist/src/sim/templates/v0.0.44.json',
      'dist/src/sched/openapi/slurmrestd-openapi-v0044.json',
      'migrations/sqlite/meta/_journal.json',
      'migrations/postgres/meta/_journal.json',
      'config/systemd/schedflow.service',
      'config/examples/profile.yaml',
      'config/examples/hello.yaml',
      'docs/operations.md',
      // The HTTP API's examples docs/http-api.md shows.
      'examples/python/submit_and_wait.py',
      'examples/shell/submit-and-wait.sh',
      // The OpenAPI document, for client generators (docs/http-api.md).
      'docs/openapi.json',
    ]) {
      expect(files).toContain(needed);
    }
    expect(files.filter((f) => f.startsWith('migrations/sqlite/') && f.endsWith('.sql')).length).toBeGreaterThan(10);
    // Declarations only of the client, the one part other programs import.
    expect(
      files.filter(
        (f) =>
          /^(src|test|workers)\//.test(f) ||
          f.endsWith('.map') ||
          (f.endsWith('.ts') && !(f.startsWith('dist/src/client/') && f.endsWith('.d.ts'))),
      ),
    ).toEqual([]);
  });
});

describe('npm install -g of the tarball', () => {
  it('installs the dependencies only, better-sqlite3 built for this Node', () => {
    const modules = join(installed, 'node_modules');
    for (const dev of ['typescript', 'vitest', 'tsx', '@biomejs/biome'])
      expect(existsSync(join(modules, dev))).toBe(false);
    expect(existsSync(join(modules, 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node'))).toBe(true);
  });

  it('gives a schedflow command that says its version, from anywhere', async () => {
    const version = await run(join(prefix, 'bin', 'schedflow'), ['--version'], {
      cwd: '/',
      env: serviceEnv({}),
      timeoutMs: 30_000,
    });
    expect(version).toEqual({ status: 0, stdout: `${pkg.version}\n`, stderr: '' });
  });

  it('gives `schedflow/client` to a program that imports it', async () => {
    // A program beside the installed package, as a service that depends on it resolves it.
    const consumer = join(root, 'consumer');
    mkdirSync(join(consumer, 'node_modules'), { recursive: true });
    symlinkSync(installed, join(consumer, 'node_modules', pkg.name));
    const imported = await run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const m = await import('schedflow/client'); console.log(typeof m.SchedflowClient, m.TERMINAL_RUN_STATES.join());",
      ],
      { cwd: consumer, env: serviceEnv({}), timeoutMs: 30_000 },
    );
    expect(imported).toEqual({ status: 0, stdout: 'function succeeded,failed,cancelled,skipped\n', stderr: '' });
  });

  it('runs `start --config --data-dir` as an unprivileged user from /, and a job through it', async () => {
    const etc = join(root, 'etc', 'schedflow');
    const data = join(root, 'var', 'lib', 'schedflow');
    // As systemd makes them: the configuration folder root's and readable (no profile in it: the
    // embedded simulator), the data dir the service user's alone (StateDirectoryMode=0700).
    mkdirSync(etc, { recursive: true, mode: 0o755 });
    mkdirSync(data, { recursive: true, mode: 0o700 });
    chmodSync(join(root, 'var'), 0o755);
    chmodSync(join(root, 'var', 'lib'), 0o755);
    ownedByServiceUser(data);
    const env = serviceEnv({ REDIS_URL: redis?.url });
    const simPort = await freePort();
    const [command, ...args] = asServiceUser([
      join(prefix, 'bin', 'schedflow'),
      'start',
      '--config',
      etc,
      '--data-dir',
      data,
      '--listen',
      '127.0.0.1:0',
      '--sim-port',
      String(simPort),
    ]) as [string, ...string[]];
    const daemon = spawn(command, args, { cwd: '/', env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(daemon);
    let stdout = '';
    let stderr = '';
    daemon.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    daemon.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      daemon.once('close', (code, signal) => {
        children.delete(daemon);
        resolve({ code, signal });
      }),
    );
    const started = Date.now();
    while (!stdout.includes('schedflow is running')) {
      if (daemon.exitCode !== null || Date.now() - started > 60_000) {
        throw new Error(`the installed daemon did not start:\n${stdout}\n${stderr}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(stdout).toContain(`no scheduler profile in ${etc}/profiles: using the embedded simulator`);

    // A job through it with the installed CLI, as the same user; it works in a folder of the
    // service user's (a shared /tmp may hold another run's slurm-<id>.out of another owner).
    const work = join(root, 'work');
    mkdirSync(work, { mode: 0o755 });
    ownedByServiceUser(work);
    const jobFile = join(root, 'job.yaml');
    writeFileSync(
      jobFile,
      `name: packaged\nscript: |\n  #!/bin/sh\n  echo hello from the package\ntime_limit: 5\ncurrent_working_directory: ${work}\n`,
      { mode: 0o644 },
    );
    const [cli, ...submit] = asServiceUser([
      join(prefix, 'bin', 'schedflow'),
      'jobs',
      'submit',
      jobFile,
      '--wait',
      '--data-dir',
      data,
    ]) as [string, ...string[]];
    const job = await run(cli, submit, { cwd: '/', env, timeoutMs: 60_000 });
    expect(job, `${job.stdout}\n${stdout}`).toMatchObject({ status: 0, stderr: '' });
    expect(job.stdout).toMatch(/job \d+ completed \(exit 0\)/);

    daemon.kill('SIGTERM');
    expect(await exited).toEqual({ code: 143, signal: null });
    expect(stdout).toContain('"msg":"shutdown complete"');
  }, 120_000);
});
