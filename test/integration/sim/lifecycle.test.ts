import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { http, waitFor } from '../../helpers/http.js';
import { startSim, type TestSim } from '../../helpers/sim.js';
import { accountingJob, alice, controllerJob, type Json, submit, times, waitForState } from './sim-jobs.js';

let sim: TestSim | undefined;

afterEach(async () => {
  await sim?.stop();
  sim = undefined;
});

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
