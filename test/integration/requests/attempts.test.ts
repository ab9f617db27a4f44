import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { taskCounts } from '../../../src/db/array-tasks.js';
import { getRequest } from '../../../src/db/requests.js';
import type { JobRequestRow } from '../../../src/db/schema.js';
import { deliveriesOfRequest } from '../../../src/db/webhooks.js';
import { CANCELLED_NOT_RETRIED } from '../../../src/requests/attempt-policy.js';
import { attemptsOf } from '../../../src/requests/attempts.js';
import { apiClient, errorOf, shellSpec } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { uiPage } from '../../helpers/ui-page.js';

/**
 * Retry policies of job requests on the simulator, through the local API: each attempt its own
 * Slurm job linked to the first, memory and time grown within bounds, exit codes matched, the
 * limit and the bounds kept, the backoff kept across a restart, one webhook for the request.
 */

const env = daemonTestEnv();
const FAST = { pipelineTickMs: 200, pollFloorMs: 300 };
const HOOK = 'http://127.0.0.1:9/never';

interface Attempt {
  id: string;
  attempt: number;
  state: string;
  job_id: number | null;
  reason: string | null;
}

/** Submits through the API; returns the first attempt's id. */
async function submit(td: TestDaemon, body: Record<string, unknown>): Promise<string> {
  const api = apiClient(td);
  const created = await api.call('POST', '/api/v1/jobs', { token: await api.token(['submit']), body });
  expect(created.status, JSON.stringify(created.json)).toBe(201);
  return (created.json as { id: string }).id;
}

/** Waits until the request's last attempt has ended with no retry to come; returns every attempt. */
async function settled(td: TestDaemon, firstId: string, timeoutMs = 20_000): Promise<JobRequestRow[]> {
  return waitFor(
    async () => {
      const attempts = await attemptsOf(td.daemon.history.store, firstId);
      const last = attempts.at(-1);
      const over = last?.endedAt != null && last.retryDueAt === null && last.nextAttemptId === null;
      return over && ['completed', 'failed', 'timeout', 'out_of_memory'].includes(last.state) ? attempts : undefined;
    },
    { what: `request ${firstId} to settle`, timeoutMs, intervalMs: 100 },
  );
}

