import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach } from 'vitest';
import { postgresHistory } from '../../../src/db/history.js';
import { cleanEnv, killLeftovers, spawnDaemon } from '../../helpers/cli-process.js';
import { type FlakyProxy, startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { makeNetwork, netnsUnavailable, type TestHost, type TestNetwork } from '../../helpers/netns.js';
import { startTestPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { writeProfile } from '../../helpers/profile-file.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * schedflow on two hosts (issue 17), made as network namespaces on this machine: host `a` runs
 * the web and scheduler roles, host `b` the worker, and `services` runs Redis (and PostgreSQL,
 * the shared history). The cluster (the simulator) is served by the test on the network's
 * gateway address. Nothing of one host is on another's loopback: every connection crosses the
 * network. What the two-host test files share; each test's hosts and services are removed
 * after it.
 */
export function twoHostsEnv() {
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

  type Hosts = Record<'a' | 'b' | 'services', TestHost>;

  /** Hosts a, b and services; Redis on services; the simulator at the gateway. */
  async function twoHosts() {
    net = makeNetwork(['a', 'b', 'services']);
    const { a, b, services } = net.hosts as Hosts;
    redis = await startTestRedis({ host: services });
    sim = await startSim({ host: net.gateway });
    root = mkdtempSync(join(tmpdir(), 'schedflow-two-hosts-'));
    const configDir = join(root, 'config');
    writeProfile(configDir, sim.url);
    const env = cleanEnv({ REDIS_URL: redis.url, SCHEDFLOW_SHUTDOWN_GRACE_MS: '3000' });
    return { a, b, root, configDir, env, redis };
  }

  /** What one shared deployment needs: Redis and PostgreSQL on `services`, the cluster behind a proxy at the gateway. */
  async function sharedHosts() {
    net = makeNetwork(['a', 'b', 'services']);
    const { a, b, services } = net.hosts as Hosts;
    redis = await startTestRedis({ host: services });
    postgres = await startTestPostgres({ host: services });
    const databaseUrl = await postgres.createDatabase('schedflow');
    sim = await startSim({ host: net.gateway, cpus: 4 });
    // Between the hosts and the cluster: it can hold a submission's answer (a crash window).
    proxy = await startFlakyProxy(sim.url, net.gateway);
    const dir = mkdtempSync(join(tmpdir(), 'schedflow-two-hosts-'));
    root = dir;
    const configDir = join(dir, 'config');
    writeProfile(configDir, proxy.url);
    const env = cleanEnv({
      REDIS_URL: redis.url,
      DATABASE_URL: databaseUrl,
      SCHEDFLOW_WEBHOOK_SECRET: 'one-key-for-every-host',
      SCHEDFLOW_SHUTDOWN_GRACE_MS: '3000',
      SCHEDFLOW_LOCK_DURATION_MS: '3000',
    });
    // The test reads the shared history as an operator would, across the network.
    const operator = new pg.Pool({ connectionString: databaseUrl, max: 2 });
    operator.on('error', () => {});
    pool = operator;
    const start = (host: TestHost, name: string, roles: string, extraArgs: string[] = []) =>
      spawnDaemon({
        host,
        dataDir: join(dir, `${name}-data`),
        configDir,
        env,
        cwd: dir,
        extraArgs: ['--roles', roles, ...extraArgs],
      });
    return {
      a,
      b,
      configDir,
      databaseUrl,
      redis,
      history: () => postgresHistory(operator),
      start,
      sim,
      proxy,
    };
  }

  return { unavailable, twoHosts, sharedHosts };
}
