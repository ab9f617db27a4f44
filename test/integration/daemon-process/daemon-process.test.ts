import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { type Db, openDatabase } from '../../../src/db/database.js';
import { getRequest, transitionsOf } from '../../../src/db/requests.js';
import type { JobRequestRow, JobTransitionRow } from '../../../src/db/schema.js';
import { DEFAULT_QUEUE_PREFIX } from '../../../src/queue/catalog.js';
import { cleanEnv, type DaemonProcess, killLeftovers, runCli, spawnDaemon } from '../../helpers/cli-process.js';
import { writeProfile } from '../../helpers/daemon.js';
import { type FlakyProxy, startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';

/**
 * The daemon as separate processes (`schedflow start`), driven by the CLI
 * (`schedflow jobs …`), against a real Redis and an in-process simulator:
 * crashes (kill -9), signals, restarts on the same data dir, and the exit
 * codes and messages a user sees.
 */

let redis: TestRedis | undefined;
let sim: TestSim | undefined;
let proxy: FlakyProxy | undefined;
let root: string | undefined;

afterEach(async () => {
  // Whatever a failed test left running: daemons and CLI processes first, then their upstreams.
  await killLeftovers();
  proxy?.release();
  await proxy?.close();
  await sim?.stop();
  await redis?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
  proxy = undefined;
  sim = undefined;
  redis = undefined;
  root = undefined;
});

const LOCK_DURATION_MS = 3000;
const SHUTDOWN_GRACE_MS = 3000;

interface Setup {
  dataDir: string;
  configDir: string;
  redisUrl: string;
  sim: TestSim;
  /** Starts `schedflow start` on this data dir, config and Redis, and waits for its banner. */
  startDaemon(): Promise<DaemonProcess>;
  /** `schedflow <args>` with REDIS_URL set as for the daemon. */
  cli(args: string[], timeoutMs?: number): ReturnType<typeof runCli>;
  jobFile(name: string, script: string): string;
}

/** A fresh Redis (so the daemon's fixed queue prefix is its own), a simulator, and a profile pointing at it. */
async function setUp(options: { viaProxy?: boolean } = {}): Promise<Setup> {
  root = mkdtempSync(join(tmpdir(), 'schedflow-dproc-'));
  const dataDir = join(root, 'data');
  const configDir = join(root, 'config');
  const jobsDir = join(root, 'jobs');
  mkdirSync(jobsDir);
  redis = await startTestRedis();
  const s = await startSim();
  sim = s;
  if (options.viaProxy) proxy = await startFlakyProxy(s.url);
  writeProfile(configDir, proxy?.url ?? s.url);
  const redisUrl = redis.url;
  // Short claims and grace, so crash recovery and shutdown are tested in seconds.
  const env = cleanEnv({
    REDIS_URL: redisUrl,
    SCHEDFLOW_LOCK_DURATION_MS: String(LOCK_DURATION_MS),
    SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS),
  });
  return {
    dataDir,
    configDir,
    redisUrl,
    sim: s,
    async startDaemon() {
      const daemon = spawnDaemon({ dataDir, configDir, env, cwd: root });
      await daemon.ready();
      return daemon;
    },
    cli: (args, timeoutMs) => runCli(args, { env, cwd: root, timeoutMs }),
    jobFile(name, script) {
      const file = join(jobsDir, `${name}.yaml`);
      writeFileSync(file, JSON.stringify({ name, script, current_working_directory: s.workDir }));
      return file;
    },
  };
}

/** Reads the daemon's history the way `schedflow jobs` does: read-only, opened for this one read. */
function readHistory<T>(dataDir: string, read: (db: Db) => T): T {
  const history = openDatabase(join(dataDir, 'history.sqlite'), { readonly: true });
  try {
    return read(history.db);
  } finally {
    history.close();
  }
}

function requestOf(dataDir: string, id: string): { row: JobRequestRow | undefined; transitions: JobTransitionRow[] } {
  return readHistory(dataDir, (db) => ({ row: getRequest(db, id), transitions: transitionsOf(db, id) }));
}

const statesOf = (transitions: JobTransitionRow[]) => transitions.map((t) => t.toState);

