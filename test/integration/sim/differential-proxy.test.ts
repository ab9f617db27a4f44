import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUPPORTED_VERSIONS } from '../../../src/sched/versions.js';
import { compareRecords, formatDivergences } from '../../differential/compare.js';
import { readFixture } from '../../differential/fixtures.js';
import { runSequence } from '../../differential/sequence.js';
import { CLUSTER_LIKE_SIM, simTarget } from '../../differential/sim-target.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * The differential check through the proxy's paths (differential.test.ts has slurmrestd's own):
 * the simulator answers the fixed sequence of test/differential/sequence.ts as a real Slurm 25.11.7 did when the fixtures were recorded (`npm run record:slurm`): same
 * statuses, content types, Slurm errors and warnings, job states and exit codes, body shapes.
 * Nothing is allowed to differ.
 */

/**
 * Steps the site proxy answers itself, by its own contract, before any Slurm body is made:
 * its JSON 401 for a missing or unknown token (slurmrestd: 401 text, or passes the token on),
 * its 404/400 for paths and versions it lacks, its account binding (403) for bob acting on
 * account lab, and its JSON 500 (or a cached answer) while slurmctld or slurmdbd is gone.
 * Every other step must give the recorded Slurm answer under /sched too.
 */
const PROXY_OWN_ANSWERS = new Set([
  'no credentials: ping',
  'no credentials: job listing',
  'no credentials: accounting',
  'no credentials: unknown path',
  'unknown path',
  'unknown API version',
  'bad token: ping',
  'bad token: job listing',
  'bad token: jobs/state',
  'bad token: one job',
  'bad token: submit',
  'bad token: cancel',
  'bad token: accounting',
  'bad token: accounting job',
  'submit refused: account the user has no association with (bob as lab)',
  "cancel another user's job",
  'slurmctld down: ping',
  'slurmctld down: job listing',
  'slurmctld down: jobs/state',
  'slurmctld down: one job',
  'slurmctld down: submit',
  'slurmctld down: cancel',
  'slurmdbd down: accounting',
  'slurmdbd down: accounting job',
  // The cluster's view (issue 34): the proxy's 401 for a bad token, and its cached answer (the
  // reservations' lifetime, 30 s) of the empty list read just before the reservation was made.
  'bad token: partitions',
  'bad token: nodes',
  'bad token: reservations',
  'cluster: a maintenance reservation',
]);

let sim: TestSim;

beforeAll(async () => {
  sim = await startSim(CLUSTER_LIKE_SIM);
});

afterAll(async () => {
  await sim?.stop();
});

describe('the proxy paths carry the same Slurm answers', () => {
  for (const version of SUPPORTED_VERSIONS) {
    it(`${version}: /sched and /scheddb answer as the fixture, but for the proxy's own answers`, {
      timeout: 120_000,
    }, async () => {
      const fixture = readFixture(version);
      const records = await runSequence(simTarget(sim, 'proxy'), version, { waitTimeoutMs: 60_000 });
      const slurmOnly = <T extends { step: string }>(steps: T[]) => steps.filter((s) => !PROXY_OWN_ANSWERS.has(s.step));
      expect(formatDivergences(compareRecords(version, slurmOnly(fixture.steps), slurmOnly(records)))).toBe('');
      // The proxy's own answers are its JSON errors, not slurmrestd's.
      const unauthenticated = records.find((r) => r.step === 'no credentials: job listing');
      expect(unauthenticated).toMatchObject({ status: 401, contentType: expect.stringMatching(/^application\/json/) });
      expect(records.find((r) => r.step === "cancel another user's job")?.status).toBe(403);
    });
  }
});
