/**
 * Records the differential fixtures from a real Slurm (`npm run record:slurm [env-file]`):
 * runs the sequence for every API version against the cluster whose env file `cluster.sh up`
 * wrote, and writes the reduced answers to test/fixtures/differential/<version>.json.
 *
 * The env file is the first argument, else $SLURM_RUN/env, else /tmp/real-slurm/env. The
 * cluster needs alice (account lab) and bob (account other) and the partitions debug and
 * lab-owner, as cluster.sh sets them up; alice's MaxSubmitJobs is set and reset on the way.
 */
import { join } from 'node:path';
import { SUPPORTED_VERSIONS } from '../../src/sched/versions.js';
import { writeFixture } from './fixtures.js';
import { runSequence } from './sequence.js';
import { realClusterFromEnvFile, realTarget } from './target.js';

async function slurmRelease(url: string, headers: Record<string, string>): Promise<string> {
  const res = await fetch(`${url}/slurm/v0.0.44/ping`, { headers });
  const body = (await res.json()) as { meta?: { slurm?: { release?: string } } };
  return `Slurm ${body.meta?.slurm?.release ?? 'unknown'}`;
}

async function main(): Promise<void> {
  const envFile = process.argv[2] ?? join(process.env.SLURM_RUN ?? '/tmp/real-slurm', 'env');
  const target = realTarget(realClusterFromEnvFile(envFile));
  const recordedFrom = await slurmRelease(target.url, target.credentials.alice);
  console.log(`recording from ${recordedFrom} at ${target.url} (${envFile})`);
  for (const version of SUPPORTED_VERSIONS) {
    const steps = await runSequence(target, version, { log: (line) => console.log(line) });
    writeFixture({ version, recordedFrom, steps });
    console.log(`${version}: ${steps.length} steps written`);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
