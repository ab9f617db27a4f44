import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/logger.js';
import { StateDirLockedError } from '../../../src/sim/job-store.js';
import { parseSimConfig } from '../../../src/sim/sim-config.js';
import { SimServer } from '../../../src/sim/sim-server.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, startSim, TEST_TOKENS, type TestSim } from '../../helpers/sim.js';

type Json = Record<string, unknown>;
const alice = bearer(ALICE_TOKEN);

let sim: TestSim | undefined;

afterEach(async () => {
  await sim?.stop();
  sim = undefined;
});

async function submit(s: TestSim, job: Json): Promise<number> {
  const res = await http(`${s.url}/sched/v0.0.44/job/submit`, {
    method: 'POST',
    headers: alice,
    body: { job: { current_working_directory: s.workDir, environment: ['PATH=/usr/bin:/bin'], ...job } },
  });
  expect(res.status, res.text).toBe(200);
  return (res.json as { job_id: number }).job_id;
}

async function controllerJob(s: TestSim, id: number): Promise<Json | undefined> {
  const res = await http(`${s.url}/sched/v0.0.44/job/${id}`, { headers: alice });
  if (res.status === 404) return undefined;
  return (res.json as { jobs: Json[] }).jobs[0];
}

async function accountingJob(s: TestSim, id: number): Promise<Json | undefined> {
  const res = await http(`${s.url}/scheddb/v0.0.44/job/${id}`, { headers: alice });
  return res.status === 200 ? (res.json as { jobs: Json[] }).jobs[0] : undefined;
}

/** Waits until the controller reports the job in `state`, recording every state seen on the way. */
async function waitForState(s: TestSim, id: number, state: string, seen: string[] = []): Promise<Json> {
  return waitFor(
    async () => {
      const job = await controllerJob(s, id);
      const current = (job?.job_state as string[] | undefined)?.[0];
      if (current && seen.at(-1) !== current) seen.push(current);
      return current === state ? job : undefined;
    },
    { what: `job ${id} to reach ${state}`, intervalMs: 250, timeoutMs: 20_000 },
  );
}

