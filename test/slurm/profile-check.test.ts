import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, killLeftovers, runCli } from '../helpers/cli-process.js';
import { freePort } from '../helpers/free-port.js';
import { http } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { realSlurm } from './cluster.js';
import { type RealDaemon, startRealDaemon } from './daemon-helpers.js';

/**
 * Issue 31, point 1, against the real slurmrestd: a profile with a wrong url (a port nothing
 * listens on), a JWT slurmctld refuses, and `flavor: proxy` where plain slurmrestd answers are
 * said at start (the banner and /readyz, in one sentence with the fix) and by
 * `schedflow sched check`; the good profile beside them works and says ok.
 */

let redis: TestRedis;
let d: RealDaemon;
let port: number;
let badJwt: string;

beforeAll(async () => {
  redis = await startTestRedis();
  port = await freePort();
  d = await startRealDaemon(redis, {
    env: { SCHEDFLOW_QUEUE_PREFIX: 'sf-profile-check' },
    profiles: {
      badtoken: (real) => {
        // A JWT whose signature slurmctld cannot verify: slurmrestd passes it on unchecked.
        badJwt = join(String((real.auth as { tokenFile: string }).tokenFile), '..', 'bad.jwt');
        const [header, payload] = realSlurm().aliceJwt.split('.');
        writeFileSync(badJwt, `${header}.${payload}.c2lnbmVkLWJ5LW5vYm9keQ`, { mode: 0o600 });
        return { auth: { ...(real.auth as object), tokenFile: badJwt } };
      },
      wrongport: () => ({ url: `http://127.0.0.1:${port}`, retries: { attempts: 1 } }),
      wrongflavor: (real) => ({
        flavor: 'proxy',
        auth: { type: 'bearer', tokenFile: (real.auth as { tokenFile: string }).tokenFile },
      }),
    },
  });
}, 300_000);

afterAll(async () => {
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

describe('profile checks on the real slurmrestd', () => {
  const url = () => realSlurm().url.replace(/\/$/, '');
  const said = () => ({
    badtoken: new RegExp(
      `profile "badtoken": the scheduler at ${url()}/? refused the token in ${badJwt} \\(user alice\\) \\(511: [^)]*\\): put a valid, unexpired token there \\(scontrol token username=<user>\\)`,
    ),
    wrongport: new RegExp(
      `profile "wrongport": not connected: cannot reach the scheduler at http://127\\.0\\.0\\.1:${port} \\(connection refused: nothing listens at that port\\)`,
    ),
    wrongflavor: new RegExp(
      `profile "wrongflavor": ${url()}/? is plain slurmrestd, not the scheduler proxy as the profile says \\(it asks credentials for GET /meta/versions/supported, which the proxy serves to anyone\\): set flavor: slurmrestd`,
    ),
  });

  it('says each at start: the banner and /readyz', async () => {
    const banner = d.process.stdout.slice(d.process.stdout.indexOf('schedflow is running'));
    for (const sentence of Object.values(said())) {
      expect(banner).toMatch(new RegExp(`\\n {2}WARNING: ${sentence.source}.*\\(jobs for it are refused until`));
    }
    const ready = await http(`${d.apiUrl}/readyz`);
    expect(ready.status).toBe(503);
    const { checks } = ready.json as { checks: Record<string, string> };
    expect(checks['scheduler:real']).toBe('ok');
    for (const [name, sentence] of Object.entries(said())) expect(checks[`scheduler:${name}`]).toMatch(sentence);
  });

  it('says each by schedflow sched check, and ok for the good profile', async () => {
    const check = (name: string) =>
      runCli(['sched', '--config', d.configDir, '--profile', name, 'check'], {
        env: cleanEnv(),
        cwd: d.root,
        timeoutMs: 60_000,
      });
    const [good, ...bad] = await Promise.all(['real', ...Object.keys(said())].map(check));
    expect(good?.stdout).toMatch(/^ok: profile "real": plain slurmrestd at .* accepted the token in .* \(user alice\)/);
    expect(good?.code).toBe(0);
    for (const [i, [name, sentence]] of Object.entries(said()).entries()) {
      expect(bad[i]?.stdout, name).toMatch(sentence);
      expect(bad[i]?.code, name).toBe(name === 'wrongport' ? 4 : 2);
    }
  });
});
