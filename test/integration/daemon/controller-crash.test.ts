import { describe, expect, it } from 'vitest';
import { getRequest } from '../../../src/db/requests.js';
import { isTerminalRequest } from '../../../src/requests/request-state.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { apiClient } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN } from '../../helpers/sim.js';
import { uiPage } from '../../helpers/ui-page.js';

/**
 * slurmctld killed with SIGKILL (a crash) comes back from its last state save without the jobs
 * it accepted since, and gives their ids to the next jobs submitted: real Slurm 25.11.7 does so
 * (found by `npm run chaos -- --slurm --scenario slurm-ctld-stop`), and the simulator's
 * `POST /_sim/slurmctld/crash` does the same. A job id is then not proof of identity: no request
 * may take its state from another's job, the new owner of an id must be recordable, and nothing
 * is submitted twice. The requests whose jobs were lost end `node_fail` (JobLostByController);
 * a job lost before it started is submitted again as a new attempt (SCHEDFLOW_LOST_RESUBMITS).
 */

const env = daemonTestEnv();
const alice = bearer(ALICE_TOKEN);

describe('a slurmctld crash that loses its newest jobs and reuses their ids', () => {
  it('ends the lost jobs’ requests as lost by the controller; the jobs that have their ids now are their own requests’', async () => {
    const sim = await env.sim({ cpus: 4 });
    const td = await env.daemon(sim.url, { submitConcurrency: 2 });
    const store = td.daemon.history.store;
    const spec = (name: string, script: string) =>
      jobSpecSchema.parse({ name, script, current_working_directory: sim.workDir });

    // In flight when the controller dies: submitted, their ids recorded, not yet ended.
    const lost: string[] = [];
    for (const name of ['crash-a', 'crash-b', 'crash-c']) {
      lost.push(
        await td.daemon.submit({
          spec: spec(name, '#!/bin/sh\nsleep 30\n'),
          owner: 'default',
          actor: 'test',
          origin: 'api',
        }),
      );
    }
    // Seen running: a job lost after it started is not submitted again (it may have done part of its work).
    const lostJobIds = await waitFor(
      async () => {
        const rows = await Promise.all(lost.map((id) => getRequest(store, id)));
        return rows.every((row) => row?.state === 'running') ? rows.map((row) => row?.jobId as number) : undefined;
      },
      { what: 'the three jobs to be seen running', timeoutMs: 20_000, intervalMs: 50 },
    );

    const crash = await http(`${sim.url}/_sim/slurmctld/crash`, {
      headers: sim.admin,
      method: 'POST',
      body: { loseNewest: 3 },
    });
    expect(crash.status, crash.text).toBe(200);
    expect([...(crash.json as { lost: number[] }).lost].sort()).toEqual([...lostJobIds].sort());

    // The next jobs get the lost ids: two through schedflow (one with a lost job's name), and one
    // submitted outside it. Not with a lost job's name: an outside job of the same name given the
    // id within a minute cannot be told from the lost one without comments in accounting (the
    // README's limit); whether the controller's record is asked first depended on timing.
    const after = [
      await td.daemon.submit({
        spec: spec('crash-a', '#!/bin/sh\ntrue\n'),
        owner: 'default',
        actor: 'test',
        origin: 'api',
      }),
      await td.daemon.submit({
        spec: spec('crash-new', '#!/bin/sh\ntrue\n'),
        owner: 'default',
        actor: 'test',
        origin: 'api',
      }),
    ];
    await waitFor(
      async () => {
        const rows = await Promise.all(after.map((id) => getRequest(store, id)));
        return rows.every((row) => row?.state !== 'accepted') || undefined;
      },
      { what: 'the new requests to be taken up', intervalMs: 50 },
    );
    const external = await http(`${sim.url}/sched/v0.0.44/job/submit`, {
      method: 'POST',
      headers: alice,
      body: {
        job: {
          name: 'outside-job',
          script: '#!/bin/sh\ntrue\n',
          current_working_directory: sim.workDir,
          environment: ['PATH=/usr/bin:/bin'],
        },
      },
    });
    expect(external.status, external.text).toBe(200);

    // Nothing stuck: every request ends.
    const rows = await waitFor(
      async () => {
        const all = await Promise.all([...lost, ...after].map((id) => getRequest(store, id)));
        return all.every((row) => row && isTerminalRequest(row.state)) ? all : undefined;
      },
      { what: 'every request to end', timeoutMs: 40_000, intervalMs: 200 },
    );

    for (const id of after) {
      const row = await getRequest(store, id);
      expect(row?.state, `${id}: ${row?.errorMessage}`).toBe('completed');
      expect(lostJobIds).toContain(row?.jobId);
    }
    for (const id of lost) {
      const row = await getRequest(store, id);
      // Never completed from the job that has its id now.
      expect(await td.states(id)).not.toContain('completed');
      expect(row?.state).toBe('node_fail');
      expect(row?.reason).toBe('JobLostByController');
      expect(row?.errorMessage).toMatch(
        /the controller lost this request's job \d+ \(restarted without its state\?\): .*; it had started, so it is not submitted again/,
      );
      expect(row?.errorCode).toBe('SCHEDFLOW_ERR_JOB_LOST_BY_CONTROLLER');
      expect(row?.jobId).toBeNull();
      expect(row?.nextAttemptId).toBeNull();
      expect(row?.retryDueAt).toBeNull();
    }
    expect(rows).toHaveLength(5);

    // One scheduler job per request, never a second submission.
    const jobs = sim.server.cluster.listJobs();
    for (const id of [...lost, ...after]) {
      const marked = jobs.filter((job) => job.comment.startsWith(`schedflow:${id}`));
      expect(marked.length, `jobs of request ${id}`).toBeLessThanOrEqual(1);
    }
    for (const id of after) expect(jobs.filter((job) => job.comment.startsWith(`schedflow:${id}`))).toHaveLength(1);
  }, 90_000);
});

