import { afterEach, describe, expect, it } from 'vitest';
import { listRequests } from '../../../src/db/requests.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { type FlakyProxy, startFlakyProxy } from '../../helpers/flaky-proxy.js';
import { waitFor } from '../../helpers/http.js';

const env = daemonTestEnv();
let proxy: FlakyProxy | undefined;

afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

/**
 * Issue 13, weak spot 3: a burst of submissions against a proxy whose rate limit is far below
 * the profile's own budget (10 requests, 5 a second, the defaults). Every upstream request
 * counts, those answered 429 too, polls and marker lookups: the daemon must not multiply them.
 */
describe('a 429 storm', () => {
  it('costs at most 1.2 upstream requests per submit, makes no duplicate and submits every job', async () => {
    const jobs = 50;
    const sim = await env.sim({ cpus: 64, rateLimit: { capacity: 5, refillPerSecond: 2 } });
    proxy = await startFlakyProxy(sim.url);
    // The default reconcile interval (a minute): the test's 2 s would be a poll of its own.
    const td = await env.daemon(proxy.url, { reconcileEveryMs: 60_000, submitConcurrency: 4 });
    const store = td.daemon.history.store;
    // Let start-up requests (version check, first reconcile and poll) pass before the storm.
    // Real time: the storm is to start on the proxy's bucket refilled (5 at 2 a second, in 2.5 s
    // of its clock), as after a quiet spell, and the daemon's budget learns its pace in real time.
    await new Promise((r) => setTimeout(r, 3000));
    const before = proxy.requests.length;
    const started = Date.now();
    const ids = await Promise.all(
      Array.from({ length: jobs }, (_, i) =>
        td.daemon.submit({
          spec: jobSpecSchema.parse({
            name: `storm-${i}`,
            script: '#!/bin/sh\ntrue\n',
            current_working_directory: sim.workDir,
          }),
          owner: 'default',
          actor: 'test',
          origin: 'api',
        }),
      ),
    );
    await waitFor(
      async () => {
        const unsubmitted = (await listRequests(store, {})).filter((r) => ids.includes(r.id) && r.jobId === null);
        return unsubmitted.length === 0 ? true : undefined;
      },
      { what: 'every request submitted', timeoutMs: 55_000, intervalMs: 100 },
    );
    const during = proxy.requests.slice(before);
    const kinds = new Map<string, number>();
    for (const r of during) {
      const kind = `${r.method} ${r.url.split('?')[0]?.replace(/\/\d+$/, '/{id}')}`;
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    }
    const perSubmit = during.length / jobs;
    const summary = `${during.length} upstream requests for ${jobs} submits (${perSubmit.toFixed(2)} each) in ${
      Date.now() - started
    } ms: ${JSON.stringify(Object.fromEntries(kinds))}`;
    console.log(summary);

    const rows = (await listRequests(store, {})).filter((r) => ids.includes(r.id));
    expect(rows.filter((r) => r.state === 'submit_failed')).toEqual([]);
    const jobIds = new Set(rows.map((r) => r.jobId));
    expect(jobIds.size).toBe(jobs);
    // No duplicate upstream: one job per request, by the marker in its comment.
    const marked = sim.server.cluster.listJobs().filter((j) => j.comment.startsWith('schedflow:'));
    expect(marked.length).toBe(jobs);
    expect(new Set(marked.map((j) => j.comment)).size).toBe(jobs);
    expect(perSubmit, summary).toBeLessThanOrEqual(1.2);
  }, 70_000);
});
