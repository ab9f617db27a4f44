import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { getAccountingJob } from '../../../src/db/accounting.js';
import { insertArrayTasks, tasksOf, updateArrayTask } from '../../../src/db/array-tasks.js';
import { openDatabase } from '../../../src/db/database.js';
import { getRequest, listRequests, transitionsOf } from '../../../src/db/requests.js';
import { getRun, stepRequests } from '../../../src/db/runs.js';
import { createLogger } from '../../../src/logger.js';
import { recordRequest } from '../../../src/requests/accept.js';
import { pollProfile } from '../../../src/requests/poller.js';
import { transition } from '../../../src/requests/transition.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { apiClient, errorOf } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { http, waitFor } from '../../helpers/http.js';
import { connectAsAlice } from '../../helpers/sim.js';

/**
 * Job arrays (issue 16): one request for the array, each task followed through the poll
 * cycle's two requests, the request's state from its tasks, and a retry of the failed ones.
 */

const env = daemonTestEnv();
const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });

/** A scheduler client and a history of their own, for tests that drive the poller by hand. */
async function pollerOf(url: string) {
  const client = await connectAsAlice(url, logger);
  env.defer(() => client.close());
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-arrays-'));
  const history = openDatabase(join(dir, 'history.sqlite'));
  env.defer(async () => {
    history.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { client, history };
}

interface ArrayDetail {
  state: string;
  job_id: number;
  exit_code: number | null;
  reason: string | null;
  array: {
    expression: string;
    task_count: number;
    counts: Record<string, number>;
    failures: { task_id: number; job_id: number; state: string; exit_code: number | null; nodes: string | null }[];
    retry_of: string | null;
  } | null;
}

describe('array jobs through the daemon', () => {
  it('follows an array to its end, with counts and the failed task, and retries the failed one', async () => {
    const sim = await env.sim({ cpus: 4 });
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    // Task 3 fails the first time only: its retry completes.
    const script = [
      '#!/bin/sh',
      'if [ "$SLURM_ARRAY_TASK_ID" = 3 ] && [ ! -e failed-once ]; then touch failed-once; exit 3; fi',
      'echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID',
    ].join('\n');
    const spec = { name: 'arr', script, array: '0-5%2', current_working_directory: sim.workDir };

    const bad = await api.call('POST', '/api/v1/jobs', { token, body: { spec: { ...spec, array: '5-1' } } });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(errorOf(bad))).toContain('ends before it starts');

    const created = await api.call('POST', '/api/v1/jobs', { token, body: { spec } });
    expect(created.status).toBe(201);
    const { id } = created.json as { id: string };
    await td.waitForState(id, 'failed', 15_000);
    const shown = (await api.call('GET', `/api/v1/jobs/${id}`, { token })).json as ArrayDetail;
    expect(shown.array).toMatchObject({ expression: '0-5%2', task_count: 6, counts: { completed: 5, failed: 1 } });
    expect(shown.array?.failures).toEqual([
      expect.objectContaining({ task_id: 3, state: 'failed', exit_code: 3, nodes: expect.any(String) }),
    ]);
    expect(shown.exit_code).toBe(3);
    expect(shown.reason).toContain('1 of 6 tasks did not complete (3: failed, exit 3)');
    // Every task had a job of its own; the last to start took the array's id, as on real Slurm.
    const tasks = await tasksOf(td.daemon.history.store, id);
    expect(new Set(tasks.map((task) => task.jobId)).size).toBe(6);
    expect(tasks.map((task) => task.jobId)).toContain(shown.job_id);
    expect(tasks.every((task) => task.startedAt !== null && task.endedAt !== null)).toBe(true);

    const retried = await api.call('POST', `/api/v1/jobs/${id}/retry-tasks`, { token, body: {} });
    expect(retried.status).toBe(201);
    const retry = retried.json as { id: string; array: string; retry_of: string };
    expect(retry).toMatchObject({ array: '3%2', retry_of: id });

    await td.waitForState(retry.id, 'completed', 15_000);

    const again = (await api.call('GET', `/api/v1/jobs/${retry.id}`, { token })).json as ArrayDetail;
    expect(again.array).toMatchObject({ task_count: 1, counts: { completed: 1 }, failures: [], retry_of: id });

    // Nothing failed in the retry: nothing to retry.
    const none = await api.call('POST', `/api/v1/jobs/${retry.id}/retry-tasks`, { token, body: {} });
    expect(none.status).toBe(409);
    expect(errorOf(none).code).toBe('SCHEDFLOW_ERR_NO_TASKS_TO_RETRY');
    const unknown = await api.call('POST', `/api/v1/jobs/${id}/retry-tasks`, { token, body: { indexes: '7' } });
    expect(unknown.status).toBe(409);
  });
});

describe('retrying the tasks of an array the door now refuses', () => {
  it('is refused by the API (422) and the CLI (exit 2), nothing recorded or queued', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    // An array that failed before the profile was bound to its token's account (lab), naming
    // another: its tasks submitted again would be refused by the proxy (403). Written to the
    // history as the daemon would have.
    const store = td.daemon.history.store;
    const id = randomUUID();
    const spec = jobSpecSchema.parse({
      name: 'arr-other',
      script: '#!/bin/sh\ntrue\n',
      array: '0-1',
      account: 'other',
    });
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
    // Its tasks' rows, as the poller makes them once the scheduler reports the tasks.
    await insertArrayTasks(store, id, [0, 1]);
    await updateArrayTask(store, id, 1, { state: 'failed', exitCode: 1 });
    await transition(store, id, { to: 'failed', source: 'poll', at, reason: '1 of 2 tasks did not complete' });
    const before = (await listRequests(store, {})).length;

    const refused = await api.call('POST', `/api/v1/jobs/${id}/retry-tasks`, { token, body: {} });
    expect(refused.status).toBe(422);
    expect(errorOf(refused)).toMatchObject({ code: 'SCHEDFLOW_ERR_ACCOUNT_MISMATCH' });
    expect(errorOf(refused).message).toContain('"other"');

    const cli = await runCli(['jobs', 'retry-tasks', id, '--data-dir', td.dataDir]);
    expect(cli.code).toBe(2);
    expect(cli.stderr).toMatch(new RegExp(`^schedflow: request ${id}: the job names account "other"`));
    expect(cli.stdout).toBe('');
    expect((await listRequests(store, {})).length).toBe(before);
    expect(await td.daemon.queues.submit.getJobCounts('waiting', 'active', 'delayed')).toEqual({
      waiting: 0,
      active: 0,
      delayed: 0,
    });
  });
});

