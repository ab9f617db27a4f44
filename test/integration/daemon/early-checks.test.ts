import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listRequests } from '../../../src/db/requests.js';
import { apiClient, errorOf, shellSpec } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, startTestDaemon } from '../../helpers/daemon.js';
import { http, waitFor } from '../../helpers/http.js';
import { READONLY_TOKEN } from '../../helpers/sim.js';

/**
 * What a profile cannot take is said at start and refused at the door, not discovered by a
 * failed submit: a token without the scopes submitting needs (learnt from the simulator's
 * answers, or declared), and a job for another account than the token's.
 */

const env = daemonTestEnv();

describe('early checks of what a profile can take', () => {
  it('learns the scopes at start, says them in /readyz, and refuses at the door (API 422, CLI exit 2)', async () => {
    const sim = await env.sim();
    const td = await startTestDaemon(
      sim.url,
      env.redis.url,
      {},
      {},
      {
        'ro.yaml': [
          'schedule:',
          "  cron: '0 3 1 1 *'",
          'defaults:',
          '  profile: readonly',
          'steps:',
          '  only:',
          '    script: |',
          '      #!/bin/sh',
          '      true',
        ].join('\n'),
      },
      {
        // carol's token: sched:read only.
        readonly: { token: READONLY_TOKEN, account: 'lab' },
        // alice's token, said by the profile to lack the manage scope.
        declared: { account: 'lab', scopes: ['sched:read', 'scheddb:read'] },
      },
    );
    env.defer(() => td.stop());
    const { clients } = td.daemon;
    expect(clients.scopes('test')).toMatchObject({ source: 'probe', missing: [] });
    expect(clients.scopes('readonly')).toMatchObject({
      source: 'probe',
      scopes: { 'sched:read': 'granted', 'scheddb:read': 'missing', 'sched:jobs:manage': 'missing' },
      missing: ['sched:jobs:manage', 'scheddb:read'],
    });
    expect(clients.scopes('declared')).toMatchObject({ source: 'declared', missing: ['sched:jobs:manage'] });

    // Still ready: the other profiles work; what the token lacks is in the detail.
    const ready = await http(`${td.daemon.apiUrl}/readyz`);
    expect(ready.status).toBe(200);
    const detail = (ready.json as { detail: Record<string, string> }).detail;
    expect(detail['scopes:readonly']).toMatch(
      /^token lacks scheddb:read, sched:jobs:manage: submissions to this profile are refused/,
    );
    // A token with every scope is not a degradation: not in the detail.
    expect(detail['scopes:test']).toBeUndefined();

    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const spec = shellSpec('door', 'true', sim.workDir);
    const noScope = await api.call('POST', '/api/v1/jobs', { token, body: { profile: 'readonly', spec } });
    expect(noScope.status).toBe(422);
    expect(errorOf(noScope)).toMatchObject({ code: 'SCHEDFLOW_ERR_PROFILE_SCOPE_MISSING' });
    expect(errorOf(noScope).message).toMatch(
      /profile "readonly"'s token lacks scope sched:jobs:manage and scheddb:read/,
    );
    const otherAccount = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { profile: 'test', spec: { ...spec, account: 'other' } },
    });
    expect(otherAccount.status).toBe(422);
    expect(errorOf(otherAccount)).toMatchObject({ code: 'SCHEDFLOW_ERR_ACCOUNT_MISMATCH' });
    expect(errorOf(otherAccount).message).toMatch(
      /names account "other", but profile "test"'s token is bound to account "lab"/,
    );
    // Nothing recorded, nothing sent.
    expect(await listRequests(td.daemon.history.store, {})).toEqual([]);
    const fine = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { profile: 'test', spec: { ...spec, account: 'lab' } },
    });
    expect(fine.status).toBe(201);

    // A run of a pipeline on that profile: refused when asked for, recorded skipped when scheduled.
    const run = await api.call('POST', '/api/v1/pipelines/ro/runs', { token, body: {} });
    expect(run.status).toBe(422);
    expect(errorOf(run)).toMatchObject({ code: 'SCHEDFLOW_ERR_PROFILE_SCOPE_MISSING' });
    const tick = await td.daemon.pipelines.fire('ro', Date.now(), 'schedule');
    expect(tick).toMatchObject({
      state: 'skipped',
      detail: expect.stringMatching(/token lacks scope sched:jobs:manage/),
    });

    // The CLI, through the daemon's API: the same door.
    const file = join(sim.workDir, 'other-account.json');
    writeFileSync(file, JSON.stringify({ ...spec, account: 'other' }));
    const plain = join(sim.workDir, 'plain.json');
    writeFileSync(plain, JSON.stringify(spec));
    const [account, scopes] = await Promise.all([
      runCli(['jobs', 'submit', file, '--data-dir', td.dataDir], { timeoutMs: 60_000 }),
      runCli(['jobs', 'submit', plain, '--profile', 'readonly', '--data-dir', td.dataDir], { timeoutMs: 60_000 }),
    ]);
    expect(account.code).toBe(2);
    expect(account.stderr).toMatch(/bound to account "lab" and the scheduler would refuse it/);
    expect(scopes.code).toBe(2);
    expect(scopes.stderr).toMatch(/profile "readonly"'s token lacks scope sched:jobs:manage and scheddb:read/);
  }, 90_000);

  it('learns the scopes of a profile whose proxy was down at start, and refuses at its door from then on', async () => {
    const sim = await env.sim();
    await sim.server.stop();
    const td = await startTestDaemon(
      sim.url,
      env.redis.url,
      {},
      {},
      {},
      { readonly: { token: READONLY_TOKEN, account: 'lab' } },
    );
    env.defer(() => td.stop());
    // The door the API (and so the CLI, which asks it) decides from.
    const missing = () => td.daemon.clients.scopes('readonly')?.missing ?? [];
    // Not connected: nothing known, nothing refused yet.
    expect(td.daemon.clients.scopes('readonly')).toBeUndefined();
    expect(missing()).toEqual([]);

    await sim.restart();
    // Nobody asks the daemon: it connects by itself, and the CLI's door follows.
    await waitFor(async () => (missing().length ? true : undefined), {
      what: 'the daemon to know the missing scopes',
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    expect(missing()).toEqual(['sched:jobs:manage', 'scheddb:read']);
    const plain = join(sim.workDir, 'plain.json');
    writeFileSync(plain, JSON.stringify(shellSpec('door', 'true', sim.workDir)));
    const refused = await runCli(['jobs', 'submit', plain, '--profile', 'readonly', '--data-dir', td.dataDir], {
      timeoutMs: 60_000,
    });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/profile "readonly"'s token lacks scope sched:jobs:manage and scheddb:read/);
  }, 90_000);
});
