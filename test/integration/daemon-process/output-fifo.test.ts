import { chmodSync, closeSync, constants, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanEnv, runCli, spawnDaemon } from '../../helpers/cli-process.js';
import { checkedFetch } from '../../helpers/openapi-check.js';
import { startTestRedis } from '../../helpers/redis.js';
import { daemonProcessEnv, SHUTDOWN_GRACE_MS } from './daemon-process-env.js';

/**
 * Issue 30, point 1, as it was found: on the embedded default (`npm start`), a job replaces its
 * output file with a FIFO. The daemon used to open it to read its tail, for the summary nobody
 * asked for, and block there for good: API, workers and simulator with it. It is a separate
 * process here, so a daemon that blocks fails this test instead of freezing the test's worker.
 */

const dproc = daemonProcessEnv();

/** How long an answer may take: the daemon answers in milliseconds; seconds for a loaded machine. */
const ANSWER_MS = 5_000;

/** A GET that gives up after ANSWER_MS, saying the daemon did not answer. */
async function get(url: string, token?: string): Promise<{ status: number; json: unknown }> {
  let response: Response;
  try {
    response = await checkedFetch(url, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(ANSWER_MS),
    });
  } catch (error) {
    throw new Error(`the daemon did not answer GET ${url} within ${ANSWER_MS} ms`, { cause: error });
  }
  return { status: response.status, json: await response.json() };
}

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('a job that replaces its output with a FIFO, on the embedded default', () => {
  it('leaves the daemon answering: /healthz, the output route (a refusal), and its summary written', async () => {
    const root = dproc.newRoot();
    const dataDir = join(root, 'data');
    const configDir = join(root, 'config'); // no profiles: the embedded simulator, as `npm start`
    const workDir = join(root, 'work');
    mkdirSync(workDir);
    // Writable by whichever user the simulator runs jobs as (an unprivileged one under root).
    chmodSync(root, 0o755);
    chmodSync(workDir, 0o1777);
    dproc.redis = await startTestRedis();
    const env = cleanEnv({
      REDIS_URL: dproc.redis.url,
      SCHEDFLOW_SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS),
      SCHEDFLOW_SUMMARY_EVERY_MS: '200',
    });
    const made = await runCli(['tokens', 'create', '--name', 't', '--scopes', 'admin', '--data-dir', dataDir], {
      env,
      cwd: root,
    });
    expect(made.code, made.stderr).toBe(0);
    const token = made.stdout.trim();
    const daemon = spawnDaemon({ dataDir, configDir, env, cwd: root, extraArgs: ['--sim-port', '0'] });
    await daemon.ready(60_000);
    const apiUrl = /local API: (http:\/\/[^/\s]+)/.exec(daemon.stdout)?.[1];
    expect(apiUrl).toBeDefined();

    const submitted = await checkedFetch(`${apiUrl}/api/v1/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        spec: {
          name: 'fifo',
          current_working_directory: workDir,
          script: '#!/bin/sh\necho before\nout="slurm-$SLURM_JOB_ID.out"\nrm "$out"\nmkfifo "$out"\n',
        },
      }),
      signal: AbortSignal.timeout(ANSWER_MS),
    });
    const body = (await submitted.json()) as { id: string };
    expect(submitted.status, JSON.stringify(body)).toBe(201);

    // Ended, then summarized: the summarizer has read (or tried to read) the output by then.
    const job = await until('the job summarized', async () => {
      const res = await get(`${apiUrl}/api/v1/jobs/${body.id}`, token);
      const view = res.json as { state: string; job_id: number; summary: { state: string } | null };
      return view.summary && view.summary.state !== 'pending' ? view : undefined;
    });
    expect(job.state).toBe('completed');
    expect(job.summary?.state).toBe('ready');
    const fifo = join(workDir, `slurm-${job.job_id}.out`);

    expect((await get(`${apiUrl}/healthz`)).status).toBe(200);
    const output = await get(`${apiUrl}/api/v1/jobs/${body.id}/output`, token);
    expect(output.status).toBe(403);
    expect(output.json).toMatchObject({
      error: { code: 'SCHEDFLOW_ERR_OUTPUT_UNREADABLE', output: { path: fifo, reason: 'not_a_file' } },
    });
    // Nobody holds the FIFO open to read: the daemon never opened it.
    expect(() => closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK))).toThrow(/ENXIO/);
    expect((await daemon.stop('SIGTERM')).code).toBe(143);
  }, 120_000);
});
