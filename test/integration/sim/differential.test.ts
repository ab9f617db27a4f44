import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUPPORTED_VERSIONS } from '../../../src/sched/versions.js';
import { compareRecords, formatDivergences } from '../../differential/compare.js';
import { readFixture } from '../../differential/fixtures.js';
import { runSequence } from '../../differential/sequence.js';
import { CLUSTER_LIKE_SIM, simTarget } from '../../differential/sim-target.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * The differential check: the simulator answers the fixed sequence of test/differential/sequence.ts
 * as a real Slurm 25.11.7 did when the fixtures were recorded (`npm run record:slurm`): same
 * statuses, content types, Slurm errors and warnings, job states and exit codes, body shapes.
 * Nothing is allowed to differ.
 */

let sim: TestSim;

beforeAll(async () => {
  sim = await startSim(CLUSTER_LIKE_SIM);
});

afterAll(async () => {
  await sim?.stop();
});

describe('plain slurmrestd paths answer as the recorded real Slurm', () => {
  for (const version of SUPPORTED_VERSIONS) {
    it(`${version}: no divergence from test/fixtures/differential/${version}.json`, { timeout: 120_000 }, async () => {
      const fixture = readFixture(version);
      const records = await runSequence(simTarget(sim), version, { waitTimeoutMs: 60_000 });
      expect(formatDivergences(compareRecords(version, fixture.steps, records))).toBe('');
    });
  }
});
