import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listRuns } from '../../../src/db/runs.js';
import { spawnDaemon } from '../../helpers/cli-process.js';
import { http, waitFor } from '../../helpers/http.js';
import { twoHostsEnv } from './two-hosts-env.js';

/**
 * Two hosts sharing one Redis (see two-hosts-env.ts): a history each is refused; with one
 * PostgreSQL history, a cron pipeline's ticks fire once with schedulers on both. The jobs that
 * cross the hosts are in two-hosts-jobs.test.ts, a file of its own so the two run side by side.
 */

const { unavailable, twoHosts, sharedHosts } = twoHostsEnv();

describe.skipIf(unavailable !== null)('two hosts sharing one Redis', () => {
  it('with a SQLite history each: the worker host refuses to start, naming the other history and what to configure', async () => {
    const { a, b, root, configDir, env, redis } = await twoHosts();
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
    const password = new URL(redis.url).password;
    expect(password).not.toBe('');
    for (const output of [web.stdout, web.stderr, worker.stdout, worker.stderr]) expect(output).not.toContain(password);
  }, 60_000);
});

describe.skipIf(unavailable !== null)('two hosts sharing Redis and a PostgreSQL history on a third', () => {
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
