import { existsSync, lchownSync, mkdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { getAccountingJob } from '../../../src/db/accounting.js';
import { getRequest } from '../../../src/db/requests.js';
import { readJobOutput } from '../../../src/requests/job-output.js';
import { defaultWorkDir } from '../../../src/sim/cluster.js';
import { jobEfficiency, jobFacts } from '../../../src/summaries/facts.js';
import { apiClient, errorOf } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, type TestDaemon } from '../../helpers/daemon.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN, giveToJobUser, type TestSim } from '../../helpers/sim.js';

/** Outputs you can read: paths in the history, the output route and command, the simulator's own defaults. */

const env = daemonTestEnv();

interface Detail {
  job_id: number;
  output: { stdout: string | null; stderr: string | null; links: { stdout: string; stderr: string } };
}

async function setup(): Promise<{ sim: TestSim; td: TestDaemon; call: (path: string) => ReturnType<typeof http> }> {
  const sim = await env.sim();
  const td = await env.daemon(sim.url);
  const api = apiClient(td);
  const token = await api.token(['read', 'submit']);
  return { sim, td, call: (path) => api.call('GET', path, { token }) };
}

async function submit(td: TestDaemon, spec: Record<string, unknown>): Promise<string> {
  const api = apiClient(td);
  const res = await api.call('POST', '/api/v1/jobs', { token: await api.token(['submit']), body: { spec } });
  expect(res.status, res.text).toBe(201);
  return (res.json as { id: string }).id;
}

describe('a job whose output the daemon can read', () => {
  it('has its expanded paths stored and shown, and its tail read through the API and the CLI', async () => {
    const { sim, td, call } = await setup();
    // Slurm opens the stderr file in a folder that must exist already, as the job's user.
    mkdirSync(join(sim.workDir, 'err'), { recursive: true });
    giveToJobUser(join(sim.workDir, 'err'));
    const id = await submit(td, {
      name: 'outputs',
      current_working_directory: sim.workDir,
      standard_output: '%x-%j.out',
      standard_error: 'err/%x-%4j.err',
      environment: ['PATH=/usr/bin:/bin', 'API_SECRET=hunter2-very-secret'],
      script: '#!/bin/sh\nfor i in 1 2 3 4 5; do echo "line $i"; done\necho "to stderr" >&2\necho "key $API_SECRET"\n',
    });
    const row = await td.waitForState(id, 'completed');
    const jobId = row.jobId as number;
    const stdout = `${sim.workDir}/outputs-${jobId}.out`;
    const stderr = `${sim.workDir}/err/outputs-${String(jobId).padStart(4, '0')}.err`;

    const detail = (await call(`/api/v1/jobs/${id}`)).json as Detail;
    expect(detail.output).toEqual({
      stdout,
      stderr,
      links: { stdout: `/api/v1/jobs/${id}/output`, stderr: `/api/v1/jobs/${id}/output?stream=stderr` },
    });

    const tail = await call(`/api/v1/jobs/${id}/output?tail=2`);
    expect(tail.status, tail.text).toBe(200);
    expect(tail.json).toMatchObject({
      id,
      job_id: jobId,
      stream: 'stdout',
      path: stdout,
      host: hostname(),
      same_file: false,
      lines: 2,
      truncated: true,
      // The job's own environment values are masked, as on the UI.
      text: 'line 5\nkey [redacted:API_SECRET]\n',
    });
    expect(readFileSync(stdout, 'utf8')).toContain('hunter2-very-secret');

    const err = await call(`/api/v1/jobs/${id}/output?stream=stderr`);
    expect(err.json).toMatchObject({ stream: 'stderr', path: stderr, text: 'to stderr\n', truncated: false });

    const bad = await call(`/api/v1/jobs/${id}/output?stream=both&tail=0`);
    expect(bad.status).toBe(400);
    expect(
      errorOf(bad)
        .fields?.map((f) => f.path)
        .sort(),
    ).toEqual(['stream', 'tail']);

    // The commands at once: each is a process of its own, which takes seconds to start.
    const [shown, out] = await Promise.all([
      runCli(['jobs', 'show', id, '--data-dir', td.dataDir]),
      runCli(['jobs', 'output', id, '--tail', '3', '--data-dir', td.dataDir]),
    ]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`stdout    ${stdout}`);
    expect(shown.stdout).toContain(`stderr    ${stderr}`);
    expect(out.code, out.stderr).toBe(0);
    // The command is the daemon's user reading its host's files: nothing masked.
    expect(out.stdout).toBe('line 4\nline 5\nkey hunter2-very-secret\n');
  });

  it("says stderr goes to the stdout file when the spec names none, under Slurm's default name", async () => {
    const { sim, td, call } = await setup();
    const id = await submit(td, {
      name: 'defaults',
      current_working_directory: sim.workDir,
      script: '#!/bin/sh\necho out\necho err >&2\n',
    });
    const row = await td.waitForState(id, 'completed');
    const path = `${sim.workDir}/slurm-${row.jobId}.out`;
    expect(await getRequest(td.daemon.history.store, id)).toMatchObject({ stdoutPath: path, stderrPath: path });
    const err = await call(`/api/v1/jobs/${id}/output?stream=stderr`);
    expect(err.json).toMatchObject({ path, same_file: true, text: 'out\nerr\n' });
    const cli = await runCli(['jobs', 'output', id, '--stderr', '--data-dir', td.dataDir]);
    expect(cli.stdout).toBe('out\nerr\n');
    expect(cli.stderr).toContain('stderr goes to the stdout file');
  });
});