function times(job: Json | undefined): { start: number; end: number } {
  if (!job) throw new Error('no accounting record');
  return job.time as { start: number; end: number };
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('jobs really run', () => {
  it('PENDING → RUNNING → COMPLETED, output in slurm-<id>.out, exactly the given environment', async () => {
    sim = await startSim({ minJobAgeSec: 3 });
    const s = sim;
    // Hold the only CPUs with a blocker so the job is seen PENDING first.
    const blocker = await submit(s, { name: 'blocker', tasks: 2, script: '#!/bin/sh\nsleep 2.5\n' });
    const since = Math.floor(Date.now() / 1000) - 1;
    const id = await submit(s, {
      name: 'hello',
      environment: ['PATH=/usr/bin:/bin', 'GREETING=hello world'],
      // Runs longer than the 2 s cache lifetime, so polling sees it RUNNING.
      script: ['#!/bin/bash', 'echo "$GREETING from $SLURM_JOB_ID in $PWD"', 'echo "HOME=[$HOME]"', 'sleep 3', ''].join(
        '\n',
      ),
    });
    const seen: string[] = [];
    const done = await waitForState(s, id, 'COMPLETED', seen);
    expect(seen).toEqual(['PENDING', 'RUNNING', 'COMPLETED']);
    expect(done.exit_code).toMatchObject({ status: ['SUCCESS'], return_code: { number: 0 } });
    const out = readFileSync(join(s.workDir, `slurm-${id}.out`), 'utf8');
    expect(out).toContain(`hello world from ${id} in ${s.workDir}`);
    // The simulator's own environment (HOME and the rest) does not leak into the job.
    expect(out).toContain('HOME=[]');
    expect(blocker).toBeLessThan(id);

    // After MinJobAge the job leaves the controller but stays in accounting.
    await waitFor(async () => ((await controllerJob(s, id)) ? undefined : true), {
      what: 'job to leave /jobs',
      timeoutMs: 10_000,
    });
    const listing = await http(`${s.url}/sched/v0.0.44/jobs`, { headers: alice });
    expect((listing.json as { jobs: Json[] }).jobs.map((j) => j.job_id)).not.toContain(id);
    const history = await http(`${s.url}/scheddb/v0.0.44/jobs?start_time=${since}`, { headers: alice });
    const record = (history.json as { jobs: Json[] }).jobs.find((j) => j.job_id === id);
    expect(record?.state).toEqual({ current: ['COMPLETED'], reason: 'None' });
    const time = record?.time as { submission: number; start: number; end: number; elapsed: number };
    expect(time.start).toBeGreaterThanOrEqual(time.submission);
    expect(time.end).toBeGreaterThanOrEqual(time.start);
    expect(time.elapsed).toBe(time.end - time.start);
  });

  it('a non-zero exit is FAILED with that exit code', async () => {
    sim = await startSim();
    const id = await submit(sim, { name: 'fails', script: '#!/bin/sh\necho oops >&2\nexit 7\n' });
    const job = await waitForState(sim, id, 'FAILED');
    expect(job.state_reason).toBe('NonZeroExitCode');
    expect(job.exit_code).toMatchObject({ status: ['ERROR'], return_code: { set: true, number: 7 } });
    const record = await accountingJob(sim, id);
    expect(record?.exit_code).toMatchObject({ return_code: { number: 7 } });
    expect(readFileSync(join(sim.workDir, `slurm-${id}.out`), 'utf8')).toContain('oops');
  });

  it('time_limit (minutes, scaled) ends the job as TIMEOUT', async () => {
    // 60x: a one-minute limit lasts one second.
    sim = await startSim({ timeScale: 60 });
    const id = await submit(sim, {
      name: 'slow',
      time_limit: { set: true, number: 1 },
      script: '#!/bin/sh\nsleep 30\n',
    });
    const job = await waitForState(sim, id, 'TIMEOUT');
    expect(job.time_limit).toEqual({ set: true, infinite: false, number: 1 });
    expect(job.exit_code).toMatchObject({ status: ['SIGNALED'], signal: { name: 'TERM' } });
  });

  it('DELETE cancels a running job and kills its whole process group', async () => {
    sim = await startSim();
    const pidFile = join(sim.workDir, 'child.pid');
    const id = await submit(sim, {
      name: 'victim',
      script: `#!/bin/sh\nsleep 60 &\necho $! > ${pidFile}\nwait\n`,
    });
    await waitForState(sim, id, 'RUNNING');
    const childPid = await waitFor(
      async () => (existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : undefined),
      {
        what: 'the job to write its pid',
      },
    );
    expect(pidAlive(childPid)).toBe(true);
    const res = await http(`${sim.url}/sched/v0.0.44/job/${id}`, { method: 'DELETE', headers: alice });
    expect(res.status).toBe(200);
    await waitFor(async () => (pidAlive(childPid) ? undefined : true), { what: 'the background child to die' });
    const job = await waitForState(sim, id, 'CANCELLED');
    expect(job.exit_code).toMatchObject({ status: ['SIGNALED'], signal: { id: { number: 15 }, name: 'TERM' } });
    const again = await http(`${sim.url}/sched/v0.0.44/job/${id}`, { method: 'DELETE', headers: alice });
    expect((again.json as { status: { error: Json }[] }).status[0]?.error.code).toBe(2021);
  });

  it('a cancelled job is CANCELLED,COMPLETING until its script is gone, then says how it ended', async () => {
    sim = await startSim();
    const ready = join(sim.workDir, 'trap.ready');
    // Takes a moment (under the test's 1 s KillWait) to end after SIGTERM, as a script that cleans up would.
    const id = await submit(sim, {
      name: 'slow-to-die',
      script: `#!/bin/sh\ntrap 'sleep 0.4; exit 3' TERM\ntouch ${ready}\nwhile true; do sleep 0.1; done\n`,
    });
    await waitFor(async () => (existsSync(ready) ? true : undefined), { what: 'the trap to be set' });
    const res = await http(`${sim.url}/sched/v0.0.44/job/${id}`, { method: 'DELETE', headers: alice });
    expect(res.status).toBe(200);
    const dying = await controllerJob(sim, id);
    // As a real 25.11.7 answers meanwhile: nothing known of the script's end yet.
    expect(dying?.job_state).toEqual(['CANCELLED', 'COMPLETING']);
    expect(dying?.exit_code).toMatchObject({ status: ['SUCCESS'], return_code: { number: 0 } });
    const states = await http(`${sim.url}/sched/v0.0.44/jobs/state?job_id=${id}`, { headers: alice });
    expect((states.json as { jobs: Json[] }).jobs[0]?.state).toEqual(['CANCELLED', 'COMPLETING']);
    const ended = await waitFor(
      async () => {
        const job = await controllerJob(sim as TestSim, id);
        return (job?.job_state as string[] | undefined)?.length === 1 ? job : undefined;
      },
      { what: 'the script to be gone' },
    );
    expect(ended.job_state).toEqual(['CANCELLED']);
    expect(ended.exit_code).toMatchObject({ status: ['ERROR'], return_code: { number: 3 } });
  });

  it('jobs wait PENDING (Resources) while CPUs are taken, then run', async () => {
    sim = await startSim({ cpus: 2 });
    const first = await submit(sim, { name: 'wide', tasks: 1, cpus_per_task: 2, script: '#!/bin/sh\nsleep 2\n' });
    const second = await submit(sim, { name: 'queued', script: '#!/bin/sh\ntrue\n' });
    await waitForState(sim, first, 'RUNNING');
    const waiting = await controllerJob(sim, second);
    expect(waiting?.job_state).toEqual(['PENDING']);
    expect(waiting?.state_reason).toBe('Resources');
    await waitForState(sim, second, 'COMPLETED');
    const a = await accountingJob(sim, first);
    const b = await accountingJob(sim, second);
    expect(times(b).start).toBeGreaterThanOrEqual(times(a).end);
  });

  it('standard_output and standard_error patterns are honoured', async () => {
    sim = await startSim();
    const id = await submit(sim, {
      name: 'named',
      standard_output: 'out-%j-%x.log',
      standard_error: `${sim.workDir}/err-%j.log`,
      script: '#!/bin/sh\necho to-out\necho to-err >&2\n',
    });
    const job = await waitForState(sim, id, 'COMPLETED');
    expect(job.stdout_expanded).toBe(join(sim.workDir, `out-${id}-named.log`));
    expect(readFileSync(join(sim.workDir, `out-${id}-named.log`), 'utf8')).toBe('to-out\n');
    expect(readFileSync(join(sim.workDir, `err-${id}.log`), 'utf8')).toBe('to-err\n');
  });

  it('comment is kept and returned by the controller and accounting', async () => {
    sim = await startSim();
    const id = await submit(sim, { name: 'commented', comment: 'schedflow:req-123', script: '#!/bin/sh\ntrue\n' });
    const job = await waitForState(sim, id, 'COMPLETED');
    expect(job.comment).toBe('schedflow:req-123');
    expect((await accountingJob(sim, id))?.comment).toMatchObject({ job: 'schedflow:req-123' });
  });
});

describe('dependencies', () => {
  it('afterok holds a job PENDING (Dependency) until its parent completes', async () => {
    sim = await startSim();
    const parent = await submit(sim, { name: 'parent', script: '#!/bin/sh\nsleep 2\n' });
    const child = await submit(sim, { name: 'child', dependency: `afterok:${parent}`, script: '#!/bin/sh\ntrue\n' });
    const held = await controllerJob(sim, child);
    expect(held?.job_state).toEqual(['PENDING']);
    expect(held?.state_reason).toBe('Dependency');
    await waitForState(sim, child, 'COMPLETED');
    const p = await accountingJob(sim, parent);
    const c = await accountingJob(sim, child);
    expect(times(c).start).toBeGreaterThanOrEqual(times(p).end);
  });

  it('afterok on a failed parent can never run: the child stays PENDING (DependencyNeverSatisfied), as real Slurm without kill_invalid_depend keeps it', async () => {
    sim = await startSim();
    const parent = await submit(sim, { name: 'bad-parent', script: '#!/bin/sh\nexit 1\n' });
    const child = await submit(sim, { name: 'doomed', dependency: `afterok:${parent}`, script: '#!/bin/sh\ntrue\n' });
    const grandchild = await submit(sim, {
      name: 'doomed2',
      dependency: `afterany:${child}`,
      script: '#!/bin/sh\ntrue\n',
    });
    await waitForState(sim, parent, 'FAILED');
    const held = await waitFor(
      async () => {
        const job = await controllerJob(sim as TestSim, child);
        return job?.state_reason === 'DependencyNeverSatisfied' ? job : undefined;
      },
      { what: 'the child to be held for good' },
    );
    expect(held.job_state).toEqual(['PENDING']);
    // Only a cancel ends it; afterany runs after any end, a cancellation included.
    const res = await http(`${sim.url}/sched/v0.0.44/job/${child}`, { method: 'DELETE', headers: alice });
    expect(res.status).toBe(200);
    await waitForState(sim, child, 'CANCELLED');
    await waitForState(sim, grandchild, 'COMPLETED');
  });

  it('afternotok runs only after a failure; afterany after any end', async () => {
    sim = await startSim();
    const parent = await submit(sim, { name: 'p', script: '#!/bin/sh\nexit 2\n' });
    const onFail = await submit(sim, {
      name: 'on-fail',
      dependency: `afternotok:${parent}`,
      script: '#!/bin/sh\ntrue\n',
    });
    const always = await submit(sim, { name: 'always', dependency: `afterany:${parent}`, script: '#!/bin/sh\ntrue\n' });
    await waitForState(sim, onFail, 'COMPLETED');
    await waitForState(sim, always, 'COMPLETED');
    const okParent = await submit(sim, { name: 'p2', script: '#!/bin/sh\ntrue\n' });
    const notRun = await submit(sim, {
      name: 'skip',
      dependency: `afternotok:${okParent}`,
      script: '#!/bin/sh\ntrue\n',
    });
    const held = await waitFor(
      async () => {
        const job = await controllerJob(sim as TestSim, notRun);
        return job?.state_reason === 'DependencyNeverSatisfied' ? job : undefined;
      },
      { what: 'the afternotok child of a success to be held for good' },
    );
    expect(held.job_state).toEqual(['PENDING']);
  });

  it('a dependency on an unknown job or with bad syntax is refused (error 2038)', async () => {
    sim = await startSim();
    for (const dependency of ['afterok:999999', 'afterwards:1', 'afterok:abc']) {
      const res = await http(`${sim.url}/sched/v0.0.44/job/submit`, {
        method: 'POST',
        headers: alice,
        body: { job: { script: '#!/bin/sh\ntrue\n', current_working_directory: sim.workDir, dependency } },
      });
      expect(res.status).toBe(500);
      expect((res.json as { errors: Json[] }).errors[0]?.error_number).toBe(2038);
    }
  });
});

describe('a simulator restart', () => {
  it('keeps the job table; jobs that were running become NODE_FAIL, pending ones still run, ids continue', async () => {
    sim = await startSim({ cpus: 1 });
    const running = await submit(sim, { name: 'interrupted', script: '#!/bin/sh\nsleep 60\n' });
    const pending = await submit(sim, { name: 'waits', script: '#!/bin/sh\ntrue\n' });
    await waitForState(sim, running, 'RUNNING');
    await sim.restart();
    const failed = await waitForState(sim, running, 'NODE_FAIL');
    expect(failed.end_time).toMatchObject({ set: true });
    await waitForState(sim, pending, 'COMPLETED');
    const next = await submit(sim, { name: 'after-restart', script: '#!/bin/sh\ntrue\n' });
    expect(next).toBeGreaterThan(pending);
    expect((await accountingJob(sim, running))?.state).toMatchObject({ current: ['NODE_FAIL'] });
  });

  it('a second simulator on the same state dir is refused and leaves the running jobs alone', async () => {
    sim = await startSim();
    const id = await submit(sim, { name: 'keeps-running', script: '#!/bin/sh\nsleep 4\n' });
    await waitForState(sim, id, 'RUNNING');
    const intruder = new SimServer({
      config: parseSimConfig({ port: 0, stateDir: sim.stateDir }),
      logger: createLogger({ level: 'silent' }),
      tokens: TEST_TOKENS,
    });
    await expect(intruder.start()).rejects.toThrow(StateDirLockedError);
    await expect(intruder.start()).rejects.toThrow(/in use by another simulator/);
    expect((await waitForState(sim, id, 'COMPLETED')).job_state).toEqual(['COMPLETED']);
  });
});
