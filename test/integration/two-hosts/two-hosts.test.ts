import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { postgresHistory } from '../../../src/db/history.js';
import { getRequest, transitionsOf } from '../../../src/db/requests.js';
import { listRuns } from '../../../src/db/runs.js';
import { createToken } from '../../../src/db/tokens.js';
import { shellSpec } from '../../helpers/api.js';
import { cleanEnv, killLeftovers, spawnDaemon } from '../../helpers/cli-process.js';
import { writeProfile } from '../../helpers/daemon.js';
import { type FlakyProxy, startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { http, waitFor } from '../../helpers/http.js';
import { makeNetwork, netnsUnavailable, type TestHost, type TestNetwork } from '../../helpers/netns.js';
import { startTestPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';
import { jobsWithMarker, logLines } from '../daemon-process/daemon-process-env.js';

/**
 * schedflow on two hosts (issue 17), made as network namespaces on this machine: host `a` runs
 * the web and scheduler roles, host `b` the worker, and `services` runs Redis (and PostgreSQL,
 * the shared history). The cluster (the simulator) is served by the test on the network's
 * gateway address. Nothing of one host is on another's loopback: every connection crosses the
 * network.
 */

const unavailable = netnsUnavailable();
if (unavailable) console.warn(`two-host tests skipped: ${unavailable}`);

let net: TestNetwork | undefined;
let redis: TestRedis | undefined;
let sim: TestSim | undefined;
let root: string | undefined;
let postgres: TestPostgres | undefined;
let proxy: FlakyProxy | undefined;
let pool: pg.Pool | undefined;

afterEach(async () => {
  await killLeftovers();
  await pool?.end();
  await proxy?.close();
  await redis?.stop();
  await postgres?.stop();
  await sim?.stop();
  net?.remove();
  if (root) rmSync(root, { recursive: true, force: true });
  net = redis = sim = root = postgres = proxy = pool = undefined;
});

async function twoHosts() {
  net = makeNetwork(['a', 'b', 'services']);
  const { a, b, services } = net.hosts as Record<'a' | 'b' | 'services', NonNullable<TestNetwork['hosts'][string]>>;
  redis = await startTestRedis({ host: services });
  sim = await startSim({ host: net.gateway });
  root = mkdtempSync(join(tmpdir(), 'schedflow-two-hosts-'));
  const configDir = join(root, 'config');
  writeProfile(configDir, sim.url);
  const env = cleanEnv({ REDIS_URL: redis.url, SCHEDFLOW_SHUTDOWN_GRACE_MS: '3000' });
  return { a, b, root, configDir, env };
}

describe.skipIf(unavailable !== null)('two hosts sharing one Redis', () => {
  it('with a SQLite history each: the worker host refuses to start, naming the other history and what to configure', async () => {
    const { a, b, root, configDir, env } = await twoHosts();
    const web = spawnDaemon({
      host: a,
      dataDir: join(root, 'a-data'),
      configDir,
      env,
      cwd: root,
      extraArgs: ['--roles', 'web,scheduler', '--listen', `${a.address}:8080`],
    });
    await web.ready();
    // Host a's API, reached across the network.
    const health = await http(`http://${a.address}:8080/healthz`);
    expect(health.status).toBe(200);

    const worker = spawnDaemon({
      host: b,
      dataDir: join(root, 'b-data'),
      configDir,
      env,
      cwd: root,
      extraArgs: ['--roles', 'worker'],
    });
    const exit = await worker.exited;
    expect(exit.code, worker.stderr).toBe(2);
    expect(worker.stderr).toMatch(
      `another history is in use under queue prefix "schedflow" in this Redis: ${join(root, 'a-data', 'history.sqlite')}`,
    );
    expect(worker.stderr).toMatch(/roles web,scheduler/);
    expect(worker.stderr).not.toMatch(/^\s+at /m);
    expect(web.child.exitCode).toBeNull();
    expect((await web.stop('SIGTERM')).code).toBe(143);
    // The shared Redis's password is in REDIS_URL: in no log.
    const password = new URL(redis?.url ?? '').password;
    expect(password).not.toBe('');
    for (const output of [web.stdout, web.stderr, worker.stdout, worker.stderr]) expect(output).not.toContain(password);
  }, 60_000);
});

/** What one shared deployment needs: Redis and PostgreSQL on `services`, the cluster behind a proxy at the gateway. */
async function sharedHosts() {
  net = makeNetwork(['a', 'b', 'services']);
  const { a, b, services } = net.hosts as Record<'a' | 'b' | 'services', NonNullable<TestNetwork['hosts'][string]>>;
  redis = await startTestRedis({ host: services });
  postgres = await startTestPostgres({ host: services });
  const databaseUrl = await postgres.createDatabase('schedflow');
  sim = await startSim({ host: net.gateway, cpus: 4 });
  // Between the hosts and the cluster: it can hold a submission's answer (a crash window).
  proxy = await startFlakyProxy(sim.url, net.gateway);
  root = mkdtempSync(join(tmpdir(), 'schedflow-two-hosts-'));
  const configDir = join(root, 'config');
  writeProfile(configDir, proxy.url);
  const env = cleanEnv({
    REDIS_URL: redis.url,
    DATABASE_URL: databaseUrl,
    SCHEDFLOW_WEBHOOK_SECRET: 'one-key-for-every-host',
    SCHEDFLOW_SHUTDOWN_GRACE_MS: '3000',
    SCHEDFLOW_LOCK_DURATION_MS: '3000',
  });
  // The test reads the shared history as an operator would, across the network.
  pool = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  pool.on('error', () => {});
  const start = (host: TestHost, name: string, roles: string, extraArgs: string[] = []) =>
    spawnDaemon({
      host,
      dataDir: join(root as string, `${name}-data`),
      configDir,
      env,
      cwd: root,
      extraArgs: ['--roles', roles, ...extraArgs],
    });
  return { a, b, configDir, databaseUrl, history: () => postgresHistory(pool as pg.Pool), start, sim, proxy };
}

describe.skipIf(unavailable !== null)('two hosts sharing Redis and a PostgreSQL history on a third', () => {
  it("runs jobs submitted through a's API on b's worker; with b killed mid-submit, a's worker makes no second Slurm job", async () => {
    const { a, b, history, start, sim, proxy, databaseUrl } = await sharedHosts();
    const web = start(a, 'a', 'web,scheduler', ['--listen', `${a.address}:8080`]);
    const worker = start(b, 'b', 'worker');
    await Promise.all([web.ready(), worker.ready()]);
    const { token } = await createToken(history(), { name: 'lims', scopes: ['submit', 'read'] });
    const submit = async (name: string, body: string) => {
      const created = await http(`http://${a.address}:8080/api/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
        body: { spec: shellSpec(name, body, sim.workDir) },
      });
      expect(created.status, created.text).toBe(201);
      return (created.json as { id: string }).id;
    };
    const completed = (id: string) =>
      waitFor(
        async () => {
          const row = await getRequest(history(), id);
          return row?.state === 'completed' ? row : undefined;
        },
        { what: `request ${id} to complete`, timeoutMs: 60_000 },
      );

    const ids = [];
    for (let i = 0; i < 4; i++) ids.push(await submit(`across-${i}`, 'true'));
    for (const id of ids) await completed(id);
    // Host a runs no worker: b submitted and followed them all.
    const submittedBy = (out: string) =>
      new Set(
        logLines(out)
          .filter((l) => l.msg === 'job submitted')
          .map((l) => l.requestId),
      );
    expect([...submittedBy(worker.stdout)].sort()).toEqual([...ids].sort());
    expect(submittedBy(web.stdout).size).toBe(0);

    // b is killed after the cluster accepted a submission, before its answer came back.
    const reached = proxy.holdAnswerOnce((r) => r.method === 'POST' && r.url.endsWith('/job/submit'));
    const held = await submit('across-held', 'sleep 1');
    await reached;
    expect((await getRequest(history(), held))?.state).toBe('submitting');
    worker.child.kill('SIGKILL');
    expect(await worker.exited).toMatchObject({ signal: 'SIGKILL' });
    proxy.release();
    const [accepted] = (await jobsWithMarker(sim, held)).controller;
    expect(accepted).toEqual(expect.any(Number));
    // A second worker, on host a, takes the submission up once b's claim on it has lapsed.
    const takeover = start(a, 'a-worker', 'worker');
    await takeover.ready();
    const row = await completed(held);
    expect(row).toMatchObject({ jobId: accepted, adopted: true });
    expect((await transitionsOf(history(), held)).filter((t) => t.toState === 'submitted')).toHaveLength(1);
    expect(await jobsWithMarker(sim, held)).toEqual({ controller: [accepted], accounting: [accepted] });
    for (const id of ids) expect((await jobsWithMarker(sim, id)).controller).toHaveLength(1);
    // One POST for each request, in all.
    expect(proxy.requests.filter((r) => r.method === 'POST' && r.url.endsWith('/job/submit'))).toHaveLength(5);

    // The shared services' passwords are in REDIS_URL and DATABASE_URL: in no log.
    const secrets = [new URL(redis?.url ?? '').password, new URL(databaseUrl).password];
    for (const secret of secrets) expect(secret).not.toBe('');
    for (const p of [web, worker, takeover]) {
      for (const secret of secrets) expect(p.stdout + p.stderr).not.toContain(secret);
    }
  }, 150_000);

  it("fires a cron pipeline's ticks once with schedulers on both hosts", async () => {
    const { a, b, configDir, history, start, sim } = await sharedHosts();
    mkdirSync(join(configDir, 'pipelines'), { recursive: true });
    writeFileSync(
      join(configDir, 'pipelines', 'ticks.yaml'),
      [
        'schedule:',
        "  cron: '*/2 * * * * *'",
        '  overlap: allow',
        'defaults:',
        `  current_working_directory: ${sim.workDir}`,
        'steps:',
        '  work:',
        '    script: "#!/bin/sh\\ntrue\\n"',
      ].join('\n'),
    );
    const hostA = start(a, 'a', 'web,scheduler,worker', ['--listen', `${a.address}:8080`]);
    const hostB = start(b, 'b', 'scheduler,worker');
    await Promise.all([hostA.ready(), hostB.ready()]);
    const scheduled = async () =>
      (await listRuns(history(), { pipeline: 'ticks', limit: 200 })).filter((r) => r.trigger === 'schedule');
    await waitFor(async () => ((await scheduled()).length >= 5 ? true : undefined), {
      what: 'five ticks with schedulers on both hosts',
      timeoutMs: 60_000,
    });
    const runs = await scheduled();
    // One run per tick: no tick fired by both hosts.
    expect(new Set(runs.map((r) => r.scheduledFor)).size).toBe(runs.length);
    // Both hosts' schedulers were up throughout.
    expect(hostA.child.exitCode).toBeNull();
    expect(hostB.child.exitCode).toBeNull();
  }, 120_000);
});