describe('a job whose output the daemon cannot read', () => {
  it('is not written yet while the job waits to start (409, Retry-After)', async () => {
    const { sim, td, call } = await setup();
    // The simulator has 2 CPUs: the first job holds them, the second waits.
    const holder = await submit(td, {
      name: 'holder',
      current_working_directory: sim.workDir,
      cpus_per_task: 2,
      script: '#!/bin/sh\nsleep 30\n',
    });
    await td.waitForState(holder, 'running');
    const waiting = await submit(td, {
      name: 'waiting',
      current_working_directory: sim.workDir,
      script: '#!/bin/sh\necho hi\n',
    });
    await td.waitForState(waiting, 'pending');
    const res = await call(`/api/v1/jobs/${waiting}/output`);
    expect(res.status, res.text).toBe(409);
    expect(res.headers.get('retry-after')).toBe('10');
    const row = await getRequest(td.daemon.history.store, waiting);
    expect(errorOf(res)).toMatchObject({
      code: 'SCHEDFLOW_ERR_OUTPUT_NOT_YET',
      output: {
        stream: 'stdout',
        path: `${sim.workDir}/slurm-${row?.jobId}.out`,
        host: hostname(),
        reason: 'not_started',
      },
    });
    const cli = await runCli(['jobs', 'output', waiting, '--data-dir', td.dataDir]);
    // Not yet: may succeed later, so the "unavailable" exit code.
    expect(cli.code).toBe(4);
    expect(cli.stderr).toContain('has not started');
    const api = apiClient(td);
    await api.call('DELETE', `/api/v1/jobs/${holder}`, { token: await api.token(['cancel']) });
  });

  it('says which path it tried on which host when the file is not there (only on the node, or removed)', async () => {
    const { sim, td, call } = await setup();
    const id = await submit(td, {
      name: 'elsewhere',
      current_working_directory: sim.workDir,
      standard_output: 'gone-%j.out',
      // As if the file were on a compute node's local disk: it is not on the daemon's host.
      script: '#!/bin/sh\necho bye\nrm -f "gone-$SLURM_JOB_ID.out"\n',
    });
    const row = await td.waitForState(id, 'completed');
    const path = `${sim.workDir}/gone-${row.jobId}.out`;
    const res = await call(`/api/v1/jobs/${id}/output`);
    expect(res.status, res.text).toBe(404);
    const error = errorOf(res) as ReturnType<typeof errorOf> & { output: unknown };
    expect(error).toMatchObject({
      code: 'SCHEDFLOW_ERR_OUTPUT_NOT_FOUND',
      output: { path, host: hostname(), reason: 'not_on_this_host' },
    });
    expect(error.message).toContain(`tried ${path} on ${hostname()}`);
    await waitFor(async () => getAccountingJob(td.daemon.history.store, row.profile, row.jobId as number), {
      what: 'the accounting record',
    });
    const again = errorOf(await call(`/api/v1/jobs/${id}/output`));
    expect(again.message).toContain('it ran on sim-node1');
  });

  it("is not read inside schedflow's own folders (403)", async () => {
    const { td, call } = await setup();
    // A simulator run as root runs the job as a user who cannot write in the data dir at all
    // (the job fails); the file is put there as a job run as the daemon's own user would.
    writeFileSync(join(td.dataDir, 'peek.out'), 'inside\n');
    const id = await submit(td, {
      name: 'sneaky',
      current_working_directory: td.dataDir,
      standard_output: 'peek.out',
      script: '#!/bin/sh\necho inside\n',
    });
    await td.waitForState(id, process.getuid?.() === 0 ? 'failed' : 'completed');
    const res = await call(`/api/v1/jobs/${id}/output`);
    expect(res.status, res.text).toBe(403);
    expect(errorOf(res)).toMatchObject({ code: 'SCHEDFLOW_ERR_OUTPUT_UNREADABLE', output: { reason: 'protected' } });
  });

  it('does not follow a link the job put where its output was, for a read-only token nor in the summary (403)', async () => {
    const { sim, td } = await setup();
    const api = apiClient(td);
    const id = await submit(td, {
      name: 'planted',
      current_working_directory: sim.workDir,
      script: '#!/bin/sh\necho honest output\n',
    });
    const row = await td.waitForState(id, 'completed');
    const out = `${sim.workDir}/slurm-${row.jobId}.out`;
    // The job's side (issue 30): its output replaced by a link to a root-only file of the host.
    const secret = join(sim.workDir, 'root-only');
    writeFileSync(secret, 'ROOT ONLY SECRET\n', { mode: 0o600 });
    rmSync(out);
    symlinkSync(secret, out);
    // The job's link, not root's (root's are an admin's, and followed).
    if (process.getuid?.() === 0) lchownSync(out, 65534, 65534);
    const res = await api.call('GET', `/api/v1/jobs/${id}/output`, { token: await api.token(['read']) });
    expect(res.status, res.text).toBe(403);
    expect(res.text).not.toContain('ROOT ONLY SECRET');
    expect(errorOf(res)).toMatchObject({
      code: 'SCHEDFLOW_ERR_OUTPUT_UNREADABLE',
      output: { path: out, reason: 'symlink' },
    });
    const facts = jobFacts((await getRequest(td.daemon.history.store, id)) ?? row, undefined, {
      scriptHeadLines: 0,
      outputTailBytes: 4096,
      protectedDirs: [td.dataDir],
    });
    expect(facts.outputs).toEqual([
      {
        label: 'output',
        path: out,
        text: null,
        sizeBytes: null,
        note: 'reached through a symbolic link: not followed',
      },
    ]);
  });

  it("reads only a file of the job's user, where the host knows that user", async () => {
    const { sim, td } = await setup();
    const id = await submit(td, {
      name: 'whose',
      current_working_directory: sim.workDir,
      script: '#!/bin/sh\necho mine\n',
    });
    const row = await td.waitForState(id, 'completed');
    const acct = await waitFor(
      async () => getAccountingJob(td.daemon.history.store, row.profile, row.jobId as number),
      {
        what: 'the accounting record',
      },
    );
    const options = { tailLines: 10, maxBytes: 1 << 20, protectedDirs: [td.dataDir] };
    // The simulator's user (alice) is no user of this host: the owner cannot be told, the file is read.
    expect(await readJobOutput(row, acct, 'stdout', options)).toMatchObject({ kind: 'ok', text: 'mine\n' });
    // Had the job run as `nobody`, this file (of the user the simulator ran the job as) is not its output.
    const owner = statSync(`${sim.workDir}/slurm-${row.jobId}.out`).uid;
    const other = await readJobOutput(row, { ...acct, user: 'nobody' }, 'stdout', options);
    expect(other).toMatchObject({ kind: 'unavailable', code: 'SCHEDFLOW_ERR_OUTPUT_UNREADABLE', reason: 'not_owner' });
    expect(other.kind === 'unavailable' && other.message).toContain(
      `belongs to uid ${owner}, not to the job's user nobody`,
    );
  });

  it.skipIf(process.getuid?.() === 0)('says so when the daemon may not read the file (403)', async () => {
    const { sim, td, call } = await setup();
    const id = await submit(td, {
      name: 'private',
      current_working_directory: sim.workDir,
      script: '#!/bin/sh\necho secret\nchmod 000 "slurm-$SLURM_JOB_ID.out"\n',
    });
    await td.waitForState(id, 'completed');
    const res = await call(`/api/v1/jobs/${id}/output`);
    expect(res.status, res.text).toBe(403);
    expect(errorOf(res)).toMatchObject({
      code: 'SCHEDFLOW_ERR_OUTPUT_UNREADABLE',
      output: { reason: 'no_permission' },
    });
  });

  it('answers 404 for a request it does not know', async () => {
    const { call } = await setup();
    const res = await call('/api/v1/jobs/no-such-request/output');
    expect(res.status).toBe(404);
    expect(errorOf(res).code).toBe('SCHEDFLOW_ERR_NOT_FOUND');
  });
});

