import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanEnv, killLeftovers, spawnDaemon } from '../../helpers/cli-process.js';
import { writeProfile } from '../../helpers/daemon.js';
import { http } from '../../helpers/http.js';
import { makeNetwork, netnsUnavailable, type TestNetwork } from '../../helpers/netns.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * schedflow on two hosts (issue 17), made as network namespaces on this machine: host `a` runs
 * the web and scheduler roles, host `b` the worker, and `services` runs Redis. The cluster (the
 * simulator) is served by the test on the network's gateway address. Nothing of one host is
 * on another's loopback: every connection crosses the network.
 */

const unavailable = netnsUnavailable();
if (unavailable) console.warn(`two-host tests skipped: ${unavailable}`);

let net: TestNetwork | undefined;
let redis: TestRedis | undefined;
let sim: TestSim | undefined;
let root: string | undefined;

afterEach(async () => {
  await killLeftovers();
  await redis?.stop();
  await sim?.stop();
  net?.remove();
  if (root) rmSync(root, { recursive: true, force: true });
  net = redis = sim = root = undefined;
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