async function waitForState(dataDir: string, id: string, state: string, timeoutMs = 20_000): Promise<JobRequestRow> {
  try {
    return await waitFor(
      async () => {
        const { row } = requestOf(dataDir, id);
        return row?.state === state ? row : undefined;
      },
      { what: `request ${id} to reach ${state}`, timeoutMs, intervalMs: 200 },
    );
  } catch (error) {
    const { row, transitions } = requestOf(dataDir, id);
    const seen = transitions.map((t) => `${new Date(t.at).toISOString()} ${t.toState} (${t.source})`).join(', ');
    throw new Error(`${(error as Error).message}; it is ${row?.state ?? 'not recorded'}: ${seen}`);
  }
}

const QUEUED = /^queued request ([0-9a-f-]{36}) \(profile test\)\n$/;

function queuedId(stdout: string): string {
  const match = QUEUED.exec(stdout);
  expect(match, stdout).not.toBeNull();
  return String(match?.[1]);
}

/**
 * GET as Alice, repeated until the answer was produced after this call began: the
 * proxy (the simulator) caches GET answers, and an answer cached before a
 * submission would hide the job.
 */
async function freshGet(url: string) {
  const after = Math.floor(Date.now() / 1000) * 1000 + 1000;
  return waitFor(
    async () => {
      const res = await http(url, { headers: bearer(ALICE_TOKEN) });
      expect(res.status).toBe(200);
      const produced = Date.parse(res.headers.get('date') ?? '') - Number(res.headers.get('age') ?? 0) * 1000;
      return produced >= after ? res : undefined;
    },
    { what: `a fresh answer from ${url}`, timeoutMs: 10_000, intervalMs: 250 },
  );
}

/** The jobs carrying a request's marker, as the simulator's controller and accounting list them now. */
async function jobsWithMarker(s: TestSim, requestId: string) {
  const marker = `schedflow:${requestId}`;
  const hasMarker = (comment: string) => comment === marker || comment.startsWith(`${marker} `);
  const since = Math.floor(Date.now() / 1000) - 3600;
  const [controller, accounting] = await Promise.all([
    freshGet(`${s.url}/sched/v0.0.44/jobs`),
    freshGet(`${s.url}/scheddb/v0.0.44/jobs?start_time=${since}`),
  ]);
  const c = (controller.json as { jobs: { job_id: number; comment: string }[] }).jobs;
  const a = (accounting.json as { jobs: { job_id: number; comment: { job: string } }[] }).jobs;
  return {
    controller: c.filter((j) => hasMarker(j.comment)).map((j) => j.job_id),
    accounting: a.filter((j) => hasMarker(j.comment.job)).map((j) => j.job_id),
  };
}

/** Pino's JSON lines on the daemon's stdout. */
function logLines(stdout: string): { msg?: string; level?: number; [k: string]: unknown }[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg?: string });
}

