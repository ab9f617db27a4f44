import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { REAL_SLURM_DIR, type RealSlurm } from './real-slurm.js';

/**
 * Brings up the real Slurm 25.11 cluster of `../shared/real-slurm/` (building Slurm first
 * when this machine has none: about 6 minutes, once) and hands its address and tokens to
 * the tests. The cluster is left running afterwards: `cluster.sh down` stops it.
 */
export default function setup(project: TestProject): void {
  const script = resolve(REAL_SLURM_DIR, 'cluster.sh');
  if (!existsSync(script)) {
    throw new Error(
      `no real Slurm cluster script at ${script}: the real-Slurm tier needs ../shared/real-slurm beside the repo (or SCHEDFLOW_REAL_SLURM_DIR)`,
    );
  }
  const run = (arg: string) =>
    execFileSync('bash', [script, arg], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' }).trim();
  run('build');
  const envFile = run('up').split('\n').at(-1) ?? '';
  const env = Object.fromEntries(
    readFileSync(envFile, 'utf8')
      .split('\n')
      .filter((line) => line.includes('='))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
  const slurm: RealSlurm = {
    url: env.SLURMRESTD_URL ?? '',
    slurmConf: env.SLURM_CONF ?? '',
    prefix: env.SLURM_PREFIX ?? '/opt/slurm',
    aliceJwt: env.ALICE_JWT ?? '',
    bobJwt: env.BOB_JWT ?? '',
  };
  if (!slurm.url || !slurm.aliceJwt)
    throw new Error(`the cluster's env file ${envFile} lacks SLURMRESTD_URL or ALICE_JWT`);
  project.provide('realSlurm', slurm);
}

declare module 'vitest' {
  export interface ProvidedContext {
    realSlurm: RealSlurm;
  }
}
