import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { inject } from 'vitest';
import type { Profile } from '../../src/sched/profile.js';
import { parseProfile } from '../../src/sched/profile.js';
import type { ApiVersion } from '../../src/sched/versions.js';
import { REAL_SLURM_DIR, type RealSlurm } from './real-slurm.js';

const exec = promisify(execFile);

export { REAL_SLURM_DIR, type RealSlurm } from './real-slurm.js';

export const realSlurm = (): RealSlurm => inject('realSlurm');

let jobDir: string | undefined;

/**
 * The working directory of the tier's jobs: a folder of this run's, writable by the cluster's
 * users (sticky, as /tmp is). In /tmp itself a job's default output, /tmp/slurm-<id>.out, could
 * already exist, left by the simulator (run as root: its jobs take the same ids) or by an
 * earlier cluster, and the job then failed to start (Permission denied; RaisedSignal:53).
 */
export function jobWorkDir(): string {
  if (!jobDir) {
    jobDir = mkdtempSync(join(tmpdir(), 'schedflow-slurm-jobs-'));
    chmodSync(jobDir, 0o1777);
  }
  return jobDir;
}

/** The folder `cluster.sh` keeps its state, pids and logs in. */
export const slurmRun = (): string => resolve(realSlurm().slurmConf, '..', '..');

/** Runs one of Slurm's commands (`scontrol`, `sacctmgr`, `squeue`, …) against the test cluster. */
export async function slurmCommand(command: string, args: string[]): Promise<string> {
  const { prefix, slurmConf } = realSlurm();
  const bin = command === 'slurmctld' || command === 'slurmdbd' ? 'sbin' : 'bin';
  const { stdout } = await exec(join(prefix, bin, command), args, {
    env: { ...process.env, SLURM_CONF: slurmConf },
    timeout: 60_000,
  });
  return stdout;
}

/** Stops one daemon of the cluster (`slurmctld`, `slurmdbd`) as an outage would: SIGKILL. */
export async function killSlurmDaemon(name: 'slurmctld' | 'slurmdbd'): Promise<void> {
  const pidFile = join(slurmRun(), 'run', `${name}.pid`);
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  process.kill(pid, 'SIGKILL');
  for (let i = 0; i < 100; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${name} (pid ${pid}) did not stop`);
}

/** `cluster.sh up`: starts whatever of the cluster is not running (idempotent). */
export async function clusterUp(env: NodeJS.ProcessEnv = {}): Promise<string> {
  const up = () =>
    exec('bash', [join(REAL_SLURM_DIR, 'cluster.sh'), 'up'], { env: { ...process.env, ...env }, timeout: 180_000 });
  // Right after a SIGKILL, slurmdbd can fail its first start (its port or pid file not yet
  // free); a second `up` starts it.
  const { stdout } = await up().catch(() => up());
  return stdout.trim().split('\n').at(-1) ?? '';
}

export async function clusterDown(env: NodeJS.ProcessEnv = {}): Promise<void> {
  await exec('bash', [join(REAL_SLURM_DIR, 'cluster.sh'), 'down'], {
    env: { ...process.env, ...env },
    timeout: 60_000,
  });
}

/** Reads an env file `cluster.sh up` wrote. */
export function readClusterEnv(file: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => line.includes('='))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

/** A profile for plain slurmrestd as a user (header pair with the user's JWT in a 0600 file). */
export function slurmrestdProfile(
  dir: string,
  options: { version?: ApiVersion | 'latest'; user?: 'alice' | 'bob'; url?: string; jwt?: string; extra?: object } = {},
): { profile: Profile; input: Record<string, unknown> } {
  const slurm = realSlurm();
  const user = options.user ?? 'alice';
  mkdirSync(dir, { recursive: true });
  const tokenFile = join(dir, `${user}.jwt`);
  writeFileSync(tokenFile, options.jwt ?? (user === 'alice' ? slurm.aliceJwt : slurm.bobJwt), { mode: 0o600 });
  const input = {
    url: options.url ?? slurm.url,
    flavor: 'slurmrestd',
    auth: { type: 'header-pair', user, tokenFile },
    account: user === 'alice' ? 'lab' : 'other',
    version: options.version ?? 'v0.0.44',
    ...options.extra,
  };
  return { profile: parseProfile(`real-${user}`, input), input };
}

/** A job script that runs anywhere the test users can write (their jobs really run here). */
export function script(body: string): string {
  return `#!/bin/bash\n${body}\n`;
}