describe('retry policies of job requests', () => {
  it('an OUT_OF_MEMORY job is retried with its memory doubled, up to the bound, and fits', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, FAST);
    // tail holds 40 MB until its input ends, 1.5 s later: over 32M, under 64M.
    const script = '(head -c 40000000 /dev/zero; sleep 1.5) | tail -c 40000000 > /dev/null';
    const id = await submit(td, {
      spec: { ...shellSpec('oom', script, sim.workDir), memory_per_node: '32M' },
      webhook_url: HOOK,
      retry: { on: ['OUT_OF_MEMORY'], limit: 4, escalate: { memory_per_node: { factor: 2, max: '64M' } } },
    });
    const attempts = await settled(td, id, 30_000);
    expect(attempts.map((a) => [a.attempt, a.state, (a.spec as { memory_per_node: number }).memory_per_node])).toEqual([
      [1, 'out_of_memory', 32],
      [2, 'completed', 64],
    ]);
    // Each attempt its own Slurm job, linked to the first.
    expect(new Set(attempts.map((a) => a.jobId)).size).toBe(2);
    expect(attempts[1]?.firstAttemptId).toBe(id);
    expect(attempts[1]?.retryCause?.reason).toBe('OUT_OF_MEMORY on attempt 1; memory_per_node 32M → 64M');
    expect((await td.states(attempts[1]?.id as string)).slice(0, 2)).toEqual(['accepted', 'queued']);

    // The API shows the attempts from any of them, and why each was made.
    const api = apiClient(td);
    const shown = await api.call('GET', `/api/v1/jobs/${id}`, { token: await api.token(['read']) });
    const body = shown.json as { attempts: Attempt[]; retry: { next_attempt_id: string | null } };
    expect(body.attempts.map((a) => [a.attempt, a.state, a.reason])).toEqual([
      [1, 'out_of_memory', null],
      [2, 'completed', 'OUT_OF_MEMORY on attempt 1; memory_per_node 32M → 64M'],
    ]);
    expect(body.retry.next_attempt_id).toBe(attempts[1]?.id);

    // The web UI's job page lists the attempts, and its timeline says why this one was made.
    const ui = await uiPage(td, await api.token(['read']), `/ui/jobs/${attempts[1]?.id}`);
    expect(ui).toContain('<table aria-label="attempts">');
    expect(ui).toContain('retry: attempt 2, after');
    expect(ui).toContain('OUT_OF_MEMORY on attempt 1; memory_per_node 32M → 64M');

    // One webhook for the request: its last attempt's.
    const store = td.daemon.history.store;
    const deliveries = await Promise.all(attempts.map((a) => deliveriesOfRequest(store, a.id)));
    expect(deliveries.map((d) => d.length)).toEqual([0, 1]);
  }, 40_000);

  it("a TIMEOUT grows the time limit, within the policy's bound and the partition's MaxTime, read from the controller", async () => {
    // 20× time: a minute of time limit is 3 s. The partition allows 2 minutes. The job that
    // fits runs 4 s: past 3 s, and 2 s within 6 s for starting beside a loaded suite (with 1.2 s,
    // at 30×, a full suite on 2 cores once started it too late to end in time).
    const sim = await env.sim({ timeScale: 20, partitions: [{ name: 'debug', default: true, maxTimeMin: 2 }] });
    const td = await env.daemon(sim.url, FAST);
    const fits = await submit(td, {
      spec: { ...shellSpec('slow', 'sleep 4', sim.workDir), partition: 'debug', time_limit: 1 },
      retry: { on: ['TIMEOUT'], limit: 3, escalate: { time_limit: { factor: 2, max: 2 } } },
    });
    const neverFits = await submit(td, {
      spec: { ...shellSpec('slower', 'sleep 12', sim.workDir), partition: 'debug', time_limit: 1 },
      webhook_url: HOOK,
      retry: { on: ['TIMEOUT'], limit: 3, escalate: { time_limit: { factor: 3, max: '1:00:00' } } },
    });
    const a = await settled(td, fits);
    expect(a.map((r) => [r.state, (r.spec as { time_limit: number }).time_limit])).toEqual([
      ['timeout', 1],
      ['completed', 2],
    ]);
    const b = await settled(td, neverFits);
    // ×3 would be 3 minutes: the partition's 2 are taken, then nothing more can grow.
    expect(b.map((r) => [r.state, (r.spec as { time_limit: number }).time_limit])).toEqual([
      ['timeout', 1],
      ['timeout', 2],
    ]);
    expect(b[1]?.retryCause?.escalated).toEqual([{ field: 'time_limit', from: 1, to: 2, cappedBy: 'partition' }]);
    expect(b[1]?.retryNote).toBe(
      "TIMEOUT: time_limit is 0:02:00 already, and the partition's limit is 0:02:00; no retry is made",
    );
    // Its webhook went out when the bound stopped it, once.
    const deliveries = await Promise.all(b.map((r) => deliveriesOfRequest(td.daemon.history.store, r.id)));
    expect(deliveries.map((d) => d.length)).toEqual([0, 1]);
  }, 40_000);

  it('FAILED is retried with a listed exit code, up to the limit; another exit code is not', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, FAST);
    const retry = { on: ['FAILED'], exit_codes: [75], limit: 2 };
    const listed = await submit(td, { spec: shellSpec('tempfail', 'exit 75', sim.workDir), retry });
    const other = await submit(td, { spec: shellSpec('broken', 'exit 3', sim.workDir), retry });
    const a = await settled(td, listed);
    expect(a.map((r) => [r.attempt, r.state, r.exitCode])).toEqual([
      [1, 'failed', 75],
      [2, 'failed', 75],
      [3, 'failed', 75],
    ]);
    expect(a[2]?.retryNote).toBe("FAILED on attempt 3: the policy's limit of 2 retries is reached");
    const b = await settled(td, other);
    expect(b.map((r) => [r.attempt, r.state, r.exitCode, r.retryNote])).toEqual([[1, 'failed', 3, null]]);
  }, 40_000);

  it('a backoff outlasts a restart of the daemon: the next attempt is made at its due time, not before', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, FAST);
    const id = await submit(td, {
      spec: shellSpec('later', 'exit 75', sim.workDir),
      retry: { on: ['FAILED'], limit: 1, backoff: '3s' },
    });
    const first = await waitFor(async () => (await getRequest(td.daemon.history.store, id))?.retryDueAt ?? undefined, {
      what: 'the retry to be due',
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    await td.restart();
    const attempts = await settled(td, id);
    expect(attempts.map((r) => r.attempt)).toEqual([1, 2]);
    expect(attempts[1]?.createdAt).toBeGreaterThanOrEqual(first);
    expect((await getRequest(td.daemon.history.store, id))?.nextAttemptId).toBe(attempts[1]?.id);
  }, 40_000);

  it('a cancel while an ended attempt waits out its backoff withdraws the next attempt; the request ends there', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, FAST);
    const id = await submit(td, {
      spec: shellSpec('withdrawn', 'exit 75', sim.workDir),
      retry: { on: ['FAILED'], limit: 2, backoff: '1m' },
      webhook_url: HOOK,
    });
    await waitFor(async () => (await getRequest(td.daemon.history.store, id))?.retryDueAt ?? undefined, {
      what: 'the retry to be due',
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    const api = apiClient(td);
    const cancelled = await api.call('DELETE', `/api/v1/jobs/${id}`, { token: await api.token(['cancel']) });
    expect(cancelled.status, JSON.stringify(cancelled.json)).toBe(200);
    expect((cancelled.json as { message: string }).message).toMatch(/^next attempt withdrawn: cancelled by API token/);
    const row = await getRequest(td.daemon.history.store, id);
    expect(row?.retryDueAt).toBeNull();
    expect(row?.nextAttemptId).toBeNull();
    expect(row?.state).toBe('failed');
    // The request ended here: its one webhook is recorded now, not held for an attempt to come.
    expect(await deliveriesOfRequest(td.daemon.history.store, id)).toHaveLength(1);
    // Asked again: it has ended, and nothing is withdrawn twice.
    const again = await api.call('DELETE', `/api/v1/jobs/${id}`, { token: await api.token(['cancel']) });
    expect(again.status).toBe(409);
    expect(await attemptsOf(td.daemon.history.store, id)).toHaveLength(1);
  }, 40_000);

  it("an array's policy retries only the tasks that did not complete, as one linked request", async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, FAST);
    const id = await submit(td, {
      spec: {
        ...shellSpec(
          'array-policy',
          '[ "$SLURM_ARRAY_TASK_ID" = 2 ] && [ ! -e array-policy-once ] && touch array-policy-once && exit 75\ntrue',
          sim.workDir,
        ),
        array: '0-3',
      },
      retry: { on: ['FAILED'], exit_codes: [75], limit: 1 },
    });
    const attempts = await settled(td, id);
    expect(attempts.map((r) => r.state)).toEqual(['failed', 'completed']);
    const second = attempts[1] as JobRequestRow;
    expect((second.spec as { array?: string }).array).toBe('2');
    expect(second.arrayRetryOf).toBe(id);
    expect(second.arrayTaskCount).toBe(1);
  }, 40_000);

  it('a job file carries its policy: `jobs submit` checks it, `jobs show` lists the attempts', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, FAST);
    const file = join(td.configDir, 'tempfail.yaml');
    const job = `name: tempfail\nscript: "#!/bin/sh\\nexit 75\\n"\ncurrent_working_directory: ${sim.workDir}\n`;
    writeFileSync(file, `${job}retry:\n  on: [FAILED]\n  exit_codes: [75]\n  limit: 1\n`);
    const submitted = await runCli(['jobs', 'submit', file, '--json', '--data-dir', td.dataDir]);
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = (JSON.parse(submitted.stdout) as { requestId: string }).requestId;
    const attempts = await settled(td, id);
    expect(attempts.map((a) => [a.attempt, a.state, a.exitCode])).toEqual([
      [1, 'failed', 75],
      [2, 'failed', 75],
    ]);
    const shown = await runCli(['jobs', 'show', id, '--data-dir', td.dataDir]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`next      attempt 2: ${attempts[1]?.id}`);
    expect(shown.stdout).toMatch(/2 +\S+ +\d+ +failed +75 +FAILED \(exit 75\) on attempt 1/);
  }, 60_000);

  it('refuses at the door a policy that cannot work, saying why', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, FAST);
    const api = apiClient(td);
    const token = await api.token(['submit']);
    const noMemory = await api.call('POST', '/api/v1/jobs', {
      token,
      body: {
        spec: shellSpec('x', 'true'),
        retry: { on: ['OUT_OF_MEMORY'], limit: 1, escalate: { memory_per_node: { factor: 2, max: '16G' } } },
      },
    });
    expect(noMemory.status).toBe(400);
    expect(errorOf(noMemory).fields).toEqual([
      {
        in: 'body',
        path: 'retry',
        reason: "retry.escalate.memory_per_node grows the job's memory_per_node: set memory_per_node",
      },
    ]);
    const badState = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: shellSpec('x', 'true'), retry: { on: ['TIMEOUT'], limit: 1, exit_codes: [1] } },
    });
    expect(badState.status).toBe(400);
    expect(errorOf(badState).fields?.[0]).toMatchObject({
      path: 'retry.exit_codes',
      reason: 'exit_codes is about FAILED: add FAILED to on',
    });
    // A cancel is a person's decision: no policy undoes it.
    const cancelled = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: shellSpec('x', 'true'), retry: { on: ['NODE_FAIL', 'CANCELLED'], limit: 1 } },
    });
    expect(cancelled.status).toBe(400);
    expect(errorOf(cancelled).fields?.[0]).toMatchObject({ path: 'retry.on.1', reason: CANCELLED_NOT_RETRIED });
  }, 20_000);

  it('an array cancelled after one of its tasks failed is not retried by its policy; the note says why', async () => {
    const sim = await env.sim({ cpus: 4 });
    const td = await env.daemon(sim.url, FAST);
    const id = await submit(td, {
      spec: {
        ...shellSpec('array-cancelled', '[ "$SLURM_ARRAY_TASK_ID" = 0 ] && exit 75\nsleep 60', sim.workDir),
        array: '0-2',
      },
      retry: { on: ['FAILED'], exit_codes: [75], limit: 1 },
    });
    const store = td.daemon.history.store;
    await waitFor(
      async () => {
        const counts = await taskCounts(store, id);
        return counts.failed === 1 && counts.running === 2 ? true : undefined;
      },
      { what: 'task 0 failed and the others running', timeoutMs: 15_000, intervalMs: 100 },
    );
    const api = apiClient(td);
    const cancel = await api.call('DELETE', `/api/v1/jobs/${id}`, { token: await api.token(['cancel']) });
    expect(cancel.status, JSON.stringify(cancel.json)).toBe(202);
    const ended = await td.waitForState(id, 'failed', 15_000);
    expect(await taskCounts(store, id)).toEqual({ failed: 1, cancelled: 2 });
    expect(ended.retryDueAt).toBeNull();
    expect(ended.retryNote).toMatch(
      /^2 tasks were cancelled: an array with cancelled tasks is not retried by its policy/,
    );
    // Still nothing made once the pipeline tick (which makes due attempts) has run a few times:
    // real time, the tick is the daemon's own timer.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await attemptsOf(store, id)).toHaveLength(1);
  }, 40_000);
});
