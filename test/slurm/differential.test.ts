import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUPPORTED_VERSIONS } from '../../src/sched/versions.js';
import { compareRecords, formatDivergences } from '../differential/compare.js';
import { readFixture } from '../differential/fixtures.js';
import type { StepRecord } from '../differential/reduce.js';
import { runSequence } from '../differential/sequence.js';
import { CLUSTER_LIKE_SIM, simTarget } from '../differential/sim-target.js';
import { realTarget } from '../differential/target.js';
import { startSim, type TestSim } from '../helpers/sim.js';
import { realSlurm } from './cluster.js';

/**
 * The differential check, live: the sequence of test/differential/sequence.ts against the real
 * cluster and against the simulator, side by side, for every data parser. The default suite
 * compares the simulator with recorded fixtures; this also says when the fixtures no longer
 * describe the real cluster (re-record them with `npm run record:slurm`).
 */

let sim: TestSim;

beforeAll(async () => {
  sim = await startSim(CLUSTER_LIKE_SIM);
});

afterAll(async () => {
  await sim?.stop();
});

describe('the simulator against a real Slurm 25.11', () => {
  for (const version of SUPPORTED_VERSIONS) {
    describe(version, () => {
      let real: StepRecord[];

      beforeAll(async () => {
        real = await runSequence(realTarget(realSlurm()), version);
      }, 240_000);

      it('the simulator answers every step as the real cluster does', async () => {
        const simulated = await runSequence(simTarget(sim), version, { waitTimeoutMs: 60_000 });
        expect(formatDivergences(compareRecords(version, real, simulated))).toBe('');
      });

      it('the recorded fixtures still describe the real cluster', () => {
        const stale = compareRecords(version, readFixture(version).steps, real);
        expect(formatDivergences(stale, { expected: 'recorded', actual: 'live' })).toBe('');
      });
    });
  }
});