describe('a daemon killed with SIGKILL right after the scheduler accepted a submission', () => {
  it('makes exactly one scheduler job: the restarted daemon adopts the job by its marker', async () => {
    const t = await setUp({ viaProxy: true });
    const p = proxy as FlakyProxy;
    const first = await t.startDaemon();
    const reached = p.holdAnswerOnce((r) => r.method === 'POST' && r.url.endsWith('/job/submit'));

    // A short job: it has ended when the restarted daemon adopts it, a few seconds after the kill.
    const submit = await t.cli(['jobs', 'submit', t.jobFile('crash', '#!/bin/sh\nsleep 1\n'), '--data-dir', t.dataDir]);
    expect(submit.stderr).toBe('');
    expect(submit.code).toBe(0);
    const id = queuedId(submit.stdout);

    // The simulator has accepted the job; its answer is held in the proxy.
    await Promise.race([
      reached,
      new Promise((_, reject) => setTimeout(() => reject(new Error('the submission never reached the proxy')), 15_000)),
    ]);
    expect(requestOf(t.dataDir, id).row?.state).toBe('submitting');
    const killedAt = Date.now();
    first.child.kill('SIGKILL');
    expect(await first.exited).toMatchObject({ code: null, signal: 'SIGKILL' });
    p.release();
    const [accepted] = (await jobsWithMarker(t.sim, id)).controller;
    expect(accepted).toEqual(expect.any(Number));

    const second = await t.startDaemon();
    // The dead worker's claim lasts the lock duration, and the stalled check (as often) must see it
    // expire: the submit is taken up again within about two lock durations of the kill.
    const row = await waitForState(t.dataDir, id, 'completed', 30_000);
    const { transitions } = requestOf(t.dataDir, id);
    const adoptedAt = transitions.find((tr) => tr.toState === 'submitted')?.at ?? Number.NaN;
    console.info(`kill -9 to adoption: ${adoptedAt - killedAt} ms`);

    expect(row).toMatchObject({ jobId: accepted, adopted: true });
    expect(statesOf(transitions).filter((s) => s === 'submitted')).toHaveLength(1);
    expect(transitions.find((tr) => tr.toState === 'submitted')?.detail).toBe(
      'found by its marker after an interrupted submit',
    );
    expect(statesOf(transitions)).not.toContain('submit_failed');
    expect(await jobsWithMarker(t.sim, id)).toEqual({ controller: [accepted], accounting: [accepted] });
    // One POST in all: the second daemon looked the marker up instead of submitting again.
    expect(p.requests.filter((r) => r.method === 'POST' && r.url.endsWith('/job/submit'))).toHaveLength(1);
    expect(logLines(second.stdout).some((l) => l.msg === 'adopted the job an interrupted submit created')).toBe(true);

    const show = await t.cli(['jobs', 'show', id, '--data-dir', t.dataDir]);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(`job id    ${accepted} (adopted after an interrupted submit)`);

    const stopped = await second.stop('SIGTERM');
    expect(stopped.code).toBe(143);

    // The end comes from the job's accounting record, with exit code and times, though the job
    // ended before it was adopted.
    const end = transitions.at(-1);
    expect(
      { source: end?.source, exitCode: row.exitCode, started: row.startedAt !== null, ended: row.endedAt !== null },
      'an adopted job that had already ended was concluded without its accounting record',
    ).toEqual({ source: 'accounting', exitCode: 0, started: true, ended: true });
  }, 60_000);
});

describe('SIGTERM while a job runs, then a restart', () => {
  it('exits 143 after logging "shutting down"; the restarted daemon follows the job to completed', async () => {
    const t = await setUp();
    const first = await t.startDaemon();
    const submit = await t.cli(['jobs', 'submit', t.jobFile('long', '#!/bin/sh\nsleep 6\n'), '--data-dir', t.dataDir]);
    expect(submit.code).toBe(0);
    const id = queuedId(submit.stdout);
    await waitForState(t.dataDir, id, 'running');

    const signalledAt = Date.now();
    first.child.kill('SIGTERM');
    const exit = await first.exited;
    const took = exit.at - signalledAt;
    expect(exit).toMatchObject({ code: 143, signal: null });
    // Nothing in flight to wait for: well within the grace period.
    expect(took).toBeLessThan(SHUTDOWN_GRACE_MS);
    const shutdownLog = logLines(first.stdout).find((l) => l.msg === 'shutting down');
    expect(shutdownLog).toMatchObject({ signal: 'SIGTERM', level: 30 });
    expect(first.stderr).toBe('');
    // Stopped while the job still runs: the history says running.
    expect(requestOf(t.dataDir, id).row?.state).toBe('running');

    const second = await t.startDaemon();
    const row = await waitForState(t.dataDir, id, 'completed', 30_000);
    expect(row.exitCode).toBe(0);
    const states = statesOf(requestOf(t.dataDir, id).transitions);
    expect(states.filter((s) => s === 'running')).toHaveLength(1);
    expect(states.filter((s) => s === 'submitted')).toHaveLength(1);
    expect(states).not.toContain('lost');
    expect(states).not.toContain('failed');
    expect(states.at(-1)).toBe('completed');
    expect((await jobsWithMarker(t.sim, id)).accounting).toEqual([row.jobId]);

    expect((await second.stop('SIGINT')).code).toBe(130);
    console.info(`SIGTERM to exit: ${took} ms`);
  }, 60_000);
});

