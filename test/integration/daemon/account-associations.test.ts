import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listRequests } from '../../../src/db/requests.js';
import { createToken } from '../../../src/db/tokens.js';
import { apiClient, errorOf, shellSpec } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { http, waitFor } from '../../helpers/http.js';
import { ALICE_TOKEN } from '../../helpers/sim.js';

/**
 * On plain slurmrestd the accounts a user may charge are Slurm's associations: schedflow reads
 * them from slurmdbd at start and refuses at the door a job (or a profile's default) naming an
 * account the user has none with, rather than a failed submit (Slurm's 2045). Associations it
 * cannot read refuse nothing, and are read again until they can be.
 */

const env = daemonTestEnv();

/** A plain-slurmrestd profile of alice (header pair), whose sim user has an association with `lab` only. */
function slurmrestdProfile(dir: string, account?: string): Record<string, unknown> & { token?: string } {
  const tokenFile = join(dir, 'alice.token');
  writeFileSync(tokenFile, ALICE_TOKEN, { mode: 0o600 });
  return {
    flavor: 'slurmrestd',
    auth: { type: 'header-pair', user: 'alice', tokenFile },
    ...(account && { account }),
  };
}

/** What the daemon knows of a profile's user and associations: the door its API (and so the CLI) decides from. */
const doorOf = (td: TestDaemon, profile: string) => ({ ...td.daemon.clients.accounts(profile) });