describe('array jobs from the shell', () => {
  it('jobs show lists the tasks compactly; jobs retry-tasks runs the indexes named again', async () => {
    const sim = await env.sim({ cpus: 4 });
    const td = await env.daemon(sim.url);
    const script = '#!/bin/sh\n[ "$SLURM_ARRAY_TASK_ID" = 1 ] && exit 4\ntrue\n';
    const id = await td.daemon.submit({
      spec: jobSpecSchema.parse({ name: 'arr-cli', script, array: '0-2', current_working_directory: sim.workDir }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const failed = await td.waitForState(id, 'failed', 10_000);
    // The accounting record under the array's job id is one task's: never shown as the array's.
    await waitFor(async () => getAccountingJob(td.daemon.history.store, failed.profile, failed.jobId as number), {
      what: "the array's job id's accounting record",
      timeoutMs: 10_000,
    });
    const holder = (await tasksOf(td.daemon.history.store, id)).find((task) => task.jobId === failed.jobId);
    // Two processes at once: each takes seconds to start here.
    const [shown, retried] = await Promise.all([
      runCli(['jobs', 'show', id, '--data-dir', td.dataDir]),
      runCli(['jobs', 'retry-tasks', id, '--indexes', '1,2', '--data-dir', td.dataDir]),
    ]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('array     0-2: 3 tasks: 2 completed, 1 failed');
    expect(shown.stdout).toMatch(/\n1\s+\d+\s+failed\s+4\s/);
    expect(shown.stdout).toContain(`retry them: schedflow jobs retry-tasks ${id}`);
    expect(shown.stdout).toContain('outcome   1 of 3 tasks failed, 2 completed');
    // The record under the array's job id is one task's: not shown as the array's.
    expect(holder).toBeDefined();
    expect(shown.stdout).not.toMatch(/^accounting {2}/m);
    expect(retried.code).toBe(0);
    const retryId = /queued request (\S+), running tasks 1-2 of/.exec(retried.stdout)?.[1] as string;
    expect(retryId).toBeDefined();
    const row = await td.waitForState(retryId, 'failed', 10_000);
    expect(row).toMatchObject({ arrayRetryOf: id, arrayTaskCount: 2, origin: 'cli' });
  });
});

describe('an array step of a pipeline', () => {
  it('is one request; the step after it waits for every task', async () => {
    const sim = await env.sim({ cpus: 4 });
    const yaml = [
      'defaults:',
      `  current_working_directory: ${sim.workDir}`,
      'steps:',
      '  shards:',
      '    array: "0-3%2"',
      '    script: |',
      '      #!/bin/sh',
      '      sleep 1; echo shard $SLURM_ARRAY_TASK_ID >> order.txt',
      '  merge:',
      '    needs: [shards]',
      '    script: |',
      '      #!/bin/sh',
      '      echo merge >> order.txt',
    ].join('\n');
    const td = await env.daemon(sim.url, { pipelineTickMs: 300 }, { 'shards.yaml': yaml });
    const run = await td.daemon.pipelines.trigger('shards', { actor: 'test', trigger: 'api', params: {} });
    const ended = await waitFor(
      async () => {
        const row = await getRun(td.daemon.history.store, run.id);
        return row && ['succeeded', 'failed'].includes(row.state) ? row : undefined;
      },
      { what: 'the run to end', timeoutMs: 30_000, intervalMs: 100 },
    );
    expect(ended.state).toBe('succeeded');
    const lines = readFileSync(join(sim.workDir, 'order.txt'), 'utf8').trim().split('\n');
    expect(lines.at(-1)).toBe('merge');
    expect(lines.slice(0, 4).sort()).toEqual(['shard 0', 'shard 1', 'shard 2', 'shard 3']);
    const shards = (await stepRequests(td.daemon.history.store, run.id)).find((row) => row.step === 'shards');
    expect(shards).toMatchObject({ state: 'completed', arrayTaskCount: 4 });
  });
});

describe('polling an array', () => {
  it('follows 200 tasks with at most two upstream requests a cycle', async () => {
    const sim = await env.sim({ cpus: 64, simulatedRuntimeSec: 1 });
    const proxy = await startFlakyProxy(sim.url);
    env.defer(() => proxy.close());
    const { client, history } = await pollerOf(proxy.url);
    const spec = jobSpecSchema.parse({ name: 'many', script: '#!/bin/sh\ntrue\n', array: '0-199%64' });
    const at = Date.now();
    const { store } = history;
    await recordRequest(store, {
      id: 'arr',
      profile: 'test',
      name: 'many',
      spec,
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at,
      source: 'api',
    });
    const submitted = await client.submit(spec, 'arr');
    await transition(store, 'arr', {
      to: 'submitted',
      source: 'submit',
      at,
      patch: { jobId: submitted.job_id, submittedAt: at },
    });

    const deadline = Date.now() + 9_000;
    let cycles = 0;
    while ((await getRequest(store, 'arr'))?.state !== 'completed' && Date.now() < deadline) {
      const before = proxy.requests.length;
      const report = await pollProfile({ store, client, logger, settings: { lostGraceMs: 60_000 } }, 'test');
      expect(report.requests).toBeLessThanOrEqual(2);
      expect(proxy.requests.length - before).toBe(report.requests);
      cycles++;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect((await getRequest(store, 'arr'))?.state).toBe('completed');
    expect(cycles).toBeGreaterThan(1);
    const tasks = await tasksOf(store, 'arr');
    expect(tasks).toHaveLength(200);
    expect(tasks.every((task) => task.state === 'completed' && task.exitCode === 0 && task.jobId !== null)).toBe(true);
  });
});

describe("an array whose tasks' ends reach accounting after the controller", () => {
  it('asks accounting again past the answer a proxy keeps, and concludes from it', async () => {
    const sim = await env.sim({ cpus: 4 });
    const proxy = await startFlakyProxy(sim.url);
    env.defer(() => proxy.close());
    // A proxy that keeps each accounting answer for longer than this test, in front of a
    // slurmdbd that learns of each end a moment after the controller: the first answer to show
    // a job ended leaves it out.
    const kept = new Map<string, string>();
    const endSeen = new Set<number>();
    proxy.rewrite = (req, body) => {
      if (!req.url.startsWith('/scheddb/v0.0.44/jobs?')) return body;
      const earlier = kept.get(req.url);
      if (earlier !== undefined) return earlier;
      const answer = JSON.parse(body) as { jobs: { job_id: number; state: { current: string[] } }[] };
      answer.jobs = answer.jobs.filter((job) => {
        if (['PENDING', 'RUNNING'].includes(job.state.current[0] ?? '')) return true;
        const first = !endSeen.has(job.job_id);
        endSeen.add(job.job_id);
        return !first;
      });
      const text = JSON.stringify(answer);
      kept.set(req.url, text);
      return text;
    };
    const { client, history } = await pollerOf(proxy.url);
    // The tasks end together once all have been seen running: one cycle sees every end.
    const go = join(sim.workDir, 'go');
    const script = `#!/bin/sh\nwhile [ ! -e ${go} ]; do sleep 0.05; done\n`;
    const spec = jobSpecSchema.parse({ name: 'quick', script, array: '0-3' });
    const at = Date.now();
    const { store } = history;
    await recordRequest(store, {
      id: 'quick',
      profile: 'test',
      name: 'quick',
      spec,
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at,
      source: 'api',
    });
    const submitted = await client.submit(spec, 'quick');
    await transition(store, 'quick', {
      to: 'submitted',
      source: 'submit',
      at,
      patch: { jobId: submitted.job_id, submittedAt: at },
    });

    // The controller is never asked within the patience: only accounting can conclude the array.
    const deps = { store, client, logger, settings: { lostGraceMs: 60_000, arrayEndPatienceMs: 600_000 } };
    const running = async () => (await tasksOf(store, 'quick')).every((task) => task.state === 'running');
    for (let deadline = Date.now() + 15_000; !(await running()) && Date.now() < deadline; ) {
      await pollProfile(deps, 'test');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(await running()).toBe(true);
    writeFileSync(go, '');
    const deadline = Date.now() + 15_000;
    while ((await getRequest(store, 'quick'))?.state !== 'completed' && Date.now() < deadline) {
      await pollProfile(deps, 'test');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(await getRequest(store, 'quick')).toMatchObject({ state: 'completed', exitCode: 0 });
    expect((await tasksOf(store, 'quick')).every((task) => task.state === 'completed' && task.endedAt !== null)).toBe(
      true,
    );
    expect(proxy.requests.some((req) => /^\/sched\/v0\.0\.44\/jobs(\?|$)/.test(req.url))).toBe(false);
    // The query asked afresh names the same jobs, with a window that ends a day ahead.
    expect(
      proxy.requests.some((req) => req.url.includes('end_time=') && req.url.includes(`step=${submitted.job_id}`)),
    ).toBe(true);
  });
});

describe('an array on a cluster without accounting', () => {
  it("concludes from the controller's records of its tasks, each with its exit code, times and node", async () => {
    const sim = await env.sim({ cpus: 4 });
    const proxy = await startFlakyProxy(sim.url);
    env.defer(() => proxy.close());
    // No slurmdbd: every /slurmdb (here /scheddb) path answers 404, as on such a cluster.
    proxy.notFound = (req) => req.url.startsWith('/scheddb/');
    const td = await env.daemon(proxy.url);
    // Throttled: tasks 2 and 3 leave the array's pending record under job ids no accounting names.
    const script = '#!/bin/sh\nsleep 1\n[ "$SLURM_ARRAY_TASK_ID" = 1 ] && exit 4\ntrue\n';
    const id = await td.daemon.submit({
      spec: jobSpecSchema.parse({ name: 'arr-noacct', script, array: '0-3%2', current_working_directory: sim.workDir }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const ended = await td.waitForState(id, 'failed', 30_000);
    expect(ended.exitCode).toBe(4);
    expect(ended.reason).toContain('1 of 4 tasks did not complete (1: failed, exit 4)');
    const tasks = await tasksOf(td.daemon.history.store, id);
    expect(tasks.map((task) => [task.taskId, task.state, task.exitCode])).toEqual([
      [0, 'completed', 0],
      [1, 'failed', 4],
      [2, 'completed', 0],
      [3, 'completed', 0],
    ]);
    expect(new Set(tasks.map((task) => task.jobId)).size).toBe(4);
    expect(tasks.every((task) => task.startedAt !== null && task.endedAt !== null && task.nodes !== null)).toBe(true);
  }, 60_000);
});

describe('an array whose tasks go missing', () => {
  it('has a vanished task lost alone while others run, then the request lost; accounting resolves them later', async () => {
    // Ended jobs leave the controller at once, and accounting answers without them (lagging, or purged).
    const sim = await env.sim({ cpus: 4, minJobAgeSec: 0 });
    const proxy = await startFlakyProxy(sim.url);
    env.defer(() => proxy.close());
    proxy.rewrite = (req, body) =>
      req.url.startsWith('/scheddb/') ? body.replace(/"jobs":\[.*\],"meta"/s, '"jobs":[],"meta"') : body;
    const td = await env.daemon(proxy.url, { lostGraceMs: 1500 });
    const store = td.daemon.history.store;
    const script = '#!/bin/sh\n[ "$SLURM_ARRAY_TASK_ID" = 1 ] && sleep 6\ntrue\n';
    const id = await td.daemon.submit({
      spec: jobSpecSchema.parse({ name: 'arr-gone', script, array: '0-1', current_working_directory: sim.workDir }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    // Task 0 ended unseen: missing, then lost after the grace, while task 1 still runs.
    await waitFor(async () => ((await tasksOf(store, id))[0]?.state === 'lost' ? true : undefined), {
      what: 'task 0 lost',
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    expect((await tasksOf(store, id))[1]?.state).toBe('running');
    expect((await getRequest(store, id))?.state).toBe('running');
    // Task 1 ends and vanishes too: nothing of the array is known, so the request is lost.
    await td.waitForState(id, 'lost', 20_000);
    expect((await tasksOf(store, id)).map((task) => task.state)).toEqual(['lost', 'lost']);
    expect((await transitionsOf(store, id)).at(-1)?.detail).toMatch(
      /^all 2 tasks of array job \d+ have been missing from the controller and from accounting for over 2 s; they are not assumed finished/,
    );
    // Accounting has them after all: the tasks and the request are resolved.
    proxy.rewrite = undefined;
    await td.waitForState(id, 'completed', 15_000);
    expect((await tasksOf(store, id)).map((task) => [task.state, task.exitCode, task.missingSince])).toEqual([
      ['completed', 0, null],
      ['completed', 0, null],
    ]);
  }, 60_000);
});

describe("an array's job id given to another array (slurmctld back from a crash without it)", () => {
  it("never takes the other array's tasks for its own: its tasks end node_fail, JobLostByController", async () => {
    const sim = await env.sim({ cpus: 4 });
    const { client, history } = await pollerOf(sim.url);
    const { store } = history;
    const deps = { store, client, logger, settings: { lostGraceMs: 60_000, arrayEndPatienceMs: 0 } };
    const spec = jobSpecSchema.parse({ name: 'ours', script: '#!/bin/sh\nsleep 60\n', array: '0-1' });
    const at = Date.now();
    await recordRequest(store, {
      id: 'ours',
      profile: 'test',
      name: 'ours',
      spec,
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at,
      source: 'api',
    });
    const submitted = await client.submit(spec, 'ours');
    await transition(store, 'ours', {
      to: 'submitted',
      source: 'submit',
      at,
      patch: { jobId: submitted.job_id, submittedAt: at },
    });
    await waitFor(
      async () => {
        await pollProfile(deps, 'test');
        const tasks = await tasksOf(store, 'ours');
        return tasks.every((task) => task.state === 'running' && task.jobId !== null) ? true : undefined;
      },
      { what: 'both tasks running', timeoutMs: 10_000, intervalMs: 200 },
    );
    const ownJobIds = (await tasksOf(store, 'ours')).map((task) => task.jobId);

    // slurmctld forgets both tasks' jobs, and the next array (someone else's) gets the same ids.
    const crash = await http(`${sim.url}/_sim/slurmctld/crash`, {
      headers: sim.admin,
      method: 'POST',
      body: { loseNewest: 2 },
    });
    expect(crash.status).toBe(200);
    const theirs = jobSpecSchema.parse({ name: 'theirs', script: '#!/bin/sh\nexit 0\n', array: '0-1' });
    expect((await client.submit(theirs, 'someone-else')).job_id).toBe(submitted.job_id);

    await waitFor(
      async () => {
        await pollProfile(deps, 'test');
        const state = (await getRequest(store, 'ours'))?.state;
        return state !== undefined && !['submitted', 'pending', 'running'].includes(state) ? true : undefined;
      },
      { what: 'the request to end', timeoutMs: 15_000, intervalMs: 200 },
    );
    const tasks = await tasksOf(store, 'ours');
    // Their tasks completed with exit 0 under the same ids: never recorded as ours.
    expect(tasks.map((task) => [task.state, task.reason, task.exitCode])).toEqual([
      ['node_fail', 'JobLostByController', null],
      ['node_fail', 'JobLostByController', null],
    ]);
    expect(new Set(tasks.map((task) => task.jobId))).toEqual(new Set(ownJobIds));
    expect(await getRequest(store, 'ours')).toMatchObject({ state: 'failed', exitCode: null });
    expect((await getRequest(store, 'ours'))?.reason).toContain(
      '2 of 2 tasks did not complete (0: node_fail; 1: node_fail)',
    );
  }, 60_000);
});