describe('a slurmctld crash that loses jobs before they started', () => {
  /** A job that holds the one CPU, and `names` queued behind it, seen pending with their ids. */
  async function behindBlocker(td: Awaited<ReturnType<typeof env.daemon>>, workDir: string, names: string[]) {
    const submit = (name: string, script: string) =>
      td.daemon.submit({
        spec: jobSpecSchema.parse({ name, script, current_working_directory: workDir }),
        owner: 'default',
        actor: 'test',
        origin: 'api',
      });
    const blocker = await submit('blocker', '#!/bin/sh\nsleep 60\n');
    const blockerRow = await td.waitForState(blocker, 'running');
    const waiting: string[] = [];
    for (const name of names) waiting.push(await submit(name, '#!/bin/sh\necho ran\n'));
    for (const id of waiting) await td.waitForState(id, 'pending');
    return { blockerJobId: blockerRow.jobId as number, waiting };
  }

  async function crash(sim: Awaited<ReturnType<typeof env.sim>>, loseNewest: number): Promise<number[]> {
    const answer = await http(`${sim.url}/_sim/slurmctld/crash`, {
      headers: sim.admin,
      method: 'POST',
      body: { loseNewest },
    });
    expect(answer.status, answer.text).toBe(200);
    return (answer.json as { lost: number[] }).lost;
  }

  /** A job submitted outside schedflow: the crashed controller gives it the lowest lost id. */
  async function outsideJob(sim: Awaited<ReturnType<typeof env.sim>>): Promise<number> {
    const answer = await http(`${sim.url}/sched/v0.0.44/job/submit`, {
      method: 'POST',
      headers: alice,
      body: {
        job: {
          name: 'outside-job',
          script: '#!/bin/sh\ntrue\n',
          current_working_directory: sim.workDir,
          environment: ['PATH=/usr/bin:/bin'],
        },
      },
    });
    expect(answer.status, answer.text).toBe(200);
    return (answer.json as { job_id: number }).job_id;
  }

  it('submits each again once as a new attempt, which runs; a second loss ends it node_fail, saying the resubmit is spent', async () => {
    const sim = await env.sim({ cpus: 1 });
    const td = await env.daemon(sim.url);
    const store = td.daemon.history.store;
    const { blockerJobId, waiting } = await behindBlocker(td, sim.workDir, ['lost-a', 'lost-b']);
    const lostIds = await crash(sim, 2);
    expect(lostIds).toHaveLength(2);

    // Nothing takes their ids: the poller finds them gone from the controller and from
    // accounting (past the grace), never started, and each request goes on in a new attempt.
    const next = await waitFor(
      async () => {
        const rows = await Promise.all(waiting.map((id) => getRequest(store, id)));
        if (!rows.every((row) => row?.nextAttemptId)) return undefined;
        const attempts = await Promise.all(rows.map((row) => getRequest(store, row?.nextAttemptId as string)));
        return attempts.every((row) => row?.state === 'pending') ? attempts : undefined;
      },
      { what: 'the lost requests to be submitted again', timeoutMs: 30_000, intervalMs: 100 },
    );
    for (const [i, id] of waiting.entries()) {
      const row = await getRequest(store, id);
      expect(row?.state).toBe('node_fail');
      expect(row?.reason).toBe('JobLostByController');
      expect(row?.errorCode).toBe('SCHEDFLOW_ERR_JOB_LOST_BEFORE_START');
      expect(row?.errorMessage).toMatch(
        /^the controller lost job \d+ before it started \(restarted without its state\?\): .*it never ran, so it is submitted again as a new attempt \(resubmit 1 of 1, SCHEDFLOW_LOST_RESUBMITS\)$/,
      );
      expect(lostIds).toContain(Number(/job (\d+)/.exec(row?.errorMessage ?? '')?.[1]));
      const attempt = next[i];
      expect(attempt?.attempt).toBe(2);
      expect(attempt?.firstAttemptId).toBe(id);
      expect(attempt?.retryCause?.reason).toBe(row?.errorMessage);
    }
    // `jobs show` says a resubmit after the loss, not the retry policy's doing.
    const [first, second] = await Promise.all([
      runCli(['jobs', 'show', waiting[0] as string, '--data-dir', td.dataDir]),
      runCli(['jobs', 'show', next[0]?.id as string, '--data-dir', td.dataDir]),
    ]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(
      /^next {6}attempt 2: \S+ \(resubmitted: the controller lost the job before it started\)$/m,
    );
    expect(first.stdout).not.toMatch(/backoff/);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(
      new RegExp(`^resubmit of ${waiting[0]}: the controller lost job \\d+ before it started`, 'm'),
    );
    // So does the web UI's job page: its timeline and attempts.
    const api = apiClient(td);
    const token = await api.token(['read']);
    const [firstPage, secondPage] = await Promise.all([
      uiPage(td, token, `/ui/jobs/${waiting[0]}`),
      uiPage(td, token, `/ui/jobs/${next[0]?.id}`),
    ]);
    expect(firstPage).toContain('resubmit after the controller lost the job before it started: <a');
    expect(firstPage).not.toContain('retry policy:');
    expect(firstPage).toContain('<table aria-label="attempts">');
    expect(secondPage).toContain('resubmit: attempt 2, after');

    // One second attempt is lost too, before it started: its resubmit is spent. The crash loses
    // the newest job, and the two attempts were submitted side by side, in either order.
    // This time another job is given its id: the controller's record says the loss at once.
    const [lostAgain] = await crash(sim, 1);
    const spentAt = next.findIndex((attempt) => attempt?.jobId === lostAgain);
    expect(spentAt, `job ${lostAgain} is one of the second attempts'`).toBeGreaterThanOrEqual(0);
    const b2 = next[spentAt]?.id as string;
    const runsOn = next[1 - spentAt]?.id as string;
    expect(await outsideJob(sim)).toBe(lostAgain);
    // Another job under a pending request's id is seen as its state changes (the identity is
    // checked before a start is recorded): the blocker out of the way, the jobs start.
    sim.server.cluster.cancel(blockerJobId);
    const ended = await td.waitForState(b2, 'node_fail', 30_000);
    expect(ended.errorCode).toBe('SCHEDFLOW_ERR_JOB_LOST_BY_CONTROLLER');
    expect(ended.errorMessage).toMatch(
      /no start of it was seen, but this request was already submitted again once after such a loss \(SCHEDFLOW_LOST_RESUBMITS=1\): not again/,
    );
    expect(ended.nextAttemptId).toBeNull();
    expect(ended.retryDueAt).toBeNull();

    // The other second attempt runs to its end.
    const a2 = await td.waitForState(runsOn, 'completed', 30_000);
    expect(a2.exitCode).toBe(0);

    // One scheduler job per attempt, never two live for one request.
    const jobs = sim.server.cluster.listJobs();
    for (const row of [...waiting, a2.id, b2]) {
      expect(jobs.filter((job) => job.comment.startsWith(`schedflow:${row}`)).length).toBeLessThanOrEqual(1);
    }
    expect(jobs.filter((job) => job.name === (spentAt === 0 ? 'lost-b' : 'lost-a'))).toHaveLength(1);
  }, 90_000);

  it('with SCHEDFLOW_LOST_RESUBMITS=0, ends them as before: node_fail (saying resubmits are off) or lost', async () => {
    const sim = await env.sim({ cpus: 1 });
    const td = await env.daemon(sim.url, { lostResubmits: 0 });
    const { blockerJobId, waiting } = await behindBlocker(td, sim.workDir, ['lost-off', 'missing-off']);
    const lostIds = await crash(sim, 2);
    // The first's id is another job's now; the second's is no job's: missing, then lost, as before.
    expect(await outsideJob(sim)).toBe(lostIds[0]);
    sim.server.cluster.cancel(blockerJobId);
    const missing = await td.waitForState(waiting[1] as string, 'lost', 30_000);
    expect(missing.nextAttemptId).toBeNull();
    expect(missing.retryDueAt).toBeNull();
    const row = await td.waitForState(waiting[0] as string, 'node_fail', 30_000);
    expect(row.reason).toBe('JobLostByController');
    expect(row.errorCode).toBe('SCHEDFLOW_ERR_JOB_LOST_BY_CONTROLLER');
    expect(row.errorMessage).toMatch(
      /no start of it was seen, and resubmits after a loss are off \(SCHEDFLOW_LOST_RESUBMITS=0\)/,
    );
    expect(row.nextAttemptId).toBeNull();
    expect(row.retryDueAt).toBeNull();
  }, 60_000);

  it('on a cluster without accounting, leaves it lost, never submitted again: a job gone unseen may have run', async () => {
    // No slurmdbd: every /slurmdb (here /scheddb) path answers 404. Nothing can say the job never
    // ran (a daemon down past MinJobAge misses a short job's whole life the same way).
    const sim = await env.sim({ cpus: 1 });
    const proxy = await startFlakyProxy(sim.url);
    env.defer(() => proxy.close());
    proxy.notFound = (req) => req.url.startsWith('/scheddb/');
    const td = await env.daemon(proxy.url);
    const { blockerJobId, waiting } = await behindBlocker(td, sim.workDir, ['noacct-lost']);
    expect(await crash(sim, 1)).toHaveLength(1);
    const row = await td.waitForState(waiting[0] as string, 'lost', 30_000);
    expect(row.errorMessage ?? '').not.toMatch(/submitted again/);
    expect(row.nextAttemptId).toBeNull();
    expect(row.retryDueAt).toBeNull();
    // Still not submitted again a while later, and no second job of it ever reached the controller.
    sim.server.cluster.cancel(blockerJobId);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const later = await getRequest(td.daemon.history.store, waiting[0] as string);
    expect(later?.state).toBe('lost');
    expect(later?.nextAttemptId).toBeNull();
    const jobs = sim.server.cluster.listJobs();
    expect(jobs.filter((job) => job.name === 'noacct-lost')).toHaveLength(0);
  }, 60_000);
});
