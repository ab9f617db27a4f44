import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { SimJob } from './upstream.js';
import { REPO } from './upstream.js';

const exec = promisify(execFile);

/** `../shared/real-slurm` beside the repository (as test/slurm finds it), or SCHEDFLOW_REAL_SLURM_DIR. */
export const REAL_SLURM_DIR = process.env.SCHEDFLOW_REAL_SLURM_DIR ?? join(REPO, '..', 'shared', 'real-slurm');
/**
 * The cluster's run dir, as cluster.sh takes it (SLURM_RUN, with SLURM_PORT_BASE for its ports):
 * another than the shared /tmp/real-slurm runs a cluster of its own beside it, so a chaos run
 * that kills its daemons does not disturb someone else's `npm run test:slurm`.
 */
const RUN_DIR = process.env.SLURM_RUN ?? '/tmp/real-slurm';
const ENV_FILE = join(RUN_DIR, 'env');

/**
 * The real test cluster of `npm run test:slurm` (cluster.sh: slurmctld, slurmd, slurmdbd,
 * slurmrestd with JWT auth). Its jobs are read with sacct by name: slurmdbd keeps no job
 * comments on this cluster, so there is no marker to count by.
 */
export class RealSlurm {
  private constructor(private readonly env: Record<string, string>) {}

  /** `cluster.sh up` (idempotent: starts what is not running; SLURM_RUN and SLURM_PORT_BASE go with the environment), then its env file. */
  static async up(): Promise<RealSlurm> {
    if (!existsSync(join(REAL_SLURM_DIR, 'cluster.sh'))) {
      throw new Error(
        `no ${join(REAL_SLURM_DIR, 'cluster.sh')}: give SCHEDFLOW_REAL_SLURM_DIR the real-slurm directory (../shared/real-slurm from a clone beside it)`,
      );
    }
    const up = () => exec('bash', [join(REAL_SLURM_DIR, 'cluster.sh'), 'up'], { timeout: 600_000 });
    // Right after a SIGKILL slurmdbd can fail its first start (port or pid file not yet free).
    await up().catch(() => up());
    const env = Object.fromEntries(
      readFileSync(ENV_FILE, 'utf8')
        .split('\n')
        .filter((line) => line.includes('='))
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
    for (const name of ['SLURMRESTD_URL', 'ALICE_JWT', 'SLURM_CONF', 'SLURM_PREFIX']) {
      if (!env[name]) throw new Error(`${ENV_FILE} has no ${name}`);
    }
    return new RealSlurm(env);
  }

  get url(): string {
    return this.env.SLURMRESTD_URL as string;
  }

  /** A slurmrestd profile as alice (header pair with her JWT in a 0600 file). */
  profile(dir: string, url: string): Record<string, unknown> {
    const tokenFile = join(dir, 'alice.jwt');
    writeFileSync(tokenFile, this.env.ALICE_JWT as string, { mode: 0o600 });
    return {
      url,
      flavor: 'slurmrestd',
      auth: { type: 'header-pair', user: 'alice', tokenFile },
      account: 'lab',
      version: 'v0.0.44',
    };
  }

  private async command(command: string, args: string[]): Promise<string> {
    const prefix = this.env.SLURM_PREFIX as string;
    const bin = command === 'slurmctld' || command === 'slurmdbd' ? 'sbin' : 'bin';
    const { stdout } = await exec(join(prefix, bin, command), args, {
      env: { ...process.env, SLURM_CONF: this.env.SLURM_CONF },
      timeout: 60_000,
    });
    return stdout;
  }

  /** alice's jobs of the last two hours named chaos-*, from accounting. */
  async jobs(): Promise<SimJob[]> {
    const out = await this.command('sacct', [
      '-n',
      '-X',
      '-P',
      '-u',
      'alice',
      '-S',
      'now-7200',
      '-o',
      'jobid,jobname,state,exitcode',
    ]);
    return out
      .split('\n')
      .map((line) => line.split('|'))
      .filter((f) => f.length >= 4 && (f[1] ?? '').startsWith('slurm-'))
      .map(([jobId, name, state, exit]) => ({
        jobId: Number(jobId),
        name: name as string,
        comment: '',
        // "CANCELLED by 1003" → CANCELLED
        state: (state ?? '').split(' ')[0] as string,
        exitCode: Number((exit ?? '').split(':')[0]),
      }));
  }

  /**
   * When slurmdbd had written the ends of the jobs with ids from `fromJobId` to `toJobId`: the
   * latest `mod_time` (whole seconds) of their records in its own job table, read from MariaDB
   * as cluster.sh set it up (database `realslurm_<port base>`, cluster `real`), with how many of
   * them have ended there; null where that cannot be read. What no poller can be ahead of:
   * accounting has an end's times only once slurmdbd has written it.
   */
  async endsWrittenAt(fromJobId: number, toJobId: number): Promise<{ atSec: number; ended: number } | null> {
    const db = `realslurm_${Number(process.env.SLURM_PORT_BASE ?? 27817)}`;
    const query = `select coalesce(max(mod_time), 0), count(*) from real_job_table where id_job between ${Math.trunc(fromJobId)} and ${Math.trunc(toJobId)} and time_end > 0`;
    try {
      const { stdout } = await exec('mysql', ['-N', '-B', '-u', 'root', db, '-e', query], { timeout: 30_000 });
      const [atSec, ended] = stdout.trim().split('\t').map(Number);
      return atSec && ended !== undefined ? { atSec, ended } : null;
    } catch {
      return null;
    }
  }

  /** Stops one daemon of the cluster as an outage would: SIGKILL (test/slurm/cluster.ts does the same). */
  async kill(name: 'slurmctld' | 'slurmdbd'): Promise<void> {
    const pid = Number(readFileSync(join(RUN_DIR, 'run', `${name}.pid`), 'utf8').trim());
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

  /** Starts again whatever was stopped. */
  async restore(): Promise<void> {
    await RealSlurm.up();
  }
}
