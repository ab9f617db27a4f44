import { describe, expect, it } from 'vitest';
import { listRuns } from '../../../src/db/runs.js';
import type { DeadlineMissRow } from '../../../src/db/schema.js';
import { verifySignature } from '../../../src/notify/signature.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { daemonTestEnv, type TestDaemon, webhookSecretOf } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import type { TestSim } from '../../helpers/sim.js';
import { startWebhookReceiver } from '../../helpers/webhook-receiver.js';

/** Deadlines: too long pending (with the scheduler's reason), start-by, and scheduled runs that never started. */

const env = daemonTestEnv();

const misses = (d: TestDaemon): Promise<DeadlineMissRow[]> => {
  const history = d.daemon.history.store;
  return history.all(history.db.select().from(history.t.deadlineMisses));
};

/** A one-CPU simulator kept busy by a long job, so whatever comes next stays PENDING. */
async function busyCluster(): Promise<{ sim: TestSim; td: TestDaemon }> {
  const sim = await env.sim({ cpus: 1 });
  return { sim, td: await env.daemon(sim.url, { pipelineTickMs: 300 }) };
}

describe('deadlines', () => {
  it('a step pending past max_pending and not started by start_by is recorded once each, with the reason', async () => {
    const { sim, td } = await busyCluster();
    const blocker = await td.daemon.submit({
      spec: jobSpecSchema.parse({
        name: 'blocker',
        script: '#!/bin/sh\nsleep 20\n',
        current_working_directory: sim.workDir,
      }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(blocker, 'running');
    const id = await td.daemon.submit({
      spec: jobSpecSchema.parse({ name: 'late', script: '#!/bin/sh\ntrue\n', current_working_directory: sim.workDir }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
      deadlines: { maxPendingSec: 1, startBy: Date.now() + 1500 },
    });
    await td.waitForState(id, 'pending');
    const found = await waitFor(
      async () => {
        const all = await misses(td);
        return all.length === 2 ? all : undefined;
      },
      {
        what: 'two missed deadlines',
      },
    );
    expect(found.map((m) => [m.kind, m.requestId])).toEqual(
      expect.arrayContaining([
        ['max_pending', id],
        ['start_by', id],
      ]),
    );
    const pending = found.find((m) => m.kind === 'max_pending');
    expect(pending?.detail).toMatch(
      new RegExp(
        `^request ${id} \\(job \\d+\\) has been waiting to start for \\d+ s \\(limit 1 s\\); scheduler reason: Resources$`,
      ),
    );
    // Recorded once, however many checks see it (real time: the daemon's checks run on its timers).
    await new Promise((r) => setTimeout(r, 1000));
    expect(await misses(td)).toHaveLength(2);
  }, 30_000);

  it('a scheduled run that has not started when the next tick comes is flagged', async () => {
    const { sim, td } = await busyCluster();
    const blocker = await td.daemon.submit({
      spec: jobSpecSchema.parse({
        name: 'blocker',
        script: '#!/bin/sh\nsleep 20\n',
        current_working_directory: sim.workDir,
      }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(blocker, 'running');
    const s = sim;
    await td.restart(async () => {
      const { writeFileSync } = await import('node:fs');
      const { join } = await import('node:path');
      writeFileSync(
        join(td.configDir as string, 'pipelines', 'nightly.yaml'),
        `schedule:\n  cron: "*/3 * * * * *"\nsteps:\n  work:\n    script: "#!/bin/sh\\ntrue\\n"\n    current_working_directory: ${s.workDir}\n`,
      );
    });
    const flagged = await waitFor(async () => (await misses(td)).find((m) => m.kind === 'never_started'), {
      what: 'the run that never started to be flagged',
      timeoutMs: 15_000,
    });
    const [first] = (await listRuns(td.daemon.history.store, { pipeline: 'nightly' })).reverse();
    expect(flagged.runId).toBe(first?.id);
    expect(flagged.detail).toMatch(
      /^run [0-9a-f-]{36} of nightly for \S+ had not started when the next tick \(\S+\) came$/,
    );
  }, 30_000);
});

describe('webhooks of pipelines', () => {
  it('a run reports its end, and a step its missed deadline, to the pipeline webhook, signed', async () => {
    const receiver = await startWebhookReceiver();
    env.defer(() => receiver.stop());
    const sim = await env.sim();
    const yaml = [
      `webhook: ${receiver.url}/hooks/lab`,
      'steps:',
      '  slow:',
      '    script: "#!/bin/sh\\nsleep 2\\n"',
      `    current_working_directory: ${sim.workDir}`,
      '  late:',
      '    script: "#!/bin/sh\\ntrue\\n"',
      `    current_working_directory: ${sim.workDir}`,
      '    needs: [slow]',
      '    deadlines: { max_pending: 1 }',
    ].join('\n');
    const td = await env.daemon(sim.url, { pipelineTickMs: 300 }, { 'hooked.yaml': yaml });
    const run = await td.daemon.pipelines.trigger('hooked', { actor: 'test', trigger: 'api' });
    const calls = await receiver.waitForCalls(2, 20_000);
    const bodies = calls.map((c) => JSON.parse(c.body) as { event: string; [k: string]: unknown });
    expect(bodies.map((b) => b.event)).toEqual(['deadline.missed', 'run.finished']);
    expect(bodies[0]).toMatchObject({
      deadline: {
        kind: 'max_pending',
        run_id: run.id,
        // The reason the scheduler gives when the deadline is checked: Dependency once it has
        // looked at the job; under load the check may come first, and the miss says so (Slurm's
        // own reason is None until its scheduler has been through the job).
        detail: expect.stringMatching(/^step "late" .* scheduler reason: (Dependency|none given)$/),
      },
    });
    expect(bodies[1]).toMatchObject({
      run: {
        id: run.id,
        pipeline: 'hooked',
        state: 'succeeded',
        steps: [
          { step: 'late', state: 'completed' },
          { step: 'slow', state: 'completed' },
        ],
      },
    });
    const secret = webhookSecretOf(td);
    for (const call of calls) {
      expect(call.path).toBe('/hooks/lab');
      expect(verifySignature(call.body, String(call.headers['schedflow-signature']), secret)).toBe(true);
    }
  }, 30_000);
});
