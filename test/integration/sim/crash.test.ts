import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanEnv, REPO, schedflowEntry } from '../../helpers/cli-process.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, giveToJobUser } from '../../helpers/sim.js';

/**
 * `schedflow sim` as a real OS process that dies by SIGKILL: no shutdown hook
 * runs, its job scripts live on as orphans, and the next simulator on the same
 * state dir has to take over the lock, mark the interrupted jobs NODE_FAIL and
 * kill the orphans (issue 2: "jobs that were running when it died are marked
 * NODE_FAIL"). The clean-restart path is in lifecycle.test.ts.
 */

type Json = Record<string, unknown>;
const alice = bearer(ALICE_TOKEN);

interface SimProcess {
  child: ChildProcess;
  pid: number;
  url: string;
  /** Resolves once the process has exited. */
  exited: Promise<void>;
}

let root: string | undefined;
const sims = new Set<ChildProcess>();
/** Job script pids a test learnt of; killed (with their groups) if a failed test left them running. */
const orphanPids = new Set<number>();

afterEach(async () => {
  await Promise.all(
    [...sims].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
  sims.clear();
  for (const pid of orphanPids) {
    try {
      // Job scripts lead their own process group: take their children with them.
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Already gone, as it should be.
    }
  }
  orphanPids.clear();
  if (root) rmSync(root, { recursive: true, force: true });
  root = undefined;
});

interface Dirs {
  stateDir: string;
  workDir: string;
  tokensFile: string;
}

function makeDirs(): Dirs {
  root = mkdtempSync(join(tmpdir(), 'schedflow-sim-crash-'));
  const stateDir = join(root, 'state');
  const workDir = join(root, 'work');
  mkdirSync(workDir);
  giveToJobUser(workDir, [root]);
  const tokensFile = join(root, 'tokens.json');
  const tokens = {
    [ALICE_TOKEN]: { user: 'alice', account: 'lab', scopes: ['sched:read', 'scheddb:read', 'sched:jobs:manage'] },
  };
  // The simulator refuses a tokens file other users can read.
  writeFileSync(tokensFile, JSON.stringify(tokens), { mode: 0o600 });
  return { stateDir, workDir, tokensFile };
}

/** `schedflow sim` on a free port; resolves with its URL once it logs that it listens. */
async function spawnSim(dirs: Dirs, host = '127.0.0.1'): Promise<SimProcess> {
  // The run's build, as the other process tests start schedflow (test/helpers/cli-build.ts): through
  // tsx each start cost twice the CPU, and sched-cli.test.ts proves the entry point under tsx.
  const args = [...schedflowEntry(), 'sim', '--host', host, '--port', '0', '--tokens', dirs.tokensFile];
  args.push('--state-dir', dirs.stateDir, '--cpus', '2', '--cache-ttl', '2', '--kill-wait', '1');
  const child = spawn(process.execPath, args, { cwd: REPO, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  sims.add(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stdout = '';
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`schedflow sim did not listen in time\n${stdout}\n${stderr}`)),
      20_000,
    );
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      // Logs are JSON lines when stdout is not a TTY.
      const match = /"url":"(http:\/\/[^"]+)"[^\n]*scheduler simulator listening/.exec(stdout);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`schedflow sim exited (code ${code}, signal ${signal}) before listening\n${stdout}\n${stderr}`));
    });
  });
  return { child, pid: child.pid as number, url, exited };
}

/** SIGKILL: the simulator gets no chance to save its table, release its lock or kill its jobs. */
async function crash(sim: SimProcess): Promise<void> {
  sim.child.kill('SIGKILL');
  await sim.exited;
}

async function submit(url: string, workDir: string, job: Json): Promise<number> {
  const res = await http(`${url}/sched/v0.0.44/job/submit`, {
    method: 'POST',
    headers: alice,
    body: { job: { current_working_directory: workDir, environment: ['PATH=/usr/bin:/bin'], ...job } },
  });
  expect(res.status, res.text).toBe(200);
  return (res.json as { job_id: number }).job_id;
}

async function waitForState(url: string, id: number, state: string): Promise<Json> {
  return waitFor(
    async () => {
      const res = await http(`${url}/sched/v0.0.44/job/${id}`, { headers: alice });
      const job = res.status === 200 ? (res.json as { jobs: Json[] }).jobs[0] : undefined;
      return (job?.job_state as string[] | undefined)?.[0] === state ? job : undefined;
    },
    { what: `job ${id} to reach ${state}`, intervalMs: 250, timeoutMs: 20_000 },
  );
}

