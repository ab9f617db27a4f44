import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { SchedClient } from '../../src/sched/client.js';
import { slurmUserOf } from '../../src/sched/credentials.js';
import { parseProfile } from '../../src/sched/profile.js';
import { SUPPORTED_VERSIONS } from '../../src/sched/versions.js';
import { compareShapes, shapeOf } from '../differential/shape.js';
import { killLeftovers, runCli } from '../helpers/cli-process.js';
import { http } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { realSlurm, slurmrestdProfile } from './cluster.js';
import { type RealDaemon, realSpec, startRealDaemon } from './daemon-helpers.js';

/**
 * The accounts a user may charge on plain slurmrestd are Slurm's associations (alice: lab, bob:
 * other, on the real cluster): read from `GET /slurmdb/{v}/associations?user=` at start, a job
 * for another account is refused at the door (SCHEDFLOW_ERR_ACCOUNT_NOT_ASSOCIATED) rather than
 * by Slurm at submit (2045), and one for an allowed account runs.
 */

type Json = Record<string, unknown>;
const logger = createLogger({ level: 'silent' });
const secrets = mkdtempSync(join(tmpdir(), 'schedflow-accounts-'));
let redis: TestRedis;
let d: RealDaemon;

beforeAll(async () => {
  redis = await startTestRedis();
  d = await startRealDaemon(redis, {
    profiles: {
      // alice's JWT alone (no user name header), charging an account she has no association with.
      'jwt-other': (real) => ({
        auth: { type: 'bearer', tokenFile: (real.auth as { tokenFile: string }).tokenFile },
        account: 'other',
      }),
    },
  });
}, 120_000);

afterAll(async () => {
  await d?.stop();
  await killLeftovers();
  await redis?.stop();
});

const capture = (name: string): Json =>
  JSON.parse(readFileSync(new URL(`../fixtures/real-slurm-25.11/${name}`, import.meta.url), 'utf8')) as Json;
/** `meta.client` is the connection slurmrestd served, different on every request. */
const withoutClient = ({ meta, ...rest }: Json) => ({ ...rest, meta: { ...(meta as Json), client: {} } });

describe('the accounts of the real users’ associations', () => {
  for (const version of SUPPORTED_VERSIONS) {
    it(`${version}: reads each user's associations, answered as recorded`, async () => {
      const slurm = realSlurm();
      const res = await http(`${slurm.url}/slurmdb/${version}/associations?user=alice`, {
        headers: { 'x-slurm-user-name': 'alice', 'x-slurm-user-token': slurm.aliceJwt },
      });
      expect(res.status).toBe(200);
      const recorded = capture(`associations_${version}.json`);
      expect(compareShapes(shapeOf(withoutClient(recorded)), shapeOf(withoutClient(res.json as Json)))).toEqual([]);

      for (const [user, accounts] of [
        ['alice', ['lab']],
        ['bob', ['other']],
      ] as const) {
        const { profile } = slurmrestdProfile(join(secrets, `${user}-${version}`), { version, user });
        const client = await SchedClient.connect(profile, { logger });
        try {
          expect(await client.userAccounts(user)).toEqual(accounts);
        } finally {
          await client.close();
        }
      }
    });
  }

  it("knows a JWT's user by its sun claim, as slurmrestd does", async () => {
    const { input } = slurmrestdProfile(join(secrets, 'jwt'));
    const profile = parseProfile('jwt', {
      ...input,
      auth: { type: 'bearer', tokenFile: (input.auth as { tokenFile: string }).tokenFile },
    });
    expect(slurmUserOf(profile)).toBe('alice');
    const client = await SchedClient.connect(profile, { logger });
    try {
      expect(await client.userAccounts('alice')).toEqual(['lab']);
    } finally {
      await client.close();
    }
  });

  it('the daemon says them at start and refuses at the door a job for an account the user has none with', async () => {
    const banner = d.process.stdout;
    expect(banner).toContain("profile real: user alice may charge account lab (from slurmdbd's associations)");
    expect(banner).toContain(
      `WARNING: profile jwt-other: user alice has no association with the profile's account "other" (only lab)`,
    );
    const ready = await d.api('GET', '/readyz');
    const detail = (ready.json as { detail?: Record<string, string> }).detail ?? {};
    expect(detail['accounts:jwt-other']).toMatch(/no association with the profile's account "other"/);
    expect(detail['accounts:real']).toBeUndefined();

    const other = await d.api('POST', '/api/v1/jobs', {
      profile: 'real',
      spec: realSpec('sf-other', 'true', { account: 'other' }),
    });
    expect(other.status).toBe(422);
    expect(other.json).toMatchObject({ error: { code: 'SCHEDFLOW_ERR_ACCOUNT_NOT_ASSOCIATED' } });
    expect((other.json as { error: { message: string } }).error.message).toMatch(
      /the job names account "other", but user alice has no association with it and Slurm would refuse the job \(2045\): use "lab"/,
    );
    const byDefault = await d.api('POST', '/api/v1/jobs', {
      profile: 'jwt-other',
      spec: realSpec('sf-default', 'true'),
    });
    expect(byDefault.status).toBe(422);
    expect(byDefault.json).toMatchObject({ error: { code: 'SCHEDFLOW_ERR_ACCOUNT_NOT_ASSOCIATED' } });

    // An allowed account runs, through either profile.
    const ids = await Promise.all([
      d.submit(realSpec('sf-lab', 'echo lab', { account: 'lab' })),
      d.submit(realSpec('sf-jwt-lab', 'echo lab', { account: 'lab' }), 'jwt-other'),
    ]);
    for (const id of ids) expect((await d.waitForState(id, 'completed')).exit_code).toBe(0);

    // The CLI refuses what the daemon would, from daemon.json.
    const file = join(d.root, 'other.json');
    writeFileSync(file, JSON.stringify(realSpec('sf-cli-other', 'true', { account: 'other' })));
    const cli = await runCli(['jobs', 'submit', file, '--profile', 'real', '--data-dir', d.dataDir], {
      cwd: d.root,
      timeoutMs: 60_000,
    });
    expect(cli.code).toBe(2);
    expect(cli.stderr).toMatch(/user alice has no association with it and Slurm would refuse the job \(2045\)/);
  }, 240_000);
});
