import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../../src/config/daemon-config.js';
import { getRequest } from '../../../src/db/requests.js';
import { createLogger } from '../../../src/logger.js';
import { type Daemon, startDaemon } from '../../../src/main.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { defaultWorkDir } from '../../../src/sim/cluster.js';
import { SubmitterUsers } from '../../../src/sim/job-user.js';
import { parseSimConfig, SimConfigError } from '../../../src/sim/sim-config.js';
import { SimServer } from '../../../src/sim/sim-server.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';
import { accountingJob, submit, waitForState } from './sim-jobs.js';

/**
 * Issue 30, point 7: a simulator started as root (the embedded one of `npm start` by root) ran
 * job scripts as root, so any token with `sched:jobs:manage` was root on the host. It now runs
 * them as an unprivileged host user, as slurmd runs a job as its submitter; its output files are
 * opened with that user's rights, not root's.
 */
const asRoot = process.getuid?.() === 0;

function hostId(flag: '-u' | '-g', name: string): number {
  return Number(spawnSync('id', [flag, name], { encoding: 'utf8' }).stdout.trim());
}

const jobUid = asRoot ? hostId('-u', 'schedflow-job') : -1;
const jobGid = asRoot ? hostId('-g', 'schedflow-job') : -1;
/**
 * Whom alice's jobs run as: her own account where this host has one (a real test cluster's
 * cluster.sh makes alice and bob), as slurmd runs a job as its submitter; else schedflow-job.
 */
const aliceHost = spawnSync('id', ['-u', 'alice']).status === 0 ? hostId('-u', 'alice') : null;
const aliceUid = aliceHost !== null && aliceHost >= 1000 ? aliceHost : jobUid;
const aliceGid = aliceUid === jobUid ? jobGid : hostId('-g', 'alice');

describe.runIf(asRoot)('whom a submitter runs as, on a simulator started as root', () => {
  it("a person's account of this host as itself; root, a system user or no account as the job user", () => {
    const jobUser = { name: 'schedflow-job', uid: jobUid, gid: jobGid };
    const users = new SubmitterUsers(jobUser);
    expect(users.runAs('root')).toEqual(jobUser);
    // Debian's daemon (uid 1), postgres or www-data: a token naming them never reaches their files.
    expect(users.runAs('daemon')).toEqual(jobUser);
    expect(users.runAs('nobody')).toEqual(jobUser);
    expect(users.runAs('no-such-user-here')).toEqual(jobUser);
    expect(users.runAs('-x')).toEqual(jobUser);
    expect(users.runAs('alice')?.uid).toBe(aliceUid);
    // A simulator that is not root runs every job as itself.
    expect(new SubmitterUsers(null).runAs('alice')).toBeNull();
  });
});

describe.runIf(asRoot)('a simulator started as root runs jobs as an unprivileged user', () => {
  let sim: TestSim;
  let secrets: string;
  let secret: string;
  let rootFile: string;

  beforeAll(async () => {
    sim = await startSim();
    // Root's own files, in a folder anyone may pass through, as /root's or /etc's are.
    secrets = mkdtempSync(join(tmpdir(), 'schedflow-root-'));
    chmodSync(secrets, 0o755);
    secret = join(secrets, 'secret');
    writeFileSync(secret, 'root-only-content\n', { mode: 0o600 });
    rootFile = join(secrets, 'config');
    writeFileSync(rootFile, 'root-config\n', { mode: 0o644 });
  });
  afterAll(async () => {
    await sim?.stop();
    rmSync(secrets, { recursive: true, force: true });
  });

  it('the script is not root, owns what it writes, and cannot read a root-only file', async () => {
    expect(jobUid).toBeGreaterThan(0);
    const id = await submit(sim, {
      name: 'whoami',
      script: `#!/bin/sh\nid -u\nid -G\necho made > made-by-job\ncat ${secret} || echo cannot-read\n`,
    });
    await waitForState(sim, id, 'COMPLETED');
    const outFile = join(sim.workDir, `slurm-${id}.out`);
    const lines = readFileSync(outFile, 'utf8').split('\n');
    expect(lines[0]).toBe(String(aliceUid));
    // Root's supplementary groups do not follow the job.
    expect(lines[1]?.split(' ')).not.toContain('0');
    expect(lines).toContain('cannot-read');
    expect(lines.join('\n')).not.toContain('root-only-content');
    expect(statSync(join(sim.workDir, 'made-by-job')).uid).toBe(aliceUid);
    expect(statSync(outFile).uid).toBe(aliceUid);
    // The records say whom it ran as, as Slurm's user_id does; the name stays the submitter's.
    const record = await accountingJob(sim, id);
    expect(record?.user).toBe('alice');
    const controller = await http(`${sim.url}/sched/v0.0.44/job/${id}`, { headers: bearer(ALICE_TOKEN) });
    expect((controller.json as { jobs: { user_id: number; user_name: string }[] }).jobs[0]).toMatchObject({
      user_id: aliceUid,
      user_name: 'alice',
    });
  });

  it('an output path the job user may not write is not written with root rights', async () => {
    const id = await submit(sim, {
      name: 'clobber',
      script: '#!/bin/sh\necho overwritten\n',
      standard_output: rootFile,
    });
    await waitForState(sim, id, 'FAILED');
    expect(readFileSync(rootFile, 'utf8')).toBe('root-config\n');
    expect(statSync(rootFile).uid).toBe(0);
  });

  it('output to /dev/null is taken; a FIFO where the output goes fails the job without holding the simulator', async () => {
    const quiet = await submit(sim, { name: 'quiet', script: '#!/bin/sh\necho gone\n', standard_output: '/dev/null' });
    await waitForState(sim, quiet, 'COMPLETED');
    const fifo = join(sim.workDir, 'planted.out');
    spawnSync('mkfifo', [fifo]);
    chownSync(fifo, aliceUid, aliceGid);
    const id = await submit(sim, { name: 'fifo', script: '#!/bin/sh\necho hi\n', standard_output: fifo });
    await waitForState(sim, id, 'FAILED');
    const ping = await http(`${sim.url}/ping`);
    expect(ping.status).toBe(200);
  });

  it('a working folder the job user cannot enter is left for /tmp, as slurmstepd does', async () => {
    const closed = join(secrets, 'closed');
    mkdirSync(closed, { mode: 0o700 });
    const id = await submit(sim, {
      name: 'no-entry',
      script: '#!/bin/sh\npwd\n',
      // Root's folder (0700 by mkdtemp): the job's user may not enter it.
      current_working_directory: closed,
      standard_output: join(sim.workDir, 'no-entry.out'),
    });
    await waitForState(sim, id, 'COMPLETED');
    const out = readFileSync(join(sim.workDir, 'no-entry.out'), 'utf8');
    expect(out).toMatch(/couldn't chdir to `.*': Permission denied: going to \/tmp instead/);
    expect(out).toContain('\n/tmp\n');
  });
});