/**
 * Alive and not a zombie. A killed orphan belongs to whichever process
 * adopted it; should that one be slow to reap, the corpse still answers
 * kill(pid, 0), so the state in /proc decides.
 */
function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

function readPid(file: string): Promise<number> {
  return waitFor(
    async () => {
      const pid = existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) : 0;
      return pid > 0 ? pid : undefined;
    },
    { what: `a pid in ${file}` },
  );
}

/** The pid the simulator saved for a job: only once it is on disk can a crash leave a findable orphan. */
function savedPid(stateDir: string, id: number): number | undefined {
  try {
    const state = JSON.parse(readFileSync(join(stateDir, 'jobs.json'), 'utf8')) as {
      jobs: { jobId: number; pid?: number }[];
    };
    return state.jobs.find((j) => j.jobId === id)?.pid;
  } catch {
    // Not written yet, or caught between the temporary file and the rename.
    return undefined;
  }
}

describe('a simulator killed with SIGKILL', () => {
  it('restarts on the same state dir: the running job is NODE_FAIL, its orphaned script is killed, ids continue, new jobs run', async () => {
    const dirs = makeDirs();
    const first = await spawnSim(dirs);
    const done = await submit(first.url, dirs.workDir, { name: 'before-crash', script: '#!/bin/sh\ntrue\n' });
    await waitForState(first.url, done, 'COMPLETED');

    const scriptPidFile = join(dirs.workDir, 'script.pid');
    const childPidFile = join(dirs.workDir, 'child.pid');
    // A child in the script's group, as a real job has; then the script becomes another program
    // (exec), so its command line no longer names the script: the restart must still know it.
    const running = await submit(first.url, dirs.workDir, {
      name: 'orphaned',
      script: `#!/bin/sh\necho $$ > ${scriptPidFile}\nsleep 60 &\necho $! > ${childPidFile}\nexec sleep 61\n`,
    });
    await waitForState(first.url, running, 'RUNNING');
    const scriptPid = await readPid(scriptPidFile);
    const childPid = await readPid(childPidFile);
    orphanPids.add(scriptPid);
    orphanPids.add(childPid);
    // The table is saved shortly after each change; crash only once the script's pid is on disk.
    await waitFor(async () => (savedPid(dirs.stateDir, running) === scriptPid ? true : undefined), {
      what: `the state file to record pid ${scriptPid} for job ${running}`,
    });

    await crash(first);
    expect(pidAlive(scriptPid), 'the job script outlives the simulator').toBe(true);
    expect(pidAlive(childPid), "the job script's child outlives the simulator").toBe(true);
    // The dead simulator's lock is still there: the next one must see that its holder is gone.
    expect(readFileSync(join(dirs.stateDir, 'sim.pid'), 'utf8')).toBe(String(first.pid));

    const second = await spawnSim(dirs);
    expect(readFileSync(join(dirs.stateDir, 'sim.pid'), 'utf8')).toBe(String(second.pid));
    await waitFor(async () => (pidAlive(scriptPid) || pidAlive(childPid) ? undefined : true), {
      what: 'the orphaned job script and its child to be killed',
      timeoutMs: 5_000,
    });

    const failed = await waitForState(second.url, running, 'NODE_FAIL');
    expect(failed.state_reason).toBe('NodeDown');
    expect(failed.end_time).toMatchObject({ set: true });
    const record = await http(`${second.url}/scheddb/v0.0.44/job/${running}`, { headers: alice });
    expect(record.status).toBe(200);
    // slurmdbd keeps the reason a job waited for before it started (None), not why it ended.
    expect((record.json as { jobs: Json[] }).jobs[0]?.state).toEqual({ current: ['NODE_FAIL'], reason: 'None' });
    // A job that had already finished keeps its state.
    expect((await waitForState(second.url, done, 'COMPLETED')).exit_code).toMatchObject({ return_code: { number: 0 } });

    const next = await submit(second.url, dirs.workDir, { name: 'after-crash', script: '#!/bin/sh\necho fine\n' });
    expect(next).toBeGreaterThan(running);
    await waitForState(second.url, next, 'COMPLETED');
    expect(readFileSync(join(dirs.workDir, `slurm-${next}.out`), 'utf8')).toBe('fine\n');

    second.child.kill('SIGTERM');
    await second.exited;
    expect(second.child.exitCode).toBe(143);
    expect(existsSync(join(dirs.stateDir, 'sim.pid')), 'a clean stop releases the lock').toBe(false);
  }, 60_000);
});
