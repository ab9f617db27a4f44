import { describe, expect, it } from 'vitest';
import { clusterSamplesSince, recordClusterSamples } from '../../../src/db/cluster-samples.js';
import type { JobSpec } from '../../../src/sched/job-spec.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';

/**
 * The cluster queue's sampling tick (workers/cluster-samples.ts): every `clusterSampleEveryMs`
 * it records each partition's CPUs from the cluster view's shared answer into the history, and
 * prunes samples past `clusterSampleKeepMs`.
 */

const env = daemonTestEnv();

describe('partition samples for the allocation chart', () => {
  it('records each partition every tick, the allocation of a running job included, and prunes the old ones', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, {
      clusterSampleEveryMs: 500,
      clusterSampleKeepMs: 3_600_000,
      clusterViewTtlMs: 500,
    });
    const store = td.daemon.history.store;
    // A sample from before the window: the next tick deletes it.
    const old = Date.now() - 2 * 3_600_000;
    await recordClusterSamples(store, 'test', old, [
      { partition: 'debug', cpusTotal: 4, cpusAllocated: 4, cpusIdle: 0, cpusOther: 0, jobsRunning: 1, jobsPending: 0 },
    ]);
    expect((await clusterSamplesSince(store, 'test', 0)).some((s) => s.at === old)).toBe(true);

    const idle = await waitFor(
      async () => {
        const rows = await clusterSamplesSince(store, 'test', 0);
        return rows.some((s) => s.at === old) ? undefined : rows.length > 0 ? rows : undefined;
      },
      { what: 'a first sample, and the old one pruned', timeoutMs: 20_000 },
    );
    const partitions = new Set(idle.map((s) => s.partition));
    // Every partition the simulator has (its configuration's), each with its CPUs.
    const listed = (await td.daemon.clients.get('test').listPartitions()).data.map((p) => p.name);
    expect(listed.length).toBeGreaterThan(0);
    expect([...partitions].sort()).toEqual([...listed].sort());
    for (const s of idle) expect(s.cpusAllocated + s.cpusIdle + s.cpusOther).toBe(s.cpusTotal);

    const id = await td.daemon.submit({
      spec: { name: 'sampled', script: '#!/bin/sh\nsleep 60\n', current_working_directory: sim.workDir } as JobSpec,
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(id, 'running');
    const startedAt = Date.now();
    const busy = await waitFor(
      async () => {
        const rows = await clusterSamplesSince(store, 'test', startedAt);
        return rows.find((s) => s.cpusAllocated > 0 && s.jobsRunning > 0);
      },
      { what: 'a sample with the running job', timeoutMs: 20_000 },
    );
    expect(busy.cpusAllocated).toBeGreaterThanOrEqual(1);
    // One row per partition per answer: a second tick on the same cached answer adds nothing.
    const rows = await clusterSamplesSince(store, 'test', 0);
    const keys = rows.map((s) => `${s.partition}@${s.at}`);
    expect(new Set(keys).size).toBe(keys.length);
  }, 60_000);
});