describe('SIGTERM while the answer to an accepted submission is held upstream', () => {
  it('aborts it after the grace period, exits 143, and the restarted daemon adopts the one job', async () => {
    const t = await setUp({ viaProxy: true });
    const p = proxy as FlakyProxy;
    const first = await t.startDaemon();
    const reached = p.holdAnswerOnce((r) => r.method === 'POST' && r.url.endsWith('/job/submit'));
    const submit = await t.cli(['jobs', 'submit', t.jobFile('held', '#!/bin/sh\ntrue\n'), '--data-dir', t.dataDir]);
    const id = queuedId(submit.stdout);
    await reached;
    expect(requestOf(t.dataDir, id).row?.state).toBe('submitting');

    const signalledAt = Date.now();
    first.child.kill('SIGTERM');
    const exit = await first.exited;
    const took = exit.at - signalledAt;
    console.info(`SIGTERM to exit with a submit in flight: ${took} ms`);
    expect(exit.code).toBe(143);
    // The submit gets the grace period, then it is aborted and handed back to its queue.
    expect(took).toBeGreaterThanOrEqual(SHUTDOWN_GRACE_MS - 500);
    expect(took).toBeLessThan(SHUTDOWN_GRACE_MS + 5_000);
    const logs = logLines(first.stdout);
    expect(logs.some((l) => l.msg === 'shutting down')).toBe(true);
    expect(logs.some((l) => l.msg === 'shutdown deadline passed; skipping the remaining steps')).toBe(false);
    expect(first.stderr).toBe('');
    p.release();
    expect(requestOf(t.dataDir, id).row).toMatchObject({ state: 'submitting', jobId: null });
    // Handed back without spending one of its attempts: the shutdown was no failure of the submit.
    const queue = new Queue('submit', { connection: { url: t.redisUrl }, prefix: DEFAULT_QUEUE_PREFIX });
    try {
      const job = await queue.getJob(id);
      expect({ state: await job?.getState(), attemptsMade: job?.attemptsMade }).toEqual({
        state: 'delayed',
        attemptsMade: 0,
      });
    } finally {
      await queue.close();
    }

    // Handed back (not stalled): the restarted daemon takes it up at once, not after a lock expiry.
    const second = await t.startDaemon();
    const row = await waitForState(t.dataDir, id, 'completed', 30_000);
    const states = statesOf(requestOf(t.dataDir, id).transitions);
    expect(states.filter((s) => s === 'submitted')).toHaveLength(1);
    expect(row.adopted).toBe(true);
    expect(await jobsWithMarker(t.sim, id)).toEqual({ controller: [row.jobId], accounting: [row.jobId] });
    expect(p.requests.filter((r) => r.method === 'POST' && r.url.endsWith('/job/submit'))).toHaveLength(1);
    expect((await second.stop()).code).toBe(143);
  }, 60_000);
});

