import { describe, expect, it } from 'vitest';
import { getRequest, transitionsOf } from '../../../src/db/requests.js';
import { systemClock } from '../../../src/lib/clock.js';
import { askLostJobRecords, UNKNOWN_ACCOUNTING } from '../../../src/requests/lost-evidence.js';
import { lostResubmitPlan } from '../../../src/requests/lost-resubmit.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN } from '../../helpers/sim.js';

/**
 * Whether a job the controller lost may be submitted again rests on accounting's own answer for
 * its id, asked directly (src/requests/lost-evidence.ts): the records imported into the history
 * are one per job id and lose a lost job's start once the job that took its id is imported.
 */

const env = daemonTestEnv();

describe("a lost job's resubmit decision", () => {
  it("sees a start only accounting has (the poller never saw it run), and never resubmits without accounting's answer", async () => {
    const sim = await env.sim({ cpus: 1 });
    // Polled rarely: the job's run goes unseen, as while the daemon is down.
    const td = await env.daemon(sim.url, { pollFloorMs: 600_000, pollCeilingMs: 600_000, reconcileEveryMs: 600_000 });
    const store = td.daemon.history.store;
    // Outside schedflow, holding the one CPU.
    const blocker = await http(`${sim.url}/sched/v0.0.44/job/submit`, {
      method: 'POST',
      headers: bearer(ALICE_TOKEN),
      body: {
        job: {
          name: 'blocker',
          script: '#!/bin/sh\nsleep 60\n',
          current_working_directory: sim.workDir,
          environment: ['PATH=/usr/bin:/bin'],
        },
      },
    });
    expect(blocker.status, blocker.text).toBe(200);
    const blockerJobId = (blocker.json as { job_id: number }).job_id;
    const id = await td.daemon.submit({
      spec: jobSpecSchema.parse({
        name: 'unseen-run',
        script: '#!/bin/sh\ntrue\n',
        current_working_directory: sim.workDir,
      }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const row = await waitFor(
      async () => {
        const r = await getRequest(store, id);
        return r?.jobId ? r : undefined;
      },
      { what: 'the job id to be recorded', intervalMs: 50 },
    );
    const jobId = row.jobId as number;
    const client = td.daemon.clients.get('test');

    // Waiting: accounting's answer has its pending record, without a start: it never ran.
    const pending = await askLostJobRecords(client, systemClock, { jobId, createdAt: row.createdAt });
    expect(pending.kind).toBe('answered');
    expect(await lostResubmitPlan(store, row, 1, pending)).toEqual({ kind: 'resubmit', n: 1, budget: 1 });
    // Without accounting's answer (unreachable, not served) a start cannot be ruled out.
    expect(await lostResubmitPlan(store, row, 1, UNKNOWN_ACCOUNTING)).toEqual({ kind: 'unproven' });

    // It runs and ends unseen by the poller: only accounting knows it started.
    sim.server.cluster.cancel(blockerJobId);
    const ran = await waitFor(
      async () => {
        const answer = await askLostJobRecords(client, systemClock, { jobId, createdAt: row.createdAt });
        return answer.kind === 'answered' && answer.records.some((job) => job.start_time !== null) ? answer : undefined;
      },
      { what: 'accounting to show the start', timeoutMs: 20_000, intervalMs: 200 },
    );
    const now = await getRequest(store, id);
    expect(now?.startedAt).toBeNull();
    expect((await transitionsOf(store, id)).map((t) => t.toState)).not.toContain('running');
    expect(await lostResubmitPlan(store, now ?? row, 1, ran)).toEqual({ kind: 'started' });
    // The history alone (its records, its imported accounting) knows nothing of that start: only
    // the answer asked afresh does.
    expect(await lostResubmitPlan(store, now ?? row, 1, pending)).toEqual({ kind: 'resubmit', n: 1, budget: 1 });
  }, 60_000);
});
