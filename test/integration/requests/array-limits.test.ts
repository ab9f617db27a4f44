import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { sql } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { insertArrayTasks, tasksOf, updateArrayTask } from '../../../src/db/array-tasks.js';
import type { History } from '../../../src/db/history.js';
import { getRequest, listRequests } from '../../../src/db/requests.js';
import { listRuns } from '../../../src/db/runs.js';
import { recordRequest } from '../../../src/requests/accept.js';
import { transition } from '../../../src/requests/transition.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { apiClient, errorOf } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, startTestDaemon } from '../../helpers/daemon.js';

/**
 * Issue 30, point 3: an array expression is a few bytes that can name millions of tasks. Its
 * size is bounded at the door by the profile's `maxArraySize` (Slurm's MaxArraySize), before
 * anything is recorded; a task's row is made when the scheduler reports the task; and an index
 * expression sent to `retry-tasks` is read in time linear in its length, listed only within the
 * array's own size.
 */

const env = daemonTestEnv();

/** Rows of `array_tasks`, every request's. */
async function taskRows(h: History): Promise<number> {
  const [row] = await h.all(h.db.select({ n: sql<number>`count(*)`.mapWith(Number) }).from(h.t.arrayTasks));
  return row?.n ?? 0;
}

/** Runs `work` and says the longest the event loop was held meanwhile (ms). */
async function heldWhile<T>(work: () => Promise<T>): Promise<{ result: T; heldMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  try {
    const result = await work();
    return { result, heldMs: histogram.max / 1e6 };
  } finally {
    histogram.disable();
  }
}

describe('an array past the cluster MaxArraySize', () => {
  it('of 4 million tasks is refused at the door (API 422, CLI exit 2, naming the limit), nothing recorded', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const store = td.daemon.history.store;
    const spec = { name: 'huge', script: '#!/bin/sh\ntrue\n', array: '0-4000000%1' };

    const { result: refused, heldMs } = await heldWhile(() =>
      api.call('POST', '/api/v1/jobs', { token, body: { spec } }),
    );
    expect(refused.status).toBe(422);
    expect(errorOf(refused).code).toBe('SCHEDFLOW_ERR_ARRAY_TOO_LARGE');
    expect(errorOf(refused).message).toContain('index 4000000');
    expect(errorOf(refused).message).toContain('profile "test" takes indexes 0 to 1000 (maxArraySize 1001');
    expect(await listRequests(store, {})).toEqual([]);
    expect(await taskRows(store)).toBe(0);
    // Answered without holding the daemon: writing the rows held it for minutes (its test timed
    // out without an answer). A second of slack for the other work sharing these cores.
    expect(heldMs).toBeLessThan(1000);

    // The CLI's door is the daemon's (daemon.json carries the limit): nothing queued.
    const file = join(td.dataDir, '..', 'huge.yaml');
    writeFileSync(file, JSON.stringify(spec));
    const cli = await runCli(['jobs', 'submit', file, '--data-dir', td.dataDir]);
    expect(cli.code).toBe(2);
    expect(cli.stderr).toContain(
      'huge.yaml: the array names index 4000000, but profile "test" takes indexes 0 to 1000',
    );
    expect(await td.daemon.queues.submit.getJobCounts('waiting', 'active', 'delayed')).toEqual({
      waiting: 0,
      active: 0,
      delayed: 0,
    });

    // Slurm's default itself is taken: indexes 0 to 1000.
    const widest = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: { ...spec, name: 'widest', array: '1000' } },
    });
    expect(widest.status).toBe(201);
  });

  it("follows the profile's maxArraySize, for the API and pipeline steps alike", async () => {
    const sim = await env.sim({ maxArraySize: 11 });
    // A pipeline file whose array step the cluster would refuse is refused when it is read (an
    // array cannot take a parameter, so its size is known then).
    const pipeline = (array: string) =>
      ['steps:', '  shards:', `    array: "${array}"`, '    script: |', '      #!/bin/sh', '      true'].join('\n');
    const td = await startTestDaemon(
      sim.url,
      env.redis.url,
      {},
      { maxArraySize: 11 },
      { 'over.yaml': pipeline('0-11'), 'fits.yaml': pipeline('0-10') },
    );
    env.defer(() => td.stop());
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const store = td.daemon.history.store;
    const spec = { name: 'arr', script: '#!/bin/sh\ntrue\n' };

    const over = await api.call('POST', '/api/v1/jobs', { token, body: { spec: { ...spec, array: '0-3,11' } } });
    expect(over.status).toBe(422);
    expect(errorOf(over).message).toContain('takes indexes 0 to 10 (maxArraySize 11');

    const broken = await td.daemon.pipelines.get('over');
    expect(broken?.error).toContain("steps.shards.array: index 11 is past the profile's maxArraySize 11");
    await expect(td.daemon.pipelines.trigger('over', { actor: 'test', trigger: 'api', params: {} })).rejects.toThrow();
    expect(await listRuns(store, {})).toEqual([]);
    const fits = await td.daemon.pipelines.trigger('fits', { actor: 'test', trigger: 'api', params: {} });
    expect(fits.state).not.toBe('skipped');

    const within = await api.call('POST', '/api/v1/jobs', { token, body: { spec: { ...spec, array: '0-10%2' } } });
    expect(within.status).toBe(201);
    const { id } = within.json as { id: string };
    const row = await td.waitForState(id, 'completed', 45_000);
    expect(row.arrayTaskCount).toBe(11);
    // The two the door let in: the array within the limit and the run's step.
    expect(await listRequests(store, {})).toHaveLength(2);
  });
});

