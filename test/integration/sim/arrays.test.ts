import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateAgainstSpec } from '../../../src/sched/spec-validator.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';

/**
 * The simulator's job arrays answer as real Slurm 25.11.7's do (captured in
 * test/fixtures/real-slurm-25.11/array_*): ids, the pending record, the `%` throttle, per-task
 * records in accounting, MaxArraySize.
 */

type Json = Record<string, unknown>;
let sim: TestSim;
const alice = bearer(ALICE_TOKEN);

beforeAll(async () => {
  sim = await startSim({ cpus: 4, maxArraySize: 101 });
});

afterAll(async () => {
  await sim.stop();
});

const submit = (array: string, script = '#!/bin/sh\nsleep 1\n') =>
  http(`${sim.url}/sched/v0.0.44/job/submit`, {
    method: 'POST',
    headers: alice,
    body: {
      job: {
        name: 'arr',
        array,
        script,
        current_working_directory: sim.workDir,
        environment: ['PATH=/usr/bin:/bin'],
      },
    },
  });
const get = async (path: string) => (await http(`${sim.url}${path}`, { headers: alice })).json as { jobs: Json[] };
const noVal = (n: number | null) => ({ set: n !== null, infinite: false, number: n ?? 0 });

describe('job arrays in the simulator', () => {
  it('runs tasks under their own ids, throttled, the pending ones in the array record', async () => {
    // Tasks run until the test opens the gate, so what is pending is known whatever the load.
    const gate = join(sim.workDir, `gate-${Date.now()}`);
    const submitted = await submit(
      '0-4%2',
      `#!/bin/sh\nwhile [ ! -e ${gate} ]; do sleep 0.1; done\n[ "$SLURM_ARRAY_TASK_ID" = 3 ] && exit 3\nexit 0\n`,
    );
    expect(submitted.status).toBe(200);
    const arrayId = (submitted.json as { job_id: number }).job_id;

    const states = await get(`/sched/v0.0.44/jobs/state?job_id=${arrayId}`);
    const ids = states.jobs.map((j) => j.job_id as string);
    // Two running tasks with ids of their own, three pending under the array's id.
    expect(ids.filter((id) => id.startsWith(`${arrayId}_`))).toEqual([`${arrayId}_2`, `${arrayId}_3`, `${arrayId}_4`]);
    expect(states.jobs.filter((j) => (j.state as string[])[0] === 'RUNNING')).toHaveLength(2);

    const records = (await get(`/sched/v0.0.44/job/${arrayId}`)).jobs;
    expect(records[0]).toMatchObject({
      job_id: arrayId,
      array_job_id: noVal(arrayId),
      array_task_id: noVal(null),
      array_task_string: '2-4%2',
      array_max_tasks: noVal(2),
      job_state: ['PENDING'],
      state_reason: 'JobArrayTaskLimit',
    });
    expect(records.slice(1).map((r) => (r.array_task_id as { number: number }).number)).toEqual([1, 0]);
    // slurmdbd has a record from the second after its submission on.
    const accounting = await waitFor(
      async () => {
        const all = (await get(`/scheddb/v0.0.44/jobs?step=${arrayId}`)).jobs;
        return all.some((r) => r.job_id === arrayId) ? all : undefined;
      },
      { what: "the array's record in accounting", timeoutMs: 10_000, intervalMs: 100 },
    );
    expect(accounting.find((r) => r.job_id === arrayId)?.array).toMatchObject({
      job_id: arrayId,
      task: '0x1C',
      task_id: noVal(null),
      limits: { max: { running: { tasks: 2 } } },
    });
    for (const body of [records[0], ...records.slice(1)]) {
      expect(validateAgainstSpec('v0.0.44', 'job_info', body).errors).toEqual([]);
    }

    writeFileSync(gate, '');
    // To the end: every task its own record in accounting, the last one under the array's id.
    const ended = await waitFor(
      async () => {
        const all = (await get(`/scheddb/v0.0.44/jobs?step=${arrayId}`)).jobs;
        const done = all.filter((r) =>
          ['COMPLETED', 'FAILED'].includes((r.state as { current: string[] }).current[0] ?? ''),
        );
        return done.length === 5 ? all : undefined;
      },
      { what: 'every task to end', timeoutMs: 30_000, intervalMs: 200 },
    );
    const byTask = new Map(ended.map((r) => [(r.array as { task_id: { number: number } }).task_id.number, r]));
    expect(byTask.get(3)).toMatchObject({ state: { current: ['FAILED'] }, exit_code: { return_code: noVal(3) } });
    expect(byTask.get(4)?.job_id).toBe(arrayId);
    expect(new Set(ended.map((r) => r.job_id)).size).toBe(5);
    // A task's own id names that task alone.
    const one = byTask.get(0)?.job_id as number;
    expect((await get(`/scheddb/v0.0.44/jobs?step=${one}`)).jobs).toHaveLength(1);
  });

  it('refuses what slurmctld refuses with 2081', async () => {
    for (const array of ['5-1', '0-101', '0-5%x']) {
      const refused = await submit(array);
      expect(refused.status, array).toBe(500);
      expect((refused.json as { errors: Json[] }).errors[0]).toMatchObject({
        error_number: 2081,
        error: 'Invalid job array specification',
      });
    }
  });
});
