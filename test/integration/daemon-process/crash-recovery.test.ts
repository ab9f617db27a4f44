import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { DEFAULT_QUEUE_PREFIX } from '../../../src/queue/catalog.js';
import type { FlakyProxy } from '../../helpers/flaky-proxy.js';
import {
  daemonProcessEnv,
  jobsWithMarker,
  logLines,
  queuedId,
  requestOf,
  SHUTDOWN_GRACE_MS,
  statesOf,
  waitForState,
} from './daemon-process-env.js';

/**
 * `schedflow start` killed or stopped with work in flight, then started again on the same
 * data dir: the restarted daemon takes up what the first left, and the scheduler gets one
 * job for each request.
 *
 * Each test starts two daemons and waits on the scheduler's 2 s cache several times: 27 s
 * alone, 55 s in a whole run on a loaded machine, past 60 s once (load 12). Two minutes each.
 */

const dproc = daemonProcessEnv();

describe('a daemon killed with SIGKILL right after the scheduler accepted a submission', () => {
  it('makes exactly one scheduler job: the restarted daemon adopts the job by its marker', async () => {
    const t = await dproc.setUp({ viaProxy: true });
    const p = dproc.proxy as FlakyProxy;
    const first = await t.startDaemon();
    const reached = p.holdAnswerOnce((r) => r.method === 'POST' && r.url.endsWith('/job/submit'));

    // A short job: it has ended when the restarted daemon adopts it, a few seconds after the kill.
    const submit = await t.cli(['jobs', 'submit', t.jobFile('crash', '#!/bin/sh\nsleep 1\n'), '--data-dir', t.dataDir]);
    expect(submit.stderr).toBe('');
    expect(submit.code).toBe(0);
    const id = queuedId(submit.stdout);

    // The simulator has accepted the job; its answer is held in the proxy.
    await Promise.race([
      reached,
      new Promise((_, reject) => setTimeout(() => reject(new Error('the submission never reached the proxy')), 15_000)),
    ]);
    expect((await requestOf(t.dataDir, id)).row?.state).toBe('submitting');
    const killedAt = Date.now();
    first.child.kill('SIGKILL');
    expect(await first.exited).toMatchObject({ code: null, signal: 'SIGKILL' });
    p.release();
    const [accepted] = (await jobsWithMarker(t.sim, id)).controller;
    expect(accepted).toEqual(expect.any(Number));

    const second = await t.startDaemon();
    // The dead worker's claim lasts the lock duration, and the stalled check (as often) must see it
    // expire: the submit is taken up again within about two lock durations of the kill.
    const row = await waitForState(t.dataDir, id, 'completed', 30_000);
    const { transitions } = await requestOf(t.dataDir, id);
    const adoptedAt = transitions.find((tr) => tr.toState === 'submitted')?.at ?? Number.NaN;
    console.info(`kill -9 to adoption: ${adoptedAt - killedAt} ms`);

    expect(row).toMatchObject({ jobId: accepted, adopted: true });
    expect(statesOf(transitions).filter((s) => s === 'submitted')).toHaveLength(1);
    expect(transitions.find((tr) => tr.toState === 'submitted')?.detail).toBe(
      'found by its marker after an interrupted submit',
    );
    expect(statesOf(transitions)).not.toContain('submit_failed');
    expect(await jobsWithMarker(t.sim, id)).toEqual({ controller: [accepted], accounting: [accepted] });
    // One POST in all: the second daemon looked the marker up instead of submitting again.
    expect(p.requests.filter((r) => r.method === 'POST' && r.url.endsWith('/job/submit'))).toHaveLength(1);
    expect(logLines(second.stdout).some((l) => l.msg === 'adopted the job an interrupted submit created')).toBe(true);

    const show = await t.cli(['jobs', 'show', id, '--data-dir', t.dataDir]);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain(`job id    ${accepted} (adopted after an interrupted submit)`);

    const stopped = await second.stop('SIGTERM');
    expect(stopped.code).toBe(143);

    // The end comes from the job's accounting record, with exit code and times, though the job
    // ended before it was adopted.
    const end = transitions.at(-1);
    expect(
      { source: end?.source, exitCode: row.exitCode, started: row.startedAt !== null, ended: row.endedAt !== null },
      'an adopted job that had already ended was concluded without its accounting record',
    ).toEqual({ source: 'accounting', exitCode: 0, started: true, ended: true });
  }, 120_000);
});

