import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listRequests } from '../../../src/db/requests.js';
import type { JobRequestRow, JobTransitionRow } from '../../../src/db/schema.js';
import { cleanEnv, runCli, spawnDaemon } from '../../helpers/cli-process.js';
import { waitFor } from '../../helpers/http.js';
import { startTestRedis } from '../../helpers/redis.js';
import { daemonProcessEnv, queuedId, readHistory, SHUTDOWN_GRACE_MS, statesOf } from './daemon-process-env.js';

/**
 * `schedflow jobs …` against a `schedflow start` process, and the mistakes a user meets
 * first: the exit codes and messages a user sees.
 */

const dproc = daemonProcessEnv();

describe('schedflow jobs: submit --wait, list, show', () => {
  // `<local time>  <from> → <to>  (<source>[, reason])[  detail]`; the time's format depends on the locale.
  const TRANSITION = / {2}(\S+) → (\S+) {2}\((\w+)[^)]*\)/;

  function followed(stdout: string) {
    const lines = stdout.trimEnd().split('\n');
    const arrows = lines.filter((l) => TRANSITION.test(l)).map((l) => TRANSITION.exec(l)?.slice(1, 3).join('→'));
    return { first: lines[0], arrows, last: lines.at(-1) };
  }

  it('--wait prints every transition and the end; exit 0 for COMPLETED, 3 for FAILED; list and show agree', async () => {
    // A CPU for each of the four jobs: none waits for another to end.
    const t = await dproc.setUp({ cpus: 4 });
    const daemon = await t.startDaemon();
    // ok and bad run until the daemon has recorded them running, so --wait has a running
    // transition to print however long a poll takes on a busy machine (a sleep of 3 s did not).
    const gate = (name: string) => join(t.sim.workDir, `${name}.go`);
    const held = (name: string, end = '') => `#!/bin/sh\nwhile [ ! -e ${gate(name)} ]; do sleep 0.2; done\n${end}`;
    const waiting = Promise.all([
      t.cli(['jobs', 'submit', t.jobFile('ok', held('ok')), '--wait', '--data-dir', t.dataDir], 90_000),
      t.cli(['jobs', 'submit', t.jobFile('bad', held('bad', 'exit 3\n')), '--wait', '--data-dir', t.dataDir], 90_000),
      t.cli(['jobs', 'submit', t.jobFile('bad7', '#!/bin/sh\nexit 7\n'), '--wait', '--data-dir', t.dataDir], 90_000),
      t.cli(
        ['jobs', '--json', 'submit', t.jobFile('okjson', '#!/bin/sh\ntrue\n'), '--wait', '--data-dir', t.dataDir],
        90_000,
      ),
    ]);
    await waitFor(
      async () => {
        const running = (await readHistory(t.dataDir, (h) => listRequests(h, { state: ['running'] }))).map(
          (r) => r.name,
        );
        return running.includes('ok') && running.includes('bad') ? true : undefined;
      },
      { what: 'ok and bad recorded running', timeoutMs: 30_000, intervalMs: 200 },
    );
    for (const name of ['ok', 'bad']) writeFileSync(gate(name), '');
    const [ok, bad, bad7, okJson] = await waiting;

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
      'PENDING',
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
      '-',
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
      '-',
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
      // Accepted and queued at the daemon's one door, as the CLI's request (through its local API).
      ['-', 'accepted', 'cli'],
      ['accepted', 'queued', 'cli'],
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
    expect(unknown.stderr).toMatch(
      /^schedflow: no job request 00000000-0000-0000-0000-000000000000 in the history: an id printed by schedflow sched submit is that command's marker/,
    );

    expect((await daemon.stop()).code).toBe(143);
    // A start, the four CLIs' 90 s (which cover the wait for ok and bad running) and five CLIs more.
  }, 300_000);
});

