import { describe, expect, it } from 'vitest';
import { listAudit } from '../../../src/db/audit.js';
import { transitionsOf } from '../../../src/db/requests.js';
import type { JobRequestRow } from '../../../src/db/schema.js';
import { apiClient, errorOf, shellSpec } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';

/**
 * Issue 34's request-level job control through the local API and the CLI, against a real daemon
 * on the simulator: hold, release and update of a submitted job (in Slurm) and of one not
 * submitted yet (kept back, its spec changed), arrays' tasks, runs held whole, the `control`
 * scope, owners' isolation, the audit rows, and Slurm's refusals in its words.
 */

const env = daemonTestEnv();

interface ControlAnswer {
  id: string;
  state: string;
  changed: boolean;
  where: 'history' | 'scheduler' | null;
  held: { by: string; at: string } | null;
  message: string;
}

const simJob = async (td: TestDaemon, jobId: number | string) =>
  (await td.daemon.clients.get('test').getJob(Number(String(jobId).split('_')[0]))).data;

/** The simulator's record of a job once it matches (a read may be answered from a recent listing). */
const simJobWhen = (td: TestDaemon, jobId: number, match: (job: Awaited<ReturnType<typeof simJob>>) => boolean) =>
  waitFor(
    async () => {
      const job = await simJob(td, jobId);
      return match(job) ? job : undefined;
    },
    { timeoutMs: 20_000, what: `job ${jobId} as expected` },
  );