describe('schedflow jobs: submit --wait, list, show', () => {
  // `<local time>  <from> → <to>  (<source>[, reason])[  detail]`; the time's format depends on the locale.
  const TRANSITION = / {2}(\S+) → (\S+) {2}\((\w+)[^)]*\)/;

  function followed(stdout: string) {
    const lines = stdout.trimEnd().split('\n');
    const arrows = lines.filter((l) => TRANSITION.test(l)).map((l) => TRANSITION.exec(l)?.slice(1, 3).join('→'));
    return { first: lines[0], arrows, last: lines.at(-1) };
  }

  it('--wait prints every transition and the end; exit 0 for COMPLETED, 3 for FAILED; list and show agree', async () => {
    const t = await setUp();
    const daemon = await t.startDaemon();
    const [ok, bad, bad7, okJson] = await Promise.all([
      t.cli(['jobs', 'submit', t.jobFile('ok', '#!/bin/sh\nsleep 3\n'), '--wait', '--data-dir', t.dataDir], 40_000),
      t.cli(
        ['jobs', 'submit', t.jobFile('bad', '#!/bin/sh\nsleep 3\nexit 3\n'), '--wait', '--data-dir', t.dataDir],
        40_000,
      ),
      t.cli(['jobs', 'submit', t.jobFile('bad7', '#!/bin/sh\nexit 7\n'), '--wait', '--data-dir', t.dataDir], 40_000),
      t.cli(
        ['jobs', '--json', 'submit', t.jobFile('okjson', '#!/bin/sh\ntrue\n'), '--wait', '--data-dir', t.dataDir],
        40_000,
      ),
    ]);

    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    const okOut = followed(ok.stdout);
    const okId = queuedId(`${okOut.first}\n`);
    expect(okOut.arrows).toEqual([
      '-→accepted',
      'accepted→queued',
      'queued→submitting',
      'submitting→submitted',
      'submitted→running',
      'running→completed',
    ]);
    const okJob = /^job (\d+) completed \(exit 0\)$/.exec(okOut.last ?? '');
    expect(okJob, ok.stdout).not.toBeNull();

    expect(bad.stderr).toBe('');
    expect(bad.code).toBe(3);
    const badOut = followed(bad.stdout);
    const badId = queuedId(`${badOut.first}\n`);
    expect(badOut.arrows.at(-1)).toBe('running→failed');
    const badJob = /^job (\d+) failed \(exit 3\)$/.exec(badOut.last ?? '');
    expect(badJob, bad.stdout).not.toBeNull();

    // Any end but COMPLETED exits 3 (EXIT.refused), whatever the script's own exit code.
    expect(bad7.code).toBe(3);
    expect(bad7.stdout.trimEnd().split('\n').at(-1)).toMatch(/^job \d+ failed \(exit 7\)$/);

    // --json: the queued line and one JSON object per transition, nothing else.
    expect(okJson.stderr).toBe('');
    expect(okJson.code).toBe(0);
    const jsonLines = okJson.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(jsonLines[0]).toEqual({ requestId: expect.any(String), profile: 'test' });
    expect(jsonLines.slice(1).map((l) => l.to)).toContain('submitted');
    expect(jsonLines.at(-1)).toMatchObject({ to: 'completed', source: expect.any(String) });
    expect(jsonLines.slice(1)[0]).toMatchObject({ from: null, to: 'accepted', at: expect.any(String) });

    const list = await t.cli(['jobs', 'list', '--data-dir', t.dataDir]);
    expect(list.stderr).toBe('');
    expect(list.code).toBe(0);
    const [header, ...rows] = list.stdout.trimEnd().split('\n');
    expect(header?.split(/ {2,}/)).toEqual([
      'REQUEST',
      'NAME',
      'PROFILE',
      'STATE',
      'JOBID',
      'CREATED',
      'ELAPSED',
      'EXIT',
    ]);
    expect(rows).toHaveLength(4);
    const rowOf = (id: string) => rows.find((r) => r.startsWith(id))?.split(/ {2,}/);
    expect(rowOf(okId)).toEqual([
      okId,
      'ok',
      'test',
      'completed',
      okJob?.[1],
      expect.any(String),
      expect.any(String),
      '0',
    ]);
    expect(rowOf(badId)).toEqual([
      badId,
      'bad',
      'test',
      'failed',
      badJob?.[1],
      expect.any(String),
      expect.any(String),
      '3',
    ]);

    const listJson = await t.cli(['jobs', 'list', '--json', '--state', 'failed', '--data-dir', t.dataDir]);
    expect(listJson.code).toBe(0);
    const failedRows = JSON.parse(listJson.stdout) as JobRequestRow[];
    expect(failedRows.map((r) => [r.name, r.state, r.exitCode]).sort()).toEqual([
      ['bad', 'failed', 3],
      ['bad7', 'failed', 7],
    ]);
    expect(failedRows.find((r) => r.id === badId)?.jobId).toBe(Number(badJob?.[1]));

    const show = await t.cli(['jobs', 'show', okId, '--data-dir', t.dataDir]);
    expect(show.stderr).toBe('');
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(`request   ${okId}\n`);
    expect(show.stdout).toContain('name      ok (profile test, from cli)\n');
    expect(show.stdout).toContain('state     completed\n');
    expect(show.stdout).toContain(`job id    ${okJob?.[1]}\n`);
    expect(show.stdout).toContain('exit      0\n');
    const tableLines = show.stdout.trimEnd().split('\n\n')[1]?.split('\n') ?? [];
    expect(tableLines[0]?.split(/ {2,}/)).toEqual(['AT', 'FROM', 'TO', 'SOURCE', 'REASON', 'DETAIL']);
    expect(tableLines.slice(1).map((l) => l.split(/ {2,}/).slice(1, 4))).toEqual([
      ['-', 'accepted', 'cli'],
      ['accepted', 'queued', 'submit'],
      ['queued', 'submitting', 'submit'],
      ['submitting', 'submitted', 'submit'],
      ['submitted', 'running', 'poll'],
      ['running', 'completed', 'accounting'],
    ]);
    // The accounting line needs a reconcile after the job ended: every 60 s, with no setting to shorten it.

    const showJson = await t.cli(['jobs', 'show', badId, '--json', '--data-dir', t.dataDir]);
    expect(showJson.code).toBe(0);
    const shown = JSON.parse(showJson.stdout) as {
      request: JobRequestRow;
      transitions: JobTransitionRow[];
      accounting: unknown;
    };
    expect(shown.request).toMatchObject({ id: badId, state: 'failed', exitCode: 3, reason: 'NonZeroExitCode' });
    expect(statesOf(shown.transitions).at(-1)).toBe('failed');
    expect(shown).toHaveProperty('accounting');

    const unknown = await t.cli(['jobs', 'show', '00000000-0000-0000-0000-000000000000', '--data-dir', t.dataDir]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe('schedflow: no job request 00000000-0000-0000-0000-000000000000 in the history\n');

    expect((await daemon.stop()).code).toBe(143);
  }, 60_000);
});