describe("an array's task rows", () => {
  it('are made as the scheduler reports tasks, not for the whole expression when it is recorded', async () => {
    const sim = await env.sim({ cpus: 4 });
    const td = await env.daemon(sim.url);
    const store = td.daemon.history.store;
    // Recorded as the submit worker records what the CLI queued (its door is the CLI's): a
    // request the scheduler will refuse costs the history its row, not a row per index.
    const spec = jobSpecSchema.parse({ name: 'wide', script: '#!/bin/sh\ntrue\n', array: '0-99999:3,5' });
    const id = randomUUID();
    await recordRequest(store, {
      id,
      profile: 'test',
      name: spec.name,
      spec,
      owner: 'default',
      actor: 'test',
      origin: 'cli',
      at: Date.now(),
      source: 'cli',
    });
    expect((await getRequest(store, id))?.arrayTaskCount).toBe(33_335);
    expect(await taskRows(store)).toBe(0);

    // The API shows the tasks not reported yet as pending, by count.
    const api = apiClient(td);
    const token = await api.token(['read']);
    const shown = await api.call('GET', `/api/v1/jobs/${id}`, { token });
    expect(shown.json).toMatchObject({ array: { task_count: 33_335, counts: { pending: 33_335 }, failures: [] } });

    // A real one: its tasks get rows once the poller has seen them, and it ends from them.
    const done = await td.daemon.submit({
      spec: jobSpecSchema.parse({ name: 'small', script: '#!/bin/sh\ntrue\n', array: '0-5:2,7' }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(done, 'completed', 15_000);
    expect((await tasksOf(store, done)).map((task) => [task.taskId, task.state])).toEqual([
      [0, 'completed'],
      [2, 'completed'],
      [4, 'completed'],
      [7, 'completed'],
    ]);
  });
});

describe('retry-tasks with a hostile index expression', () => {
  it('is read in linear time, listed only within the array, and refused naming its indexes', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const store = td.daemon.history.store;
    // A two-task array (0 and 2) whose task 2 failed, written as the daemon would have.
    const spec = jobSpecSchema.parse({ name: 'pair', script: '#!/bin/sh\ntrue\n', array: '0-2:2%1' });
    const id = randomUUID();
    const at = Date.now();
    await recordRequest(store, {
      id,
      profile: 'test',
      name: spec.name,
      spec,
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at,
      source: 'api',
    });
    await insertArrayTasks(store, id, [0, 2]);
    await updateArrayTask(store, id, 0, { state: 'completed', exitCode: 0 });
    await updateArrayTask(store, id, 2, { state: 'failed', exitCode: 1 });
    await transition(store, id, { to: 'failed', source: 'poll', at, reason: '1 of 2 tasks did not complete' });
    const retry = (indexes: string) => api.call('POST', `/api/v1/jobs/${id}/retry-tasks`, { token, body: { indexes } });

    // 80 million indexes named, 200 bytes: held the event loop 5.6 s and stored nothing.
    const hostile = Array.from({ length: 20 }, () => '0-4000000').join(',');
    const { result: refused, heldMs } = await heldWhile(() => retry(hostile));
    expect(refused.status).toBe(409);
    expect(errorOf(refused).code).toBe('SCHEDFLOW_ERR_NO_TASKS_TO_RETRY');
    expect(errorOf(refused).message).toContain('its indexes go from 0 to 2 at most (its tasks: 0-2:2)');
    expect(heldMs).toBeLessThan(1000);

    // As much of it as a body holds: refused by its length, before it is read.
    const megabyte = Array.from({ length: 100_000 }, () => '0-4000000').join(',');
    const { result: long, heldMs: longHeldMs } = await heldWhile(() => retry(megabyte));
    expect(long.status).toBe(400);
    expect(errorOf(long).code).toBe('SCHEDFLOW_ERR_VALIDATION');
    expect(longHeldMs).toBeLessThan(1000);

    // Within the array's largest index but not one of its tasks; then ones that are, named twice.
    const between = await retry('1');
    expect(between.status).toBe(409);
    expect(errorOf(between).message).toContain(`task 1 is not a task of request ${id} (its tasks: 0-2:2)`);
    const again = await retry('2,2,0-2:2');
    expect(again.status).toBe(201);
    expect(again.json).toMatchObject({ array: '0,2%1', retry_of: id });
    expect((await getRequest(store, (again.json as { id: string }).id))?.arrayTaskCount).toBe(2);
  });
});