describe("the accounts of a plain-slurmrestd user's associations", () => {
  it('refuses at the door a job for an account the user has no association with (API 422, CLI exit 2, pipeline runs)', async () => {
    const sim = await env.sim();
    const td = await startTestDaemon(
      sim.url,
      env.redis.url,
      {},
      {},
      {
        'physics.yaml': [
          'defaults:',
          '  profile: srd',
          'steps:',
          '  only:',
          '    account: physics',
          '    script: |',
          '      #!/bin/sh',
          '      true',
        ].join('\n'),
      },
      { srd: slurmrestdProfile(sim.workDir, 'lab'), 'srd-other': slurmrestdProfile(sim.workDir, 'other') },
    );
    env.defer(() => td.stop());
    const { clients } = td.daemon;
    expect(clients.accounts('srd')).toMatchObject({
      source: 'associations',
      user: 'alice',
      accounts: ['lab'],
      defaultNotAssociated: null,
    });
    expect(clients.accounts('srd-other')).toMatchObject({ accounts: ['lab'], defaultNotAssociated: 'other' });
    // The proxy's token is bound to its account instead: no associations there.
    expect(clients.accounts('test')).toBeUndefined();

    // A profile whose own account the user cannot charge is said, and the daemon stays ready.
    const ready = await http(`${td.daemon.apiUrl}/readyz`);
    expect(ready.status).toBe(200);
    const detail = (ready.json as { detail: Record<string, string> }).detail;
    expect(detail['accounts:srd-other']).toMatch(
      /^user alice has no association with the profile's account "other" \(only lab\): jobs that name no other are refused/,
    );
    expect(detail['accounts:srd']).toBeUndefined();

    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const spec = shellSpec('door', 'true', sim.workDir);
    const physics = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { profile: 'srd', spec: { ...spec, account: 'physics' } },
    });
    expect(physics.status).toBe(422);
    expect(errorOf(physics)).toMatchObject({ code: 'SCHEDFLOW_ERR_ACCOUNT_NOT_ASSOCIATED' });
    expect(errorOf(physics).message).toMatch(
      /the job names account "physics", but user alice has no association with it and Slurm would refuse the job \(2045\): use "lab"/,
    );
    const byDefault = await api.call('POST', '/api/v1/jobs', { token, body: { profile: 'srd-other', spec } });
    expect(byDefault.status).toBe(422);
    expect(errorOf(byDefault).message).toMatch(/profile "srd-other" charges by default account "other"/);
    // Nothing recorded, nothing sent.
    expect(await listRequests(td.daemon.history.store, {})).toEqual([]);

    const fine = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { profile: 'srd', spec: { ...spec, account: 'lab' } },
    });
    expect(fine.status).toBe(201);
    await td.waitForState((fine.json as { id: string }).id, 'completed');

    // A pipeline run with a step for such an account is refused when asked for.
    const run = await api.call('POST', '/api/v1/pipelines/physics/runs', { token, body: {} });
    expect(run.status).toBe(422);
    expect(errorOf(run)).toMatchObject({ code: 'SCHEDFLOW_ERR_ACCOUNT_NOT_ASSOCIATED' });

    // The Profiles page says it.
    const admin = (await createToken(td.daemon.history.store, { name: 'profiles-viewer', scopes: ['admin'] })).token;
    const nonce = 'login-nonce';
    const login = await fetch(`${td.daemon.apiUrl}/ui/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `schedflow_ui_login=${nonce}` },
      body: new URLSearchParams({ _login: nonce, token: admin, next: '/ui/profiles' }).toString(),
    });
    const session = login.headers
      .getSetCookie()
      .map((c) => /^schedflow_ui=([^;]+)/.exec(c)?.[1])
      .find((v) => v);
    const page = await fetch(`${td.daemon.apiUrl}/ui/profiles`, { headers: { cookie: `schedflow_ui=${session}` } });
    const text = (await page.text())
      .replace(/<[^>]+>/g, '')
      .replace(/&#39;/g, "'")
      .replace(/&quot;/g, '"');
    expect(text).toMatch(/Accountsuser alice may charge account lab \(from slurmdbd's associations\)/);
    expect(text).toMatch(/user alice has no association with the profile's account "other"/);

    // The CLI, from what the daemon wrote.
    expect(doorOf(td, 'srd')).toMatchObject({ user: 'alice', accounts: ['lab'] });
    const refusedFile = join(sim.workDir, 'physics.json');
    writeFileSync(refusedFile, JSON.stringify({ ...spec, account: 'physics' }));
    const labFile = join(sim.workDir, 'lab.json');
    writeFileSync(labFile, JSON.stringify({ ...spec, account: 'lab' }));
    const [refused, queued] = await Promise.all([
      runCli(['jobs', 'submit', refusedFile, '--profile', 'srd', '--data-dir', td.dataDir], { timeoutMs: 60_000 }),
      runCli(['jobs', 'submit', labFile, '--profile', 'srd', '--json', '--data-dir', td.dataDir], {
        timeoutMs: 60_000,
      }),
    ]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /user alice has no association with it and Slurm would refuse the job \(2045\): use "lab"/,
    );
    expect(queued.code).toBe(0);
    await td.waitForState((JSON.parse(queued.stdout) as { requestId: string }).requestId, 'completed');
  }, 120_000);

  it('lets jobs through while the associations cannot be read, and learns them later', async () => {
    const sim = await env.sim();
    await http(`${sim.url}/_sim/upstream`, { headers: sim.admin, method: 'PUT', body: { slurmdbd: 'down' } });
    const td = await startTestDaemon(
      sim.url,
      env.redis.url,
      { profileRecheckMs: 300 },
      {},
      {},
      { srd: slurmrestdProfile(sim.workDir, 'lab') },
    );
    env.defer(() => td.stop());
    const { clients } = td.daemon;
    expect(clients.accounts('srd')).toMatchObject({ source: 'unknown', accounts: null });
    expect(clients.accounts('srd')?.detail).toMatch(
      /^accounts unknown: .*GET \/slurmdb\/v0.0.44\/associations \(HTTP 502/,
    );
    const ready = await http(`${td.daemon.apiUrl}/readyz`);
    expect((ready.json as { detail: Record<string, string> }).detail['accounts:srd']).toMatch(/^accounts unknown/);
    expect(doorOf(td, 'srd').accounts ?? null).toBeNull();

    // Unknown refuses nothing: Slurm decides.
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const spec = shellSpec('unknown', 'true', sim.workDir);
    const through = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { profile: 'srd', spec: { ...spec, account: 'physics' } },
    });
    expect(through.status).toBe(201);

    // slurmdbd back: the daemon learns the associations by itself and writes them for the CLI.
    await http(`${sim.url}/_sim/upstream`, { headers: sim.admin, method: 'PUT', body: { slurmdbd: 'up' } });
    await waitFor(async () => (doorOf(td, 'srd').accounts ? true : undefined), {
      what: 'daemon.json to carry the associations',
      timeoutMs: 10_000,
      intervalMs: 100,
    });
    expect(doorOf(td, 'srd')).toMatchObject({ user: 'alice', accounts: ['lab'] });
    const file = join(sim.workDir, 'physics.json');
    writeFileSync(file, JSON.stringify({ ...spec, account: 'physics' }));
    const refused = await runCli(['jobs', 'submit', file, '--profile', 'srd', '--data-dir', td.dataDir], {
      timeoutMs: 60_000,
    });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/no association with it/);
  }, 120_000);
});
