import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/logger.js';
import { StateDirLockedError } from '../../../src/sim/job-store.js';
import { parseSimConfig } from '../../../src/sim/sim-config.js';
import { SimServer } from '../../../src/sim/sim-server.js';
import { http, waitFor } from '../../helpers/http.js';
import { startSim, TEST_TOKENS, type TestSim } from '../../helpers/sim.js';
import { accountingJob, alice, controllerJob, type Json, submit, times, waitForState } from './sim-jobs.js';

/** Jobs that wait on others, and a simulator restarted under its jobs (lifecycle.test.ts has how a job runs). */

let sim: TestSim | undefined;

afterEach(async () => {
  await sim?.stop();
  sim = undefined;
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