describe('SIGTERM while a job runs, then a restart', () => {
  it('exits 143 after logging "shutting down"; the restarted daemon follows the job to completed', async () => {
    const t = await dproc.setUp();
    const first = await t.startDaemon();
    // The job runs until the test lets it end: through the stop and the restart, however long they take.
    const gate = join(t.sim.workDir, 'long.go');
    const script = `#!/bin/sh\nwhile [ ! -e ${gate} ]; do sleep 0.2; done\n`;
    const submit = await t.cli(['jobs', 'submit', t.jobFile('long', script), '--data-dir', t.dataDir]);
    expect(submit.code).toBe(0);
    const id = queuedId(submit.stdout);
    await waitForState(t.dataDir, id, 'running');

    const signalledAt = Date.now();
    first.child.kill('SIGTERM');
    const exit = await first.exited;
    const took = exit.at - signalledAt;
    expect(exit).toMatchObject({ code: 143, signal: null });
    // Nothing in flight to wait for: well within the grace period.
    expect(took).toBeLessThan(SHUTDOWN_GRACE_MS);
    const shutdownLog = logLines(first.stdout).find((l) => l.msg === 'shutting down');
    expect(shutdownLog).toMatchObject({ signal: 'SIGTERM', level: 30 });
    expect(first.stderr).toBe('');
    // Stopped while the job still runs: the history says running.
    expect((await requestOf(t.dataDir, id)).row?.state).toBe('running');

    const second = await t.startDaemon();
    writeFileSync(gate, '');
    const row = await waitForState(t.dataDir, id, 'completed', 30_000);
    expect(row.exitCode).toBe(0);
    const states = statesOf((await requestOf(t.dataDir, id)).transitions);
    expect(states.filter((s) => s === 'running')).toHaveLength(1);
    expect(states.filter((s) => s === 'submitted')).toHaveLength(1);
    expect(states).not.toContain('lost');
    expect(states).not.toContain('failed');
    expect(states.at(-1)).toBe('completed');
    expect((await jobsWithMarker(t.sim, id)).accounting).toEqual([row.jobId]);

    expect((await second.stop('SIGINT')).code).toBe(130);
    console.info(`SIGTERM to exit: ${took} ms`);
  }, 120_000);
});

describe('SIGTERM while the answer to an accepted submission is held upstream', () => {
  it('aborts it after the grace period, exits 143, and the restarted daemon adopts the one job', async () => {
    const t = await dproc.setUp({ viaProxy: true });
    const p = dproc.proxy as FlakyProxy;
    const first = await t.startDaemon();
    const reached = p.holdAnswerOnce((r) => r.method === 'POST' && r.url.endsWith('/job/submit'));
    const submit = await t.cli(['jobs', 'submit', t.jobFile('held', '#!/bin/sh\ntrue\n'), '--data-dir', t.dataDir]);
    const id = queuedId(submit.stdout);
    await reached;
    expect((await requestOf(t.dataDir, id)).row?.state).toBe('submitting');

    const signalledAt = Date.now();
    first.child.kill('SIGTERM');
    const exit = await first.exited;
    const took = exit.at - signalledAt;
    console.info(`SIGTERM to exit with a submit in flight: ${took} ms`);
    expect(exit.code).toBe(143);
    // The submit gets the grace period, then it is aborted and handed back to its queue.
    expect(took).toBeGreaterThanOrEqual(SHUTDOWN_GRACE_MS - 500);
    expect(took).toBeLessThan(SHUTDOWN_GRACE_MS + 5_000);
    const logs = logLines(first.stdout);
    expect(logs.some((l) => l.msg === 'shutting down')).toBe(true);
    expect(logs.some((l) => l.msg === 'shutdown deadline passed; skipping the remaining steps')).toBe(false);
    expect(first.stderr).toBe('');
    p.release();
    expect((await requestOf(t.dataDir, id)).row).toMatchObject({ state: 'submitting', jobId: null });
    // Handed back without spending one of its attempts: the shutdown was no failure of the submit.
    const queue = new Queue('submit', { connection: { url: t.redisUrl }, prefix: DEFAULT_QUEUE_PREFIX });
    try {
      const job = await queue.getJob(id);
      expect({ state: await job?.getState(), attemptsMade: job?.attemptsMade }).toEqual({
        state: 'delayed',
        attemptsMade: 0,
      });
    } finally {
      await queue.close();
    }

    // Handed back (not stalled): the restarted daemon takes it up at once, not after a lock expiry.
    const second = await t.startDaemon();
    const row = await waitForState(t.dataDir, id, 'completed', 30_000);
    const states = statesOf((await requestOf(t.dataDir, id)).transitions);
    expect(states.filter((s) => s === 'submitted')).toHaveLength(1);
    expect(row.adopted).toBe(true);
    expect(await jobsWithMarker(t.sim, id)).toEqual({ controller: [row.jobId], accounting: [row.jobId] });
    expect(p.requests.filter((r) => r.method === 'POST' && r.url.endsWith('/job/submit'))).toHaveLength(1);
    expect((await second.stop()).code).toBe(143);
  }, 120_000);
});
