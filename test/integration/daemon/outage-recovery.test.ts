import { describe, expect, it } from 'vitest';
import { getProfileSync } from '../../../src/db/accounting.js';
import { getRequest } from '../../../src/db/requests.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { http, waitFor } from '../../helpers/http.js';

const env = daemonTestEnv();

/**
 * Submissions retried through an upstream outage wait out a backoff that grows to cover an
 * hour of trouble: after a long outage the next attempt can be minutes away (the chaos run's
 * outage-long left requests `submitting` past its deadline). Once the scheduler answers again,
 * they go at once.
 */
describe('a submission retried through an outage', () => {
  it('goes as soon as the scheduler answers again, not when its backoff ends', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, { pollCeilingMs: 1000 });
    const store = td.daemon.history.store;
    const setUpstream = async (state: 'up' | 'down') => {
      const res = await http(`${sim.url}/_sim/upstream`, {
        headers: sim.admin,
        method: 'PUT',
        body: { slurmctld: state, slurmdbd: state },
      });
      expect(res.status).toBe(200);
    };
    await setUpstream('down');
    const id = await td.daemon.submit({
      spec: jobSpecSchema.parse({
        name: 'after-outage',
        script: '#!/bin/sh\ntrue\n',
        current_working_directory: sim.workDir,
      }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await waitFor(async () => ((await getProfileSync(store, 'test'))?.lastPollOk === false ? true : undefined), {
      what: 'the outage to be seen by a poll',
    });
    // Four attempts failed: the next waits 8–16 s (2 s doubling, half jittered) from the failure,
    // room enough for a poll, the promotion and the submission on a loaded machine (4 s was not).
    await waitFor(
      async () => {
        const j = await td.daemon.queues.submit.getJob(id);
        return j && j.attemptsMade >= 4 && (await j.isDelayed()) ? true : undefined;
      },
      { what: 'four failed attempts', timeoutMs: 30_000, intervalMs: 50 },
    );
    const retryNoSoonerThan = Date.now() - 50 + 8000;
    await setUpstream('up');
    const submitted = await waitFor(async () => (await getRequest(store, id))?.submittedAt ?? undefined, {
      what: 'the submission',
      timeoutMs: 20_000,
      intervalMs: 50,
    }).then(() => getRequest(store, id));
    const at = submitted?.submittedAt ?? Number.POSITIVE_INFINITY;
    expect(at, `submitted ${at - retryNoSoonerThan} ms after its backoff would have let it`).toBeLessThan(
      retryNoSoonerThan,
    );
    await td.waitForState(id, 'completed');
  }, 60_000);
});