describe('job control through the API and the CLI', () => {
  it('holds, updates and releases a pending job in Slurm; refuses in Slurm’s words; scope, owners and audit apply', async () => {
    const sim = await env.sim({ cpus: 1 });
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const ctl = await api.token(['submit', 'read', 'cancel', 'control'], 'ctl', 'lab-a');
    const noControl = await api.token(['submit', 'read', 'cancel'], 'no-control', 'lab-a');
    const other = await api.token(['submit', 'read', 'control'], 'other', 'lab-b');
    const submit = async (name: string, body: string) => {
      const r = await api.call('POST', '/api/v1/jobs', {
        token: ctl,
        body: { spec: shellSpec(name, body, sim.workDir) },
      });
      expect(r.status, r.text).toBe(201);
      return (r.json as { id: string }).id;
    };
    // One CPU: the blocker runs, the target waits behind it.
    const blocker = await submit('blocker', 'sleep 60');
    await td.waitForState(blocker, 'running', 30_000);
    const target = await submit('target', 'true');
    const targetJob = (await td.waitForState(target, 'pending', 30_000)).jobId as number;

    // Without the control scope: 403, nothing changed. Another owner's id: 404, as an unknown one.
    const refused = await api.call('POST', `/api/v1/jobs/${target}/hold`, { token: noControl, body: {} });
    expect(refused.status).toBe(403);
    const hidden = await api.call('POST', `/api/v1/jobs/${target}/hold`, { token: other, body: {} });
    expect(hidden.status).toBe(404);
    expect(errorOf(hidden).message).toBe(`no job request ${target}`);
    const hiddenPatch = await api.call('PATCH', `/api/v1/jobs/${target}`, { token: other, body: { name: 'x' } });
    expect(hiddenPatch.status).toBe(404);
    expect((await simJob(td, targetJob)).reason).not.toBe('JobHeldUser');

    // Hold: in Slurm, and shown with who and when.
    const held = await api.call('POST', `/api/v1/jobs/${target}/hold`, { token: ctl, body: {} });
    expect(held.status, held.text).toBe(200);
    expect(held.json as ControlAnswer).toMatchObject({ changed: true, where: 'scheduler', held: { by: 'token:ctl' } });
    await simJobWhen(td, targetJob, (job) => job.reason === 'JobHeldUser');
    const shown = await api.call('GET', `/api/v1/jobs/${target}`, { token: ctl });
    expect((shown.json as { held: unknown }).held).toMatchObject({ by: 'token:ctl' });
    const listed = await api.call('GET', '/api/v1/jobs', { token: ctl });
    const item = (listed.json as { items: { id: string; held: unknown }[] }).items.find((i) => i.id === target);
    expect(item?.held).toMatchObject({ by: 'token:ctl' });
    expect((await transitionsOf(td.daemon.history.store, target)).some((t) => t.reason === 'Held')).toBe(true);
    const [holdRow] = await listAudit(td.daemon.history.store, { action: 'request.hold', limit: 10 });
    expect(holdRow).toMatchObject({
      actor: 'token:ctl',
      owner: 'lab-a',
      target: `request:${target}`,
      outcome: 'ok',
      httpRequestId: held.headers.get('x-request-id'),
    });
    // The blocker ends; the held target still does not start.
    expect((await api.call('DELETE', `/api/v1/jobs/${blocker}`, { token: ctl })).status).toBe(202);
    await td.waitForState(blocker, 'cancelled', 30_000);

    // Update: its time limit and name, in Slurm.
    const updated = await api.call('PATCH', `/api/v1/jobs/${target}`, {
      token: ctl,
      body: { time_limit: '0:07:00', name: 'renamed' },
    });
    expect(updated.status, updated.text).toBe(200);
    const job = await simJobWhen(td, targetJob, (j) => j.name === 'renamed');
    expect(job.time_limit).toMatchObject({ minutes: 7 });
    expect(job.state).toBe('PENDING');
    // A value Slurm refuses: 422 in its words (an unknown QOS, 2066); not retried, one refused audit row.
    const badQos = await api.call('PATCH', `/api/v1/jobs/${target}`, { token: ctl, body: { qos: 'gold' } });
    expect(badQos.status, badQos.text).toBe(422);
    expect(errorOf(badQos)).toMatchObject({ code: 'SCHEDFLOW_ERR_JOB_UPDATE_INVALID' });
    expect(errorOf(badQos).message).toMatch(/2066/);
    expect(
      (await listAudit(td.daemon.history.store, { action: 'request.update', limit: 10 })).map((r) => r.outcome),
    ).toEqual(expect.arrayContaining(['ok', 'refused']));
    // A mistake of the caller's own: 400 at the door, nothing asked.
    const empty = await api.call('PATCH', `/api/v1/jobs/${target}`, { token: ctl, body: {} });
    expect(empty.status).toBe(400);
    const badTime = await api.call('PATCH', `/api/v1/jobs/${target}`, { token: ctl, body: { time_limit: 'soon' } });
    expect(badTime.status).toBe(400);

    // Release through the CLI (the daemon's API, one door): it starts and completes.
    const release = await runCli(['jobs', 'release', target, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    expect(release.code, release.stderr).toBe(0);
    expect(release.stdout).toContain('released');
    const done = await td.waitForState(target, 'completed', 30_000);
    expect(done.heldAt).toBeNull();
    // Ended: 409 with a clear code.
    const ended = await api.call('POST', `/api/v1/jobs/${target}/hold`, { token: ctl, body: {} });
    expect(ended.status).toBe(409);
    expect(errorOf(ended).code).toBe('SCHEDFLOW_ERR_JOB_ENDED');

    // A running job's partition: Slurm refuses (2073), 409 in its words.
    const running = await submit('running', 'sleep 60');
    await td.waitForState(running, 'running', 30_000);
    const move = await api.call('PATCH', `/api/v1/jobs/${running}`, { token: ctl, body: { partition: 'debug2' } });
    expect(move.status, move.text).toBe(409);
    expect(errorOf(move)).toMatchObject({ code: 'SCHEDFLOW_ERR_JOB_CONTROL_REFUSED' });
    expect(errorOf(move).message).toMatch(/no longer pending.*2073/);
    const cli = await runCli(['jobs', 'update', running, '--partition', 'debug2', '--data-dir', td.dataDir], {
      timeoutMs: 60_000,
    });
    expect(cli.code).toBe(3);
    expect(cli.stderr).toMatch(/no longer pending/);
    await api.call('DELETE', `/api/v1/jobs/${running}`, { token: ctl });
  }, 180_000);

  it('keeps a request held before submission back, changes its spec, and submits it once released', async () => {
    const sim = await env.sim({ cpus: 2 });
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const ctl = await api.token(['submit', 'read', 'control'], 'ctl', 'lab-a');
    const submitQueue = td.daemon.queues.submit;
    await submitQueue.pause();
    const r = await api.call('POST', '/api/v1/jobs', {
      token: ctl,
      body: { spec: shellSpec('early', 'true', sim.workDir) },
    });
    const id = (r.json as { id: string }).id;
    // Through the CLI: its actor is the Unix user.
    const hold = await runCli(['jobs', 'hold', id, '--data-dir', td.dataDir, '--json'], { timeoutMs: 60_000 });
    expect(hold.code, hold.stderr).toBe(0);
    expect(JSON.parse(hold.stdout)).toMatchObject({
      changed: true,
      where: 'history',
      held: { by: expect.stringMatching(/^cli:/) },
    });
    const update = await api.call('PATCH', `/api/v1/jobs/${id}`, {
      token: ctl,
      body: { time_limit: 9, name: 'later' },
    });
    expect(update.status, update.text).toBe(200);
    expect(update.json as ControlAnswer).toMatchObject({ where: 'history' });
    const again = await api.call('PATCH', `/api/v1/jobs/${id}`, {
      token: ctl,
      body: { nice: 5, comment: 'x', name: 'ok' },
    });
    expect(again.status, again.text).toBe(200);
    const spec = (
      (await api.call('GET', `/api/v1/jobs/${id}`, { token: ctl })).json as { spec: Record<string, unknown> }
    ).spec;
    expect(spec).toMatchObject({ time_limit: 9, name: 'ok', nice: 5, comment: 'x' });
    await submitQueue.resume();
    // Kept back: the worker looks at it and sends nothing (several of its 2 s looks).
    await new Promise((resolve) => setTimeout(resolve, 5000)); // real time: the worker's recheck runs on it
    let row = (await td.waitForState(id, 'queued', 1000)) as JobRequestRow;
    expect(row.jobId).toBeNull();
    expect(row.heldBy).toMatch(/^cli:/);
    const shown = await runCli(['jobs', 'show', id, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    expect(shown.stdout).toMatch(/held\s+by cli:/);
    const release = await api.call('POST', `/api/v1/jobs/${id}/release`, { token: ctl, body: {} });
    expect(release.status, release.text).toBe(200);
    row = await td.waitForState(id, 'completed', 30_000);
    const job = await simJob(td, row.jobId as number);
    expect(job.name).toBe('ok');
    expect(job.time_limit).toMatchObject({ minutes: 9 });
  }, 120_000);

  it('holds a run whole, and an array', async () => {
    const sim = await env.sim({ cpus: 1 });
    const pipeline = [
      'steps:',
      '  first:',
      `    current_working_directory: ${sim.workDir}`,
      '    script: "#!/bin/sh\\nsleep 60\\n"',
      '  second:',
      `    current_working_directory: ${sim.workDir}`,
      '    needs: [{ step: first, type: afterany }]',
      '    script: "#!/bin/sh\\ntrue\\n"',
      '  third:',
      `    current_working_directory: ${sim.workDir}`,
      '    needs: [second]',
      '    script: "#!/bin/sh\\ntrue\\n"',
    ].join('\n');
    const td = await env.daemon(sim.url, {}, { 'flow.yaml': pipeline });
    const api = apiClient(td);
    const ctl = await api.token(['submit', 'read', 'control', 'cancel'], 'ctl', 'default');
    const other = await api.token(['read', 'control'], 'other', 'lab-b');

    const run = await api.call('POST', '/api/v1/pipelines/flow/runs', { token: ctl, body: {} });
    expect(run.status, run.text).toBe(201);
    const runId = (run.json as { id: string }).id;
    const steps = async () =>
      (await api.call('GET', `/api/v1/runs/${runId}`, { token: ctl })).json as {
        steps: { id: string; step: string; state: string; held: unknown }[];
      };
    // first runs (one CPU), second waits in Slurm, third waits for second's job id or in Slurm.
    await waitFor(
      async () => (await steps()).steps.some((s) => s.step === 'first' && s.state === 'running') || undefined,
      {
        timeoutMs: 30_000,
        what: 'the first step running',
      },
    );
    expect((await api.call('POST', `/api/v1/runs/${runId}/hold`, { token: other })).status).toBe(404);
    const held = await api.call('POST', `/api/v1/runs/${runId}/hold`, { token: ctl });
    expect(held.status, held.text).toBe(200);
    const outcomes = Object.fromEntries(
      (held.json as { steps: { step: string; outcome: string }[] }).steps.map((s) => [s.step, s.outcome]),
    );
    expect(outcomes).toMatchObject({ first: 'running', second: 'held', third: 'held' });
    const [runRow] = await listAudit(td.daemon.history.store, { action: 'run.hold', limit: 10 });
    expect(runRow).toMatchObject({ actor: 'token:ctl', target: `run:${runId}`, outcome: 'ok' });
    // first ends; second and third stay held.
    const first = (await steps()).steps.find((s) => s.step === 'first');
    await api.call('DELETE', `/api/v1/jobs/${first?.id}`, { token: ctl });
    await td.waitForState(first?.id as string, 'cancelled', 30_000);
    await new Promise((resolve) => setTimeout(resolve, 3000)); // real time: a held step would have started by now
    for (const s of (await steps()).steps.filter((x) => x.step !== 'first')) {
      expect(s.state, s.step).not.toBe('running');
      expect(s.held, s.step).toMatchObject({ by: 'token:ctl' });
    }
    const cli = await runCli(['runs', 'release', runId, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stdout).toMatch(/second: released/);
    await waitFor(
      async () =>
        (await steps()).steps.filter((s) => s.step !== 'first').every((s) => s.state === 'completed') || undefined,
      { timeoutMs: 30_000, what: 'second and third completed' },
    );

    // An array: tasks 1 and 3 held, the others run.
    const blocker = await api.call('POST', '/api/v1/jobs', {
      token: ctl,
      body: { spec: shellSpec('blocker', 'sleep 60', sim.workDir) },
    });
    const blockerId = (blocker.json as { id: string }).id;
    await td.waitForState(blockerId, 'running', 30_000);
    const arr = await api.call('POST', '/api/v1/jobs', {
      token: ctl,
      body: { spec: { ...shellSpec('arr', 'true', sim.workDir), array: '0-3' } },
    });
    const arrId = (arr.json as { id: string }).id;
    await td.waitForState(arrId, 'pending', 30_000);
    const notTasks = await api.call('POST', `/api/v1/jobs/${arrId}/hold`, { token: ctl, body: { indexes: '7' } });
    expect(notTasks.status).toBe(409);
    expect(errorOf(notTasks).code).toBe('SCHEDFLOW_ERR_TASKS_NOT_IN_ARRAY');
    // The whole array (the simulator does not take a task's own id, 123_4, in an update's path:
    // tasks named are held one by one against the real cluster, test/slurm/job-control.test.ts).
    const whole = await api.call('POST', `/api/v1/jobs/${arrId}/hold`, { token: ctl, body: {} });
    expect(whole.status, whole.text).toBe(200);
    await api.call('DELETE', `/api/v1/jobs/${blockerId}`, { token: ctl });
    await td.waitForState(blockerId, 'cancelled', 30_000);
    await new Promise((resolve) => setTimeout(resolve, 3000)); // real time: a task not held would have run by now
    expect((await td.waitForState(arrId, 'pending', 1000)).heldBy).toBe('token:ctl');
    const release = await runCli(['jobs', 'release', arrId, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    expect(release.code, release.stderr).toBe(0);
    await td.waitForState(arrId, 'completed', 30_000);
  }, 180_000);
});
