import { expect } from 'vitest';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, type TestSim } from '../../helpers/sim.js';

/** Jobs of alice's on a simulator, through its controller and accounting paths (lifecycle and dependencies-and-restarts). */

export type Json = Record<string, unknown>;
export const alice = bearer(ALICE_TOKEN);

export async function submit(s: TestSim, job: Json): Promise<number> {
  const res = await http(`${s.url}/sched/v0.0.44/job/submit`, {
    method: 'POST',
    headers: alice,
    body: { job: { current_working_directory: s.workDir, environment: ['PATH=/usr/bin:/bin'], ...job } },
  });
  expect(res.status, res.text).toBe(200);
  return (res.json as { job_id: number }).job_id;
}

export async function controllerJob(s: TestSim, id: number): Promise<Json | undefined> {
  const res = await http(`${s.url}/sched/v0.0.44/job/${id}`, { headers: alice });
  if (res.status === 404) return undefined;
  return (res.json as { jobs: Json[] }).jobs[0];
}

export async function accountingJob(s: TestSim, id: number): Promise<Json | undefined> {
  const res = await http(`${s.url}/scheddb/v0.0.44/job/${id}`, { headers: alice });
  return res.status === 200 ? (res.json as { jobs: Json[] }).jobs[0] : undefined;
}

/** Waits until the controller reports the job in `state`, recording every state seen on the way. */
export async function waitForState(s: TestSim, id: number, state: string, seen: string[] = []): Promise<Json> {
  return waitFor(
    async () => {
      const job = await controllerJob(s, id);
      const current = (job?.job_state as string[] | undefined)?.[0];
      if (current && seen.at(-1) !== current) seen.push(current);
      return current === state ? job : undefined;
    },
    { what: `job ${id} to reach ${state}`, intervalMs: 250, timeoutMs: 20_000 },
  );
}

export function times(job: Json | undefined): { start: number; end: number } {
  if (!job) throw new Error('no accounting record');
  return job.time as { start: number; end: number };
}
