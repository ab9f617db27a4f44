import { describe, expect, it } from 'vitest';
import { getRequest } from '../../../src/db/requests.js';
import { createToken } from '../../../src/db/tokens.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { http } from '../../helpers/http.js';

/**
 * A submission over the user's MaxSubmitJobs is refused by Slurm with error 2050 (the
 * simulator answers as real Slurm does): the request waits, with Slurm's reason, and goes in
 * once earlier jobs end, in the order requests were accepted, asking Slurm again only for the
 * first in line. The same is tested on a real cluster in test/slurm/submit-limit.test.ts.
 */

const env = daemonTestEnv();

describe('a submit limit', () => {
  it('holds requests in waiting and submits them in order as slots free up, never failing them', async () => {
    const sim = await env.sim({ users: { alice: { uid: 1003, defaultAccount: 'lab', maxSubmitJobs: 1 } } });
    const td = await env.daemon(sim.url, { submitLimitRecheckMs: 300, submitConcurrency: 1 });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const spec = jobSpecSchema.parse({
        name: `limited-${i}`,
        script: '#!/bin/sh\nsleep 1\n',
        current_working_directory: sim.workDir,
      });
      ids.push(await td.daemon.submit({ spec, owner: 'default', actor: 'test', origin: 'api' }));
    }
    const held = await td.waitForState(ids[3] as string, 'waiting');
    expect(held.jobId).toBeNull();
    expect(held.errorMessage).toMatch(/behind \d earlier request/);
    // The first in line has Slurm's own answer.
    expect((await getRequest(td.daemon.history.store, ids[1] as string))?.errorMessage).toMatch(/error 2050/);

    const ended = [];
    for (const id of ids) ended.push(await td.waitForState(id, 'completed', 30_000));
    const jobIds = ended.map((row) => row.jobId as number);
    expect([...jobIds].sort((a, b) => a - b)).toEqual(jobIds);
    for (const id of ids.slice(1)) {
      // One `waiting` each, however many times the first in line was offered again.
      const states = await td.states(id);
      expect(states.filter((s) => s === 'waiting')).toHaveLength(1);
      expect(states).not.toContain('submit_failed');
    }
    expect((await getRequest(td.daemon.history.store, ids[3] as string))?.errorCode).toBeNull();
    // Four jobs one after another, each found ended by a poll: 7 s alone, several times that on a
    // loaded machine (the PostgreSQL tier in CI). No bound on time is asserted here.
  }, 120_000);

  it('fails a request no ending job can make room for at once, saying to change the job', async () => {
    // MaxSubmitJobs 0 stands for a limit on the job itself (MaxWall, MaxTRESPerJob): the same 2050.
    const sim = await env.sim({ users: { alice: { uid: 1003, defaultAccount: 'lab', maxSubmitJobs: 0 } } });
    const td = await env.daemon(sim.url, { submitLimitRecheckMs: 300 });
    const spec = jobSpecSchema.parse({
      name: 'never',
      script: '#!/bin/sh\ntrue\n',
      current_working_directory: sim.workDir,
    });
    const id = await td.daemon.submit({ spec, owner: 'default', actor: 'test', origin: 'api' });
    const row = await td.waitForState(id, 'submit_failed');
    expect(row.errorMessage).toMatch(/error 2050.*no active job whose end would make room.*change the job/);
    expect(await td.states(id)).not.toContain('waiting');
  });

  it('lets a waiting request be cancelled: it is withdrawn, never submitted', async () => {
    const sim = await env.sim({ users: { alice: { uid: 1003, defaultAccount: 'lab', maxSubmitJobs: 1 } } });
    const td = await env.daemon(sim.url, { submitLimitRecheckMs: 300 });
    const spec = (name: string, script: string) =>
      jobSpecSchema.parse({ name, script, current_working_directory: sim.workDir });
    const blocker = await td.daemon.submit({
      spec: spec('blocker', '#!/bin/sh\nsleep 30\n'),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(blocker, 'running');
    const waiting = await td.daemon.submit({
      spec: spec('withdrawn', '#!/bin/sh\ntrue\n'),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(waiting, 'waiting');
    const res = await http(`${td.daemon.apiUrl}/api/v1/jobs/${waiting}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${await apiToken(td)}` },
    });
    expect(res.status).toBe(200);
    const row = await td.waitForState(waiting, 'cancelled');
    expect(row.jobId).toBeNull();
  });
});

async function apiToken(td: Awaited<ReturnType<typeof env.daemon>>): Promise<string> {
  return (await createToken(td.daemon.history.store, { name: 'cancel-test', scopes: ['admin'] })).token;
}