describe('mistakes a user meets first', () => {
  it('jobs submit on a data dir where no daemon ever ran exits 2 and says how to start one', async () => {
    root = mkdtempSync(join(tmpdir(), 'schedflow-dproc-'));
    const file = join(root, 'job.yaml');
    writeFileSync(file, JSON.stringify({ name: 'x', script: '#!/bin/sh\ntrue\n' }));
    const dataDir = join(root, 'never-used');
    const result = await runCli(['jobs', 'submit', file, '--data-dir', dataDir], { cwd: root });
    expect(result.stdout).toBe('');
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^schedflow: no schedflow daemon has run with data dir .*never-used/);
    expect(result.stderr).toContain('npm start');
    expect(result.stderr).toContain(`schedflow start --data-dir ${dataDir}`);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
  });

  it('schedflow start without redis-server on PATH and no REDIS_URL exits 2 with one line naming apt-get', async () => {
    root = mkdtempSync(join(tmpdir(), 'schedflow-dproc-'));
    // Only node on PATH (process.execPath's own directory, /usr/bin here, also holds redis-server).
    const bin = join(root, 'bin');
    mkdirSync(bin);
    symlinkSync(process.execPath, join(bin, 'node'));
    const env = cleanEnv({ PATH: bin });
    const dataDir = join(root, 'data');
    const configDir = join(root, 'config'); // no profiles: it would start the embedded simulator
    const daemon = spawnDaemon({ dataDir, configDir, env, cwd: root });
    const exit = await Promise.race([
      daemon.exited,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('schedflow start kept running')), 20_000)),
    ]);
    expect(exit.code).toBe(2);
    expect(daemon.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(daemon.stderr).toMatch(/^schedflow: redis-server is not installed/);
    expect(daemon.stderr).toContain('apt-get install redis-server');
    expect(daemon.stderr).toContain('REDIS_URL');
    expect(daemon.stderr).not.toMatch(/\n\s+at /);
    expect(daemon.stdout).not.toMatch(/schedflow is running/);
  });
});

describe('the embedded default (no profile)', () => {
  it('says in its banner that the jobs the embedded simulator runs end when the daemon stops', async () => {
    root = mkdtempSync(join(tmpdir(), 'schedflow-dproc-'));
    redis = await startTestRedis();
    const daemon = spawnDaemon({
      dataDir: join(root, 'data'),
      configDir: join(root, 'config'),
      env: cleanEnv({ REDIS_URL: redis.url }),
      cwd: root,
      extraArgs: ['--sim-port', '0'],
    });
    await daemon.waitForOutput(/stop with Ctrl-C\n/);
    const banner = daemon.stdout.slice(daemon.stdout.indexOf('schedflow is running'));
    expect(banner).toMatch(/using the embedded simulator at http:\/\/127\.0\.0\.1:\d+\n/);
    expect(banner).toContain('  jobs it runs end when the daemon stops: stopping it fails them (node_fail)\n');
    expect((await daemon.stop('SIGINT')).code).toBe(130);
  });
});