describe('mistakes a user meets first', () => {
  it('jobs submit on a data dir where no daemon ever ran exits 2 and says how to start one', async () => {
    const root = dproc.newRoot();
    const file = join(root, 'job.yaml');
    writeFileSync(file, JSON.stringify({ name: 'x', script: '#!/bin/sh\ntrue\n' }));
    const dataDir = join(root, 'never-used');
    const result = await runCli(['jobs', 'submit', file, '--data-dir', dataDir], { cwd: root });
    expect(result.stdout).toBe('');
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      /^schedflow: no schedflow history in .*never-used \(--data-dir\): no daemon has run with that data dir/,
    );
    expect(result.stderr).toContain('npm start');
    expect(result.stderr).toContain(`schedflow start --data-dir ${dataDir}`);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
  });

  it('schedflow start without redis-server on PATH and no REDIS_URL exits 2 with one line naming apt-get', async () => {
    const root = dproc.newRoot();
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
      // Loading the daemon's modules takes about 3.5 s of CPU: beside the whole suite on two
      // cores, over 20 s (it failed there once). A start that would run on never exits at all.
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('schedflow start kept running')), 60_000)),
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
    const root = dproc.newRoot();
    const redis = await startTestRedis();
    dproc.redis = redis;
    const daemon = spawnDaemon({
      dataDir: join(root, 'data'),
      configDir: join(root, 'config'),
      env: cleanEnv({ REDIS_URL: redis.url }),
      cwd: root,
      extraArgs: ['--sim-port', '0'],
      // What a developer runs: `schedflow start` (the whole daemon, workers and all) works under tsx too.
      viaTsx: true,
    });
    await daemon.waitForOutput(/stop with Ctrl-C\n/, 60_000);
    const banner = daemon.stdout.slice(daemon.stdout.indexOf('schedflow is running'));
    expect(banner).toMatch(/using the embedded simulator at http:\/\/127\.0\.0\.1:\d+\n/);
    expect(banner).toContain('  jobs it runs end when the daemon stops: stopping it fails them (node_fail)\n');
    expect((await daemon.stop('SIGINT')).code).toBe(130);
  }, 90_000);
});

/** Refused "at once": within what a CLI start takes on a busy 2-core machine, not after waiting for the daemon. */
const AT_ONCE_MS = 20_000;

describe('schedflow jobs submit while the daemon is stopped', () => {
  const noTrace = (stderr: string) => expect(stderr).not.toMatch(/^\s+at |ENOENT|\[ioredis\]/m);

  it('with its private Redis gone: refused at once (exit 2), saying what to do; nothing queued', async () => {
    const t = await dproc.setUp();
    const env = cleanEnv({ SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS) });
    const daemon = spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env, cwd: t.root });
    await daemon.ready();
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    const startedAt = Date.now();
    const submit = await runCli(['jobs', 'submit', t.jobFile('late', '#!/bin/sh\ntrue\n'), '--data-dir', t.dataDir], {
      env,
      cwd: t.root,
    });
    expect(Date.now() - startedAt).toBeLessThan(AT_ONCE_MS);
    expect(submit.code, submit.stderr).toBe(2);
    expect(submit.stderr).toMatch(/is not running, so nothing was queued: start it \(npm start, or schedflow start/);
    expect(submit.stdout).toBe('');
    noTrace(submit.stderr);
  }, 90_000);

  it('with its external Redis gone too: refused at once (exit 2), naming the daemon that is not running, no traces', async () => {
    const t = await dproc.setUp();
    const daemon = await t.startDaemon();
    daemon.child.kill('SIGTERM');
    await daemon.exited;
    await dproc.redis?.stop();
    dproc.redis = undefined; // stopped here; the cleanup would wait on it again
    const startedAt = Date.now();
    const submit = await t.cli(['jobs', 'submit', t.jobFile('late', '#!/bin/sh\ntrue\n'), '--data-dir', t.dataDir]);
    expect(Date.now() - startedAt).toBeLessThan(AT_ONCE_MS);
    // The CLI asks the daemon's API, not its Redis: with no daemon there is nothing to wait in.
    expect(submit.code, submit.stderr).toBe(2);
    expect(submit.stderr).toMatch(/is not running, so nothing was queued: start it/);
    noTrace(submit.stderr);
  }, 90_000);
});
