import { describe, expect, it } from 'vitest';
import { getRequest, transitionsOf } from '../../../src/db/requests.js';
import { createToken } from '../../../src/db/tokens.js';
import { shellSpec } from '../../helpers/api.js';
import { http, waitFor } from '../../helpers/http.js';
import { jobsWithMarker, logLines } from '../daemon-process/daemon-process-env.js';
import { twoHostsEnv } from './two-hosts-env.js';

/**
 * Jobs across two hosts (see two-hosts-env.ts): submitted through host a's API, run by host b's
 * worker; b killed mid-submit, and a worker on a taking over, with one Slurm job per request.
 */

const { unavailable, sharedHosts } = twoHostsEnv();

describe.skipIf(unavailable !== null)('two hosts sharing Redis and a PostgreSQL history on a third', () => {
  it("runs jobs submitted through a's API on b's worker; with b killed mid-submit, a's worker makes no second Slurm job", async () => {
    const { a, b, history, start, sim, proxy, databaseUrl, redis } = await sharedHosts();
    const web = start(a, 'a', 'web,scheduler', ['--listen', `${a.address}:8080`]);
    const worker = start(b, 'b', 'worker');
    await Promise.all([web.ready(), worker.ready()]);
    const { token } = await createToken(history(), { owner: 'default', name: 'lims', scopes: ['submit', 'read'] });
    const submit = async (name: string, body: string) => {
      const created = await http(`http://${a.address}:8080/api/v1/jobs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
        body: { spec: shellSpec(name, body, sim.workDir) },
      });
      expect(created.status, created.text).toBe(201);
      return (created.json as { id: string }).id;
    };
    const completed = (id: string) =>
      waitFor(
        async () => {
          const row = await getRequest(history(), id);
          return row?.state === 'completed' ? row : undefined;
        },
        { what: `request ${id} to complete`, timeoutMs: 60_000 },
      );

    const ids = [];
    for (let i = 0; i < 4; i++) ids.push(await submit(`across-${i}`, 'true'));
    for (const id of ids) await completed(id);
    // Host a runs no worker: b submitted and followed them all.
    const submittedBy = (out: string) =>
      new Set(
        logLines(out)
          .filter((l) => l.msg === 'job submitted')
          .map((l) => l.requestId),
      );
    expect([...submittedBy(worker.stdout)].sort()).toEqual([...ids].sort());
    expect(submittedBy(web.stdout).size).toBe(0);

    // b is killed after the cluster accepted a submission, before its answer came back.
    const reached = proxy.holdAnswerOnce((r) => r.method === 'POST' && r.url.endsWith('/job/submit'));
    const held = await submit('across-held', 'sleep 1');
    await reached;
    expect((await getRequest(history(), held))?.state).toBe('submitting');
    worker.child.kill('SIGKILL');
    expect(await worker.exited).toMatchObject({ signal: 'SIGKILL' });
    proxy.release();
    const [accepted] = (await jobsWithMarker(sim, held)).controller;
    expect(accepted).toEqual(expect.any(Number));
    // A second worker, on host a, takes the submission up once b's claim on it has lapsed.
    const takeover = start(a, 'a-worker', 'worker');
    await takeover.ready();
    const row = await completed(held);
    expect(row).toMatchObject({ jobId: accepted, adopted: true });
    expect((await transitionsOf(history(), held)).filter((t) => t.toState === 'submitted')).toHaveLength(1);
    expect(await jobsWithMarker(sim, held)).toEqual({ controller: [accepted], accounting: [accepted] });
    for (const id of ids) expect((await jobsWithMarker(sim, id)).controller).toHaveLength(1);
    // One POST for each request, in all.
    expect(proxy.requests.filter((r) => r.method === 'POST' && r.url.endsWith('/job/submit'))).toHaveLength(5);

    // The shared services' passwords are in REDIS_URL and DATABASE_URL: in no log.
    const secrets = [new URL(redis.url).password, new URL(databaseUrl).password];
    for (const secret of secrets) expect(secret).not.toBe('');
    for (const p of [web, worker, takeover]) {
      for (const secret of secrets) expect(p.stdout + p.stderr).not.toContain(secret);
    }
  }, 150_000);
});
