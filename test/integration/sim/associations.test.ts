import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUPPORTED_VERSIONS } from '../../../src/sched/versions.js';
import { compareShapes, shapeOf } from '../../differential/shape.js';
import { http } from '../../helpers/http.js';
import { ALICE_TOKEN, BOB_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';

/**
 * The simulator's `GET /slurmdb/{v}/associations` answers as real Slurm 25.11.7's does
 * (captured in test/fixtures/real-slurm-25.11/associations_*): the same shape on every data
 * parser, one record per user and account, slurmdbd's warning for a user it has none of.
 */

type Json = Record<string, unknown>;
const capture = (name: string): Json =>
  JSON.parse(readFileSync(new URL(`../../fixtures/real-slurm-25.11/${name}`, import.meta.url), 'utf8')) as Json;

let sim: TestSim;

beforeAll(async () => {
  sim = await startSim({
    users: {
      alice: { uid: 1003, defaultAccount: 'lab' },
      bob: { uid: 1004, defaultAccount: 'other', accounts: ['other', 'physics'] },
    },
  });
});

afterAll(async () => {
  await sim.stop();
});

const slurmrestd = (user: string, token: string) => ({ 'x-slurm-user-name': user, 'x-slurm-user-token': token });
const get = (path: string, headers = slurmrestd('alice', ALICE_TOKEN)) => http(`${sim.url}${path}`, { headers });

describe("the simulator's associations", () => {
  for (const version of SUPPORTED_VERSIONS) {
    it(`${version}: a user's associations, shaped as the real cluster's`, async () => {
      const res = await get(`/slurmdb/${version}/associations?user=alice`);
      expect(res.status).toBe(200);
      const body = res.json as Json;
      const real = capture(`associations_${version}.json`);
      // `meta.client` is slurmrestd's connection, which the simulator fills as it does elsewhere.
      const strip = ({ meta, ...rest }: Json) => ({ ...rest, meta: { ...(meta as Json), client: {} } });
      expect(compareShapes(shapeOf(strip(real)), shapeOf(strip(body)))).toEqual([]);
      const [record] = body.associations as Json[];
      expect(record).toMatchObject({ user: 'alice', account: 'lab', is_default: true, lineage: '/lab/0-alice/' });
      // As the real v0.0.42 parser does, ids come out as 0 there.
      if (version === 'v0.0.42') expect(record?.id).toBe(0);
    });
  }

  it('lists every account of a user, filters by account, and warns of a user it has none of', async () => {
    const bob = await get('/slurmdb/v0.0.44/associations?user=bob', slurmrestd('bob', BOB_TOKEN));
    expect((bob.json as { associations: Json[] }).associations.map((a) => [a.account, a.is_default])).toEqual([
      ['other', true],
      ['physics', false],
    ]);
    const two = await get('/slurmdb/v0.0.44/associations?user=alice&user=bob&account=physics');
    expect((two.json as { associations: Json[] }).associations.map((a) => a.user)).toEqual(['bob']);

    const none = await get('/slurmdb/v0.0.44/associations?user=nosuchuser');
    const real = capture('associations_no_user_v0.0.44.json');
    expect(none.status).toBe(200);
    expect(none.json).toMatchObject({ associations: [], warnings: real.warnings as Json[] });
  });

  it("refuses a token Slurm would not take as slurmdbd does, and is not the proxy's", async () => {
    const bad = await get('/slurmdb/v0.0.44/associations?user=alice', slurmrestd('alice', 'not-a-token'));
    expect(bad.status).toBe(502);
    expect(bad.json).toMatchObject({
      errors: [{ description: 'Failed to open slurmdbd connection, authentication error' }],
    });
    const proxy = await http(`${sim.url}/scheddb/v0.0.44/associations?user=alice`, {
      headers: { authorization: `Bearer ${ALICE_TOKEN}` },
    });
    expect(proxy.status).toBe(404);
  });
});
