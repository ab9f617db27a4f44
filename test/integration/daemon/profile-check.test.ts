import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listRequests } from '../../../src/db/requests.js';
import { createToken } from '../../../src/db/tokens.js';
import { apiClient, errorOf, shellSpec } from '../../helpers/api.js';
import { cleanEnv, runCli, spawnDaemon } from '../../helpers/cli-process.js';
import { daemonTestEnv, startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { freePort } from '../../helpers/free-port.js';
import { http, waitFor } from '../../helpers/http.js';
import { writeProfile } from '../../helpers/profile-file.js';
import { ALICE_TOKEN } from '../../helpers/sim.js';

/**
 * Issue 31, point 1: each profile is tried with an authenticated request at start and by
 * `schedflow sched check`, and what it found (unreachable with the address, a refused token, the
 * wrong flavor) is said in one sentence with its fix by the banner, /readyz, the Profiles page,
 * the door (API and `schedflow jobs submit`) and on a request that waits for it. Before, a wrong
 * token passed `sched ping`, /readyz said ready and the banner "could not tell … yet"; a mistyped
 * url left submissions `queued` with no word, and their backoff outlived the fix and a restart.
 */

const env = daemonTestEnv();

const WRONG_TOKEN = 'wrong-token-0123456789abcdef';
const decode = (html: string) =>
  html
    .replace(/<[^>]+>/g, '')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&');

async function profilesPage(td: TestDaemon): Promise<string> {
  const api = td.daemon.apiUrl as string;
  const token = (await createToken(td.daemon.history.store, { name: 'viewer', scopes: ['admin'] })).token;
  const nonce = 'login-nonce';
  const login = await fetch(`${api}/ui/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `schedflow_ui_login=${nonce}` },
    body: new URLSearchParams({ _login: nonce, token, next: '/ui/profiles' }).toString(),
  });
  const session = login.headers
    .getSetCookie()
    .map((c) => /^schedflow_ui=([^;]+)/.exec(c)?.[1])
    .find((v) => v);
  const page = await fetch(`${api}/ui/profiles`, { headers: { cookie: `schedflow_ui=${session}` } });
  return decode(await page.text());
}

describe('profiles checked at start and on demand', () => {
  it('says a wrong token, a wrong port and a flavor mismatch everywhere, and refuses their jobs at the door', async () => {
    const sim = await env.sim();
    // Plain slurmrestd alone at this address: a profile that says proxy is told so.
    const slurmrestd = await env.sim({ serves: 'slurmrestd' });
    const port = await freePort();
    const td = await startTestDaemon(
      sim.url,
      env.redis.url,
      {},
      {},
      {},
      {
        badtoken: { token: WRONG_TOKEN, account: 'lab' },
        wrongport: { url: `http://127.0.0.1:${port}`, retries: { attempts: 1 } },
        wrongflavor: { url: slurmrestd.url },
      },
    );
    env.defer(() => td.stop());
    const tokenFile = join(td.configDir, 'badtoken.token');
    const said = {
      badtoken: new RegExp(
        `profile "badtoken": the scheduler at ${sim.url} refused the token in ${tokenFile} \\(401: [^)]*\\): put a valid, unexpired token there`,
      ),
      wrongport: new RegExp(
        `profile "wrongport": not connected: cannot reach the scheduler at http://127\\.0\\.0\\.1:${port} \\(connection refused: nothing listens at that port\\): check url in the profile`,
      ),
      wrongflavor: new RegExp(
        `profile "wrongflavor": ${slurmrestd.url} is plain slurmrestd, not the scheduler proxy as the profile says \\(.*\\): set flavor: slurmrestd in the profile`,
      ),
    };

    // /readyz: not ready, each broken profile with its sentence; the good one ok.
    const ready = await http(`${td.daemon.apiUrl}/readyz`);
    expect(ready.status).toBe(503);
    const { checks } = ready.json as { checks: Record<string, string> };
    expect(checks['scheduler:test']).toBe('ok');
    for (const [name, sentence] of Object.entries(said)) expect(checks[`scheduler:${name}`]).toMatch(sentence);

    // The door: nothing recorded, the sentence in the answer.
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const spec = shellSpec('door', 'true', sim.workDir);
    for (const [name, sentence] of Object.entries(said)) {
      const r = await api.call('POST', '/api/v1/jobs', { token, body: { profile: name, spec } });
      expect(r.status).toBe(name === 'wrongport' ? 503 : 422);
      expect(errorOf(r)).toMatchObject({
        code: name === 'wrongport' ? 'SCHEDFLOW_ERR_PROFILE_NOT_CONNECTED' : 'SCHEDFLOW_ERR_PROFILE_UNUSABLE',
      });
      expect(errorOf(r).message).toMatch(sentence);
    }
    expect(await listRequests(td.daemon.history.store, {})).toEqual([]);

    // The Profiles page.
    const page = await profilesPage(td);
    for (const sentence of Object.values(said)) expect(page).toMatch(sentence);

    // schedflow jobs submit, from daemon.json: exit 2 for a profile to fix, 4 for one not reached.
    const file = join(sim.workDir, 'job.json');
    writeFileSync(file, JSON.stringify(spec));
    const submits = await Promise.all(
      Object.keys(said).map((name) =>
        runCli(['jobs', 'submit', file, '--profile', name, '--wait', '--data-dir', td.dataDir], { timeoutMs: 60_000 }),
      ),
    );
    for (const [i, [name, sentence]] of Object.entries(said).entries()) {
      expect(submits[i]?.code, name).toBe(name === 'wrongport' ? 4 : 2);
      expect(submits[i]?.stderr).toMatch(sentence);
      expect(submits[i]?.stderr).toContain('nothing was queued');
    }

    // schedflow sched check (and ping, which the README's tour used): the same sentences.
    const cliEnv = { env: cleanEnv(), timeoutMs: 60_000 };
    const check = (name: string, command = 'check') =>
      runCli(['sched', '--config', td.configDir, '--profile', name, command], cliEnv);
    const [good, ...bad] = await Promise.all(['test', ...Object.keys(said)].map((name) => check(name)));
    expect(good?.code).toBe(0);
    expect(good?.stdout).toMatch(/^ok: profile "test": the scheduler proxy at .* accepted the token in /);
    for (const [i, [name, sentence]] of Object.entries(said).entries()) {
      expect(bad[i]?.code, name).toBe(name === 'wrongport' ? 4 : 2);
      expect(bad[i]?.stdout).toMatch(sentence);
    }
    const ping = await check('badtoken', 'ping');
    expect(ping.code).toBe(2);
    expect(ping.stderr).toMatch(said.badtoken);
  }, 120_000);

  it('says them in the banner of schedflow start', async () => {
    const sim = await env.sim({ serves: 'proxy' });
    const root = join(sim.stateDir, '..', 'banner');
    const configDir = join(root, 'config');
    writeProfile(configDir, sim.url, {
      flavor: 'slurmrestd',
      auth: { type: 'header-pair', user: 'alice', tokenFile: join(configDir, 'alice.token') },
    });
    const daemon = spawnDaemon({
      dataDir: join(root, 'data'),
      configDir,
      env: cleanEnv({ REDIS_URL: env.redis.url, SCHEDFLOW_QUEUE_PREFIX: `banner-${process.pid}` }),
      cwd: root,
    });
    env.defer(async () => {
      await daemon.stop('SIGTERM');
    });
    await daemon.waitForOutput(/stop with Ctrl-C\n/, 60_000);
    const banner = daemon.stdout.slice(daemon.stdout.indexOf('schedflow is running'));
    expect(banner).toMatch(
      new RegExp(
        `\\n  WARNING: profile "test": ${sim.url} is the site’s scheduler proxy, not plain slurmrestd as the profile says \\(.*\\): set flavor: proxy in the profile with the proxy’s bearer token, or point url at the slurmrestd \\(jobs for it are refused until a check passes; checked again within 10 s\\)\\n`,
      ),
    );
  }, 90_000);

  it('a request waiting through a restart with a broken profile says why, and goes once the token is fixed', async () => {
    const sim = await env.sim();
    const td = await startTestDaemon(sim.url, env.redis.url, { pollCeilingMs: 60_000 });
    env.defer(() => td.stop());
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    // The scheduler down after a first connection: the request is accepted and its submit backs off.
    await sim.server.stop();
    const r = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: shellSpec('waits', 'true', sim.workDir) },
    });
    expect(r.status).toBe(201);
    const id = (r.json as { id: string }).id;
    const job = await waitFor(
      async () => {
        const j = await td.daemon.queues.submit.getJob(id);
        return j && (await j.getState()) === 'delayed' ? j : undefined;
      },
      { what: 'the submit to back off', timeoutMs: 60_000 },
    );
    // As after many failed attempts: BullMQ's backoff reaches an hour.
    await job.changeDelay(60 * 60_000);

    // Restarted with a token the scheduler refuses (the operator's mistake), the scheduler back.
    const tokenFile = join(td.configDir, 'alice.token');
    await td.restart(async () => {
      writeFileSync(tokenFile, WRONG_TOKEN, { mode: 0o600 });
      await sim.restart();
    });
    // The local API listens on a new port after the restart.
    const restarted = apiClient(td);
    const sentence = new RegExp(`profile "test": the scheduler at ${sim.url} refused the token in ${tokenFile}`);
    const readyz = await http(`${td.daemon.apiUrl}/readyz`);
    expect((readyz.json as { checks: Record<string, string> }).checks['scheduler:test']).toMatch(sentence);
    // The request says why it waits, within seconds (its backoff did not survive the restart).
    const waiting = await waitFor(
      async () => {
        const got = await restarted.call('GET', `/api/v1/jobs/${id}`, { token });
        const body = got.json as { state: string; error: { code: string; message: string } | null };
        return body.error?.code === 'SCHEDFLOW_ERR_PROFILE_UNUSABLE' ? body : undefined;
      },
      { what: 'the request to say why it waits', timeoutMs: 15_000 },
    );
    // `submitting`: its first attempt's POST found no scheduler; it is looked up by its marker first.
    expect(waiting.state).toBe('submitting');
    expect(waiting.error?.message).toMatch(sentence);

    // The token fixed in its file, no restart: the profile connects, and the request goes at once
    // (not after the worker's next look, a minute away).
    writeFileSync(tokenFile, ALICE_TOKEN, { mode: 0o600 });
    const fixedAt = Date.now();
    await td.waitForState(id, 'completed', 40_000);
    expect(Date.now() - fixedAt).toBeLessThan(30_000);
    const after = await http(`${td.daemon.apiUrl}/readyz`);
    expect(after.status).toBe(200);
  }, 180_000);
});