describe('the simulator', () => {
  it('gives jobs without a working directory a folder of its own: two simulators never share slurm-1000.out', async () => {
    const sims = [await env.sim({ workDir: undefined }), await env.sim({ workDir: undefined })];
    const dirs = sims.map((s) => defaultWorkDir(s.stateDir));
    env.defer(async () => {
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });
    expect(dirs[0]).not.toBe(dirs[1]);
    const ids: number[] = [];
    for (const [i, s] of sims.entries()) {
      const res = await http(`${s.url}/sched/v0.0.44/job/submit`, {
        method: 'POST',
        headers: bearer(ALICE_TOKEN),
        body: {
          job: { name: `sim${i}`, environment: ['PATH=/usr/bin:/bin'], script: `#!/bin/sh\necho "from sim ${i}"\n` },
        },
      });
      expect(res.status, res.text).toBe(200);
      ids.push((res.json as { job_id: number }).job_id);
    }
    // Both simulators number their jobs from the same first id.
    expect(ids[0]).toBe(ids[1]);
    for (const [i, dir] of dirs.entries()) {
      const file = join(dir, `slurm-${ids[i]}.out`);
      await waitFor(async () => (existsSync(file) && readFileSync(file, 'utf8') === `from sim ${i}\n`) || undefined, {
        what: `${file} written by simulator ${i}`,
      });
    }
  });

  it('reports CPU time in accounting, so efficiency is known', async () => {
    const { sim, td, call } = await setup();
    const id = await submit(td, {
      name: 'busy',
      current_working_directory: sim.workDir,
      // About 1.5 s of CPU: the simulator samples usage once a second.
      script: '#!/bin/sh\nend=$(($(date +%s) + 2))\nwhile [ "$(date +%s)" -lt "$end" ]; do :; done\n',
    });
    const row = await td.waitForState(id, 'completed');
    const acct = await waitFor(
      async () => {
        const a = await getAccountingJob(td.daemon.history.store, row.profile, row.jobId as number);
        return a?.state === 'COMPLETED' ? a : undefined;
      },
      { what: 'the accounting record of the end' },
    );
    // A lower bound (sampled), and a busy machine gives the loop little of the CPU: measured, not 0.
    expect(acct.cpuTimeSec).toBeGreaterThan(0);
    const history = await call(`/api/v1/history?limit=5`);
    const item = (
      history.json as { items: { job_id: number; accounting: { cpu_time_sec: number | null } }[] }
    ).items.find((i) => i.job_id === row.jobId);
    expect(item?.accounting.cpu_time_sec).toBe(acct.cpuTimeSec);
    const facts = jobFacts((await getRequest(td.daemon.history.store, id)) ?? row, acct, {
      scriptHeadLines: 5,
      outputTailBytes: 0,
    });
    expect(jobEfficiency(facts).cpu).toMatchObject({ known: true });
  });
});