describe.runIf(asRoot)('the job user a simulator started as root takes', () => {
  it('is never root, and must exist: it refuses to start, saying what to do', () => {
    const logger = createLogger({ level: 'silent' });
    const start = (jobUser: string) =>
      new SimServer({ config: parseSimConfig({ jobUser, stateDir: join(tmpdir(), 'never-made') }), logger });
    expect(() => start('root')).toThrow(/jobs must run as an unprivileged user/);
    expect(() => start('no-such-user-of-this-host')).toThrow(/is not a user of this host/);
    expect(() => start('root')).toThrow(SimConfigError);
  });
});

describe.runIf(asRoot)('the embedded simulator of a daemon started as root', () => {
  let daemon: Daemon | undefined;
  let root: string | undefined;
  afterAll(async () => {
    await daemon?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
    // Its own working folder and scripts, in the temporary folder (see defaultWorkDir).
    if (daemon) {
      const work = defaultWorkDir(join(daemon.config.dataDir, 'sim'));
      rmSync(work, { recursive: true, force: true });
      rmSync(`${work}-scripts`, { recursive: true, force: true });
    }
  });

  it('runs a job of a submitter with no account here (demo) as schedflow-job, in its working folder', async () => {
    root = mkdtempSync(join(tmpdir(), 'schedflow-embedded-'));
    mkdirSync(join(root, 'config'));
    const config = loadDaemonConfig(
      {},
      {
        dataDir: join(root, 'data'),
        configDir: join(root, 'config'),
        simPort: 0,
        listen: '127.0.0.1:0',
        pollFloorMs: 500,
        shutdownGraceMs: 2000,
        queuePrefix: `test-${Math.random().toString(36).slice(2, 10)}`,
      },
    );
    daemon = await startDaemon(config, createLogger({ level: process.env.LOG_LEVEL ?? 'silent' }));
    expect(daemon.simJobUser).toBe('schedflow-job');
    const spec = jobSpecSchema.parse({ name: 'embedded-whoami', script: '#!/bin/sh\nid -u\ntouch mine\n' });
    const id = await daemon.submit({ spec, owner: 'default', actor: 'test', origin: 'cli' });
    const store = daemon.history.store;
    const done = await waitFor(
      async () => {
        const request = await getRequest(store, id);
        return request?.state === 'completed' || request?.state === 'failed' ? request : undefined;
      },
      { what: 'the job to end', timeoutMs: 20_000 },
    );
    expect(done.state).toBe('completed');
    const work = defaultWorkDir(join(config.dataDir, 'sim'));
    expect(readFileSync(join(work, `slurm-${done.jobId}.out`), 'utf8').trim()).toBe(String(jobUid));
    expect(statSync(join(work, 'mine')).uid).toBe(jobUid);
    // Root's, sticky and open to every job user, as /tmp is.
    expect(statSync(work).uid).toBe(0);
    expect(statSync(work).mode & 0o7777).toBe(0o1777);
  });
});
