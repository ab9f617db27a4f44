import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, killLeftovers, runCli } from '../helpers/cli-process.js';
import { bearer, http } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { jobWorkDir, slurmrestdProfile } from './cluster.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

/**
 * Two owners sharing one daemon on the real cluster (issue 33): lab A's token is bound to the
 * profile of Slurm user alice (account lab), lab B's to bob's (account other). Each submits,
 * reads and cancels its own jobs only; the other's ids answer as unknown ones do; a request to
 * the other's profile is refused at the door; the audit log holds every action.
 */

let redis: TestRedis;
let d: RealDaemon;
const tokens: Record<'a' | 'b', string> = { a: '', b: '' };
/** Requests made, cancelled at the end whatever happened: a job left running holds the cluster's one node. */
const made: string[] = [];

async function makeToken(name: string, owner: string, profile: string): Promise<string> {
  const made = await runCli(
    [
      'tokens',
      'create',
      '--name',
      name,
      '--owner',
      owner,
      '--scopes',
      'read,submit,cancel',
      '--profiles',
      profile,
      '--data-dir',
      d.dataDir,
    ],
    { env: cleanEnv({}), cwd: d.root },
  );
  if (made.code !== 0) throw new Error(`tokens create failed: ${made.stderr}`);
  return made.stdout.trim();
}

const as = (who: 'a' | 'b', method: string, path: string, body?: unknown) =>
  http(`${d.apiUrl}${path}`, { method, body, headers: bearer(tokens[who]) });

beforeAll(async () => {
  redis = await startTestRedis();
  const bob = slurmrestdProfile(mkdtempSync(join(tmpdir(), 'schedflow-bob-')), { user: 'bob' }).input;
  d = await startRealDaemon(redis, { profiles: { bob: () => ({ auth: bob.auth, account: bob.account }) } });
  tokens.a = await makeToken('lims-a', 'lab-a', 'real');
  tokens.b = await makeToken('lims-b', 'lab-b', 'bob');
}, 120_000);

afterAll(async () => {
  for (const id of made) await d?.api('DELETE', `/api/v1/jobs/${id}`);
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

const sleeper = (name: string) =>
  realSpec(name, 'sleep 300', { current_working_directory: jobWorkDir(), time_limit: 5 });

describe('two owners on real Slurm', () => {
  it('submit, read and cancel only their own; the other profile is refused; the audit log has it all', async () => {
    const submit = async (who: 'a' | 'b', profile: string, name: string) =>
      as(who, 'POST', '/api/v1/jobs', { profile, spec: sleeper(name) });

    // The door: a profile the token is not bound to is refused before anything is recorded.
    const wrong = await submit('a', 'bob', 'owners-a-wrong');
    expect(wrong.status, JSON.stringify(wrong.json)).toBeGreaterThanOrEqual(400);
    expect(JSON.stringify(wrong.json)).toMatch(/SCHEDFLOW_ERR_/);
    expect(JSON.stringify(wrong.json)).toContain('real');

    const a = await submit('a', 'real', 'owners-a');
    const b = await submit('b', 'bob', 'owners-b');
    expect([a.status, b.status]).toEqual([201, 201]);
    const idA = (a.json as { id: string }).id;
    const idB = (b.json as { id: string }).id;
    made.push(idA, idB);
    const running = async (id: string) => {
      const view = await d.waitForState(id, 'running', 120_000);
      return view;
    };
    const [viewA, viewB] = await Promise.all([running(idA), running(idB)]);
    // Each ran as its own Slurm user, charged to its own account.
    expect(viewA).toMatchObject({ owner: 'lab-a' });
    expect(viewB).toMatchObject({ owner: 'lab-b' });

    // Lists hold only one's own.
    const listA = (await as('a', 'GET', '/api/v1/jobs')).json as { items: { id: string }[] };
    const listB = (await as('b', 'GET', '/api/v1/jobs')).json as { items: { id: string }[] };
    expect(listA.items.map((j) => j.id)).toEqual([idA]);
    expect(listB.items.map((j) => j.id)).toEqual([idB]);

    // Another owner's id answers as an unknown one: read, output, cancel.
    const unknown = '00000000-0000-4000-8000-000000000000';
    for (const [method, path] of [
      ['GET', '/api/v1/jobs/ID'],
      ['GET', '/api/v1/jobs/ID/output'],
      ['DELETE', '/api/v1/jobs/ID'],
    ] as const) {
      const theirs = await as('a', method, path.replace('ID', idB));
      const none = await as('a', method, path.replace('ID', unknown));
      expect(theirs.status, `${method} ${path}`).toBe(none.status);
      expect(JSON.stringify(theirs.json).replaceAll(idB, 'X')).toBe(JSON.stringify(none.json).replaceAll(unknown, 'X'));
    }
    // B's job was not cancelled by A's attempt.
    expect((await d.job(idB)).state).toBe('running');

    // Each cancels its own, and Slurm cancels the job.
    expect((await as('a', 'DELETE', `/api/v1/jobs/${idA}`)).status).toBeLessThan(300);
    expect((await as('b', 'DELETE', `/api/v1/jobs/${idB}`)).status).toBeLessThan(300);
    const [endA, endB] = await Promise.all([
      d.waitForState(idA, 'cancelled', 60_000),
      d.waitForState(idB, 'cancelled', 60_000),
    ]);
    expect(endA.raw_state).toMatch(/CANCELLED/);
    expect(endB.raw_state).toMatch(/CANCELLED/);

    // The audit log: both tokens made, both requests accepted and cancelled, the refusal.
    const audit = await runCli(['audit', '--json', '--data-dir', d.dataDir], { env: cleanEnv({}), cwd: d.root });
    expect(audit.code, audit.stderr).toBe(0);
    const rows = JSON.parse(audit.stdout) as {
      action: string;
      actor: string;
      owner: string | null;
      target: string | null;
      outcome: string;
    }[];
    const has = (action: string, actor: string, target: string | null, outcome = 'ok') =>
      expect(rows, `${action} ${actor} ${target} ${outcome}`).toContainEqual(
        expect.objectContaining({ action, actor, outcome, ...(target && { target }) }),
      );
    has('token.create', expect.stringMatching(/^cli:/) as unknown as string, 'token:lims-a');
    has('token.create', expect.stringMatching(/^cli:/) as unknown as string, 'token:lims-b');
    has('request.accept', 'token:lims-a', `request:${idA}`);
    has('request.accept', 'token:lims-b', `request:${idB}`);
    has('request.cancel', 'token:lims-a', `request:${idA}`);
    has('request.cancel', 'token:lims-b', `request:${idB}`);
    expect(rows.some((r) => r.actor === 'token:lims-a' && r.outcome === 'refused')).toBe(true);
    // A's failed attempt on B's job left no ok row.
    expect(
      rows.filter((r) => r.action === 'request.cancel' && r.target === `request:${idB}` && r.outcome === 'ok'),
    ).toHaveLength(1);
  }, 300_000);
});
