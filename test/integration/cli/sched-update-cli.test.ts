import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, cleanEnv, runCli } from '../../helpers/cli-process.js';
import { waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, giveToJobUser, startSim, type TestSim } from '../../helpers/sim.js';

/** `schedflow sched hold|release|update` as a user runs them, against a simulator. */

let sim: TestSim;
let dir: string;
let tokenFile: string;

function sched(args: string[]): Promise<CliResult> {
  return runCli(['sched', '--url', sim.url, '--token-file', tokenFile, '--log-level', 'error', ...args], {
    cwd: dir,
    env: cleanEnv(),
    timeoutMs: 30_000,
  });
}

function ok(result: CliResult): string {
  expect(result.stderr, `stdout: ${result.stdout}`).toBe('');
  expect(result.code).toBe(0);
  return result.stdout;
}

async function record(jobId: number): Promise<Record<string, unknown>> {
  const res = await fetch(`${sim.url}/slurm/v0.0.44/job/${jobId}`, {
    headers: { 'X-SLURM-USER-NAME': 'alice', 'X-SLURM-USER-TOKEN': ALICE_TOKEN },
  });
  return ((await res.json()) as { jobs: Record<string, unknown>[] }).jobs[0] as Record<string, unknown>;
}

async function submit(name: string, cpus: number): Promise<number> {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(file, `name: ${name}\ncpus_per_task: ${cpus}\ntime_limit: 10\nscript: "#!/bin/sh\\nsleep 60\\n"\n`);
  const out = ok(await sched(['submit', file]));
  return Number(/submitted job (\d+)/.exec(out)?.[1]);
}

beforeAll(async () => {
  sim = await startSim({ cpus: 2 });
  dir = mkdtempSync(join(tmpdir(), 'schedflow-cli-update-'));
  giveToJobUser(dir);
  tokenFile = join(dir, 'alice.token');
  writeFileSync(tokenFile, `${ALICE_TOKEN}\n`);
  chmodSync(tokenFile, 0o600);
});

afterAll(async () => {
  await sim?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('schedflow sched hold, release, update', { timeout: 120_000 }, () => {
  it('holds, updates and releases a waiting job; refuses a running job a partition in Slurm words, at the door', async () => {
    const blocker = await submit('cli-blocker', 2);
    await waitFor(async () => ((await record(blocker)).job_state as string[])[0] === 'RUNNING' || undefined);
    const waiter = await submit('cli-waiter', 1);

    expect(ok(await sched(['hold', String(waiter)]))).toBe(`held job ${waiter}\n`);
    expect(await record(waiter)).toMatchObject({ hold: true, state_reason: 'JobHeldUser' });
    const updated = ok(
      await sched(['update', String(waiter), '--time-limit', '5', '--partition', 'lab-owner', '--name', 'renamed']),
    );
    expect(updated).toBe(`updated (time limit 5 min, partition lab-owner, name renamed) job ${waiter}\n`);
    expect(await record(waiter)).toMatchObject({
      time_limit: { number: 5 },
      partition: 'lab-owner',
      name: 'renamed',
    });
    expect(JSON.parse(ok(await sched(['--json', 'release', String(waiter)])))).toEqual({
      job_id: String(waiter),
      hold: false,
    });
    expect(await record(waiter)).toMatchObject({ hold: false });

    const moved = await sched(['update', String(blocker), '--partition', 'lab-owner']);
    expect(moved.code).toBe(3);
    expect(moved.stdout).toBe('');
    expect(moved.stderr).toContain('Job is no longer pending execution (Slurm error 2073)');
    expect(moved.stderr).not.toMatch(/\n\s+at /);

    const raised = await sched(['update', String(blocker), '--time-limit', '20']);
    expect(raised.code).toBe(3);
    expect(raised.stderr).toContain('Access/permission denied (Slurm error 2002)');

    const nothing = await sched(['update', String(waiter)]);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('changes nothing');
    const badId = await sched(['hold', 'abc']);
    expect(badId.code).toBe(2);
    expect(badId.stderr).toContain('"abc" is not a job id');
    await sched(['cancel', String(waiter)]);
    await sched(['cancel', String(blocker)]);
  });
});