describe('schedflow jobs submit while the daemon is stopped', () => {
  const noTrace = (stderr: string) => expect(stderr).not.toMatch(/^\s+at |ENOENT|\[ioredis\]/m);

  it('with its private Redis gone: refused at once (exit 2), saying what to do; nothing queued', async () => {
    const t = await setUp();
    const env = cleanEnv({ SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS) });
    const daemon = spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env, cwd: root });
    await daemon.ready();
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    const startedAt = Date.now();
    const submit = await runCli(['jobs', 'submit', t.jobFile('late', '#!/bin/sh\ntrue\n'), '--data-dir', t.dataDir], {
      env,
      cwd: root,
    });
    expect(Date.now() - startedAt).toBeLessThan(10_000);
    expect(submit.code, submit.stderr).toBe(2);
    expect(submit.stderr).toMatch(/is not running, so nothing was queued: start it \(npm start, or schedflow start/);
    expect(submit.stdout).toBe('');
    noTrace(submit.stderr);
  });

  it('with its external Redis gone too: exit 4 within seconds, nothing queued, no ioredis traces', async () => {
    const t = await setUp();
    const daemon = await t.startDaemon();
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    await redis?.stop();
    redis = undefined; // stopped here; the cleanup would wait on it again
    const startedAt = Date.now();
    const submit = await t.cli(['jobs', 'submit', t.jobFile('late', '#!/bin/sh\ntrue\n'), '--data-dir', t.dataDir]);
    expect(Date.now() - startedAt).toBeLessThan(10_000);
    expect(submit.code, submit.stderr).toBe(4);
    expect(submit.stderr).toMatch(/cannot reach the daemon's Redis at 127\.0\.0\.1:\d+ \(.+\); nothing was queued/);
    noTrace(submit.stderr);
  });
});

describe('a second daemon on the data dir of a running one', () => {
  it('is refused at once (exit 2) and touches nothing: the first keeps its Redis and goes on working', async () => {
    const t = await setUp();
    // No REDIS_URL: each would run the data dir's private redis-server.
    const env = cleanEnv({ SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS) });
    const first = spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env, cwd: root });
    await first.ready();
    const second = spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env, cwd: root });
    const exit = await second.exited;
    expect(exit.code, second.stderr).toBe(2);
    expect(second.stderr).toMatch(new RegExp(`is in use by another schedflow daemon \\(pid ${first.pid}\\)`));
    expect(second.stderr).not.toMatch(/^\s+at /m);
    expect(first.child.exitCode).toBeNull();
    const submit = await runCli(
      ['jobs', 'submit', t.jobFile('after', '#!/bin/sh\ntrue\n'), '--wait', '--data-dir', t.dataDir],
      { env, cwd: root, timeoutMs: 30_000 },
    );
    expect(submit.code, submit.stderr).toBe(0);
    expect(submit.stdout).toMatch(/completed \(exit 0\)/);
    // Stopped, not killed by the cleanup: a daemon killed leaves its private Redis for its restart.
    expect((await first.stop('SIGTERM')).code).toBe(143);
  }, 60_000);
});

describe('Redis going away and coming back under a running daemon', () => {
  it('is said once when it goes and once when it returns, JSON only, and the daemon goes on working', async () => {
    const t = await setUp();
    const daemon = await t.startDaemon();
    await redis?.kill();
    await daemon.waitForOutput(/"msg":"Redis unreachable/, 10_000);
    // Every queue and worker keeps failing to reconnect meanwhile: none of it may reach the log.
    await new Promise((r) => setTimeout(r, 3000));
    await redis?.start();
    await daemon.waitForOutput(/"msg":"Redis reachable again"/, 15_000);
    const lines = logLines(daemon.stdout);
    expect(lines.filter((l) => l.msg?.startsWith('Redis unreachable'))).toHaveLength(1);
    expect(lines.filter((l) => l.msg === 'worker error' || l.msg === 'Redis error')).toEqual([]);
    expect(daemon.stderr).toBe('');
    const submit = await t.cli([
      'jobs',
      'submit',
      t.jobFile('after-redis', '#!/bin/sh\ntrue\n'),
      '--wait',
      '--data-dir',
      t.dataDir,
    ]);
    expect(submit.code, submit.stderr).toBe(0);
  }, 60_000);
});
