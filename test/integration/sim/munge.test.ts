import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../../helpers/http.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * MUNGE needs munged running (the test setup script installs and starts it).
 * These tests fail rather than skip when it is missing, so CI cannot pass without them.
 */
function credential(ttlSec = 5): string {
  return execFileSync('munge', ['-n', '-t', String(ttlSec)], { encoding: 'utf8' }).trim();
}

const currentUser = execFileSync('id', ['-un'], { encoding: 'utf8' }).trim();

let sim: TestSim;
/** Made first, so that its TTL runs out while the other tests run. */
let expiring: { cred: string; madeBy: number };

beforeAll(async () => {
  try {
    expiring = { cred: credential(), madeBy: Date.now() };
  } catch (error) {
    throw new Error(`munge is not usable here (run test/setup.sh): ${(error as Error).message}`);
  }
  // The user's associations allow both accounts: what is tested is the proxy's binding, not Slurm's.
  sim = await startSim({ users: { [currentUser]: { uid: 0, defaultAccount: 'ops', accounts: ['ops', 'other'] } } });
});

afterAll(async () => {
  await sim?.stop();
});

describe('section 5: MUNGE scheme', () => {
  it('accepts a fresh 5-second credential and maps its uid to the cluster user name', async () => {
    const res = await http(`${sim.url}/sched/v0.0.44/jobs`, { headers: { authorization: `MUNGE ${credential()}` } });
    expect(res.status).toBe(200);
    expect((res.json as { meta: { client: { user: string } } }).meta.client.user).toBe(currentUser);
  });

  it('rejects a credential with a TTL other than exactly 5 seconds (the default TTL does not work)', async () => {
    for (const ttl of [300, 4]) {
      const res = await http(`${sim.url}/sched/v0.0.44/jobs`, {
        headers: { authorization: `MUNGE ${credential(ttl)}` },
      });
      expect(res.status).toBe(401);
      expect((res.json as { message: string }).message).toMatch(/TTL is \d+s; it must be exactly 5s/);
    }
  });

  it('rejects a replayed credential: a new credential is needed for each request', async () => {
    const cred = credential();
    const first = await http(`${sim.url}/sched/v0.0.44/jobs`, { headers: { authorization: `MUNGE ${cred}` } });
    expect(first.status).toBe(200);
    const again = await http(`${sim.url}/sched/v0.0.44/jobs`, { headers: { authorization: `MUNGE ${cred}` } });
    expect(again.status).toBe(401);
    expect((again.json as { message: string }).message).toMatch(/Replayed credential/);
  });

  it('rejects an expired credential', async () => {
    const { cred, madeBy } = expiring;
    // Real time: munged judges expiry by its own clock, in whole seconds (expired once now >
    // encode time + TTL), and the TTL must be 5 s. So until the second after the TTL has ended.
    const leftMs = (Math.floor(madeBy / 1000) + 6) * 1000 - Date.now() + 50;
    if (leftMs > 0) await new Promise((r) => setTimeout(r, leftMs));
    const res = await http(`${sim.url}/sched/v0.0.44/jobs`, { headers: { authorization: `MUNGE ${cred}` } });
    expect(res.status).toBe(401);
    expect((res.json as { message: string }).message).toMatch(/Expired credential/);
  }, 15_000);

  it('rejects a malformed credential', async () => {
    const res = await http(`${sim.url}/sched/v0.0.44/jobs`, { headers: { authorization: 'MUNGE not-a-credential' } });
    expect(res.status).toBe(401);
  });

  it('has no account restriction of its own: a MUNGE user may submit to any account it names', async () => {
    const res = await http(`${sim.url}/sched/v0.0.44/job/submit`, {
      method: 'POST',
      headers: { authorization: `MUNGE ${credential()}` },
      body: {
        job: {
          name: 'munge-job',
          account: 'other',
          script: '#!/bin/sh\ntrue\n',
          current_working_directory: sim.workDir,
          environment: ['PATH=/usr/bin:/bin'],
        },
      },
    });
    expect(res.status).toBe(200);
    const id = (res.json as { job_id: number }).job_id;
    const job = await http(`${sim.url}/sched/v0.0.44/job/${id}`, {
      headers: { authorization: `MUNGE ${credential()}` },
    });
    expect((job.json as { jobs: { account: string; user_name: string }[] }).jobs[0]).toMatchObject({
      account: 'other',
      user_name: currentUser,
    });
  });
});
