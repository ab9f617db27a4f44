import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.js';
import { createRequest, getRequest, transitionsOf } from '../../src/db/requests.js';
import { createLogger } from '../../src/logger.js';
import { pollProfile } from '../../src/requests/poller.js';
import { transition } from '../../src/requests/transition.js';
import { SchedClient } from '../../src/sched/client.js';
import { jobSpecSchema } from '../../src/sched/job-spec.js';
import { type FlakyProxy, startFlakyProxy } from '../helpers/flaky-proxy.js';
import { jobWorkDir, realSlurm, script, slurmrestdProfile } from './cluster.js';

/**
 * Issue 14 on a real slurmrestd 25.11.7: with more tracked jobs than one query names, the poller
 * asks `jobs/state` and accounting in chunks of repeated `job_id=` / `step=` that fill a URL
 * (~6 KB with 8-digit ids), and slurmrestd answers them; the ends are recorded with accounting's
 * exit codes while 700 jobs it has never heard of take their turns beside them.
 */

const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'schedflow-slurm-chunks-'));
const history = openDatabase(join(dir, 'history.sqlite'));
let proxy: FlakyProxy;
let client: SchedClient;

beforeAll(async () => {
  proxy = await startFlakyProxy(realSlurm().url);
  const { profile } = slurmrestdProfile(join(dir, 'alice'), {
    url: proxy.url,
    // One accounting chunk a cycle: the two real jobs wait their turn behind the others.
    extra: { rateLimit: { capacity: 2, refillPerSecond: 20 } },
  });
  client = await SchedClient.connect(profile, { logger });
});

afterAll(async () => {
  await client?.close();
  await proxy?.close();
  history.close();
  rmSync(dir, { recursive: true, force: true });
});

it('700 unknown jobs and 2 real ones: every request names its jobs in URLs slurmrestd accepts, and both ends are recorded', async () => {
  const { store } = history;
  const now = Date.now();
  // Job ids slurmctld has never given (its MaxJobId is 67,108,863; the test cluster is far below).
  for (let i = 0; i < 700; i++) {
    const id = `phantom-${i}`;
    const at = now - 3_600_000;
    await createRequest(store, {
      id,
      profile: 'real-alice',
      name: 'sf-chunks',
      spec: {},
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at,
      source: 'api',
    });
    await transition(store, id, {
      to: 'submitted',
      source: 'submit',
      at,
      patch: { jobId: 60_000_000 + i, submittedAt: at },
    });
  }
  const real: Record<'ok' | 'failed', string> = { ok: `chunks-ok-${now}`, failed: `chunks-failed-${now}` };
  for (const [kind, id] of Object.entries(real)) {
    const spec = jobSpecSchema.parse({
      name: 'sf-chunks',
      script: script(kind === 'ok' ? 'sleep 1' : 'exit 3'),
      current_working_directory: jobWorkDir(),
      time_limit: 5,
    });
    await createRequest(store, {
      id,
      profile: 'real-alice',
      name: 'sf-chunks',
      spec,
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at: Date.now(),
      source: 'api',
    });
    const { job_id } = await client.submit(spec, id);
    await transition(store, id, {
      to: 'submitted',
      source: 'submit',
      at: Date.now(),
      patch: { jobId: job_id, submittedAt: Date.now() },
    });
  }

  const ended = async () =>
    ['completed', 'failed'].includes((await getRequest(store, real.ok))?.state ?? '') &&
    (await getRequest(store, real.failed))?.state === 'failed';
  const deadline = Date.now() + 150_000;
  const before = proxy.requests.length;
  while (!(await ended()) && Date.now() < deadline) {
    await pollProfile({ store, client, logger, settings: { lostGraceMs: 600_000 } }, 'real-alice');
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }

  expect(await getRequest(store, real.ok)).toMatchObject({ state: 'completed', exitCode: 0 });
  expect(await getRequest(store, real.failed)).toMatchObject({ state: 'failed', exitCode: 3 });
  for (const id of Object.values(real)) expect((await transitionsOf(store, id)).at(-1)?.source).toBe('accounting');
  expect((await getRequest(store, 'phantom-0'))?.missingSince).toEqual(expect.any(Number));

  const asked = proxy.requests.slice(before);
  const states = asked.filter((r) => r.url.startsWith('/slurm/v0.0.44/jobs/state'));
  const accounting = asked.filter((r) => r.url.startsWith('/slurmdb/v0.0.44/jobs'));
  expect(asked.length).toBe(states.length + accounting.length);
  const count = (url: string, name: string) => new URL(url, 'http://x').searchParams.getAll(name).length;
  for (const r of states) expect(count(r.url, 'job_id')).toBeGreaterThan(0);
  for (const r of accounting) expect(count(r.url, 'step')).toBeGreaterThan(0);
  // 702 ids, 700 of 8 digits: chunks of about 375 for jobs/state (16 bytes each), 428 for
  // accounting (14), each within the 6,000 bytes of parameters: URLs of about 6 KB.
  expect(Math.max(...states.map((r) => count(r.url, 'job_id')))).toBeGreaterThanOrEqual(375);
  expect(Math.max(...accounting.map((r) => count(r.url, 'step')))).toBeGreaterThanOrEqual(428);
  for (const r of asked) expect(Math.max(count(r.url, 'job_id'), count(r.url, 'step'))).toBeLessThanOrEqual(500);
  expect(Math.max(...asked.map((r) => r.url.length))).toBeGreaterThan(5900);
  expect(Math.max(...asked.map((r) => r.url.length))).toBeLessThan(6500);
}, 200_000);
