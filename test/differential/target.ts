import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { REAL_SLURM_DIR } from '../slurm/real-slurm.js';

const exec = promisify(execFile);

export type DiffUser = 'alice' | 'bob';

/** What the differential sequence runs against: a real slurmrestd or the simulator's `/slurm` paths. */
export interface DiffTarget {
  /** `real` or `sim`: names the side in reports. */
  name: string;
  /** Base URL, without a trailing slash. */
  url: string;
  /** The X-SLURM-USER-NAME / X-SLURM-USER-TOKEN pair of each user. */
  credentials: Record<DiffUser, Record<string, string>>;
  /** alice's name with a token Slurm cannot verify. */
  badCredentials: Record<string, string>;
  /**
   * Where the controller and accounting paths are; the sequence is written for plain slurmrestd.
   * @defaultValue `{ controller: '/slurm', accounting: '/slurmdb' }`
   */
  prefixes?: { controller: string; accounting: string };
  /** A directory the users' jobs can write to (their working directory). */
  workDir: string;
  /** Sets the user's MaxSubmitJobs (null: no limit), as `sacctmgr modify user` does. */
  setSubmitLimit(user: DiffUser, limit: number | null): Promise<void>;
  /** Stops or restarts one of the cluster's daemons (an outage, as the API sees it). */
  setDaemon(daemon: SlurmDaemon, state: 'up' | 'down'): Promise<void>;
  /**
   * Creates a maintenance reservation of the one node for alice, starting in an hour for 30
   * minutes (`scontrol create reservation … Flags=MAINT`), or deletes it (null).
   */
  setReservation(name: string, state: 'maintenance' | null): Promise<void>;
}

export type SlurmDaemon = 'slurmctld' | 'slurmdbd';

/** The X-SLURM-USER-NAME / X-SLURM-USER-TOKEN pair. */
export function headerPair(user: string, token: string): Record<string, string> {
  return { 'x-slurm-user-name': user, 'x-slurm-user-token': token };
}

/** Reads the env file `cluster.sh up` writes (KEY=value lines). */
export function readEnvFile(file: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => line.includes('='))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

export interface RealCluster {
  url: string;
  slurmConf: string;
  prefix: string;
  aliceJwt: string;
  bobJwt: string;
}

export function realClusterFromEnvFile(file: string): RealCluster {
  const env = readEnvFile(file);
  const cluster = {
    url: env.SLURMRESTD_URL ?? '',
    slurmConf: env.SLURM_CONF ?? '',
    prefix: env.SLURM_PREFIX ?? '/opt/slurm',
    aliceJwt: env.ALICE_JWT ?? '',
    bobJwt: env.BOB_JWT ?? '',
  };
  if (!cluster.url || !cluster.aliceJwt || !cluster.bobJwt || !cluster.slurmConf) {
    throw new Error(
      `${file} lacks SLURMRESTD_URL, SLURM_CONF, ALICE_JWT or BOB_JWT: is it an env file of cluster.sh up?`,
    );
  }
  return cluster;
}

/** The account each test user has on the real cluster (cluster.sh) and on the simulator. */
const ACCOUNT: Record<DiffUser, string> = { alice: 'lab', bob: 'other' };

/**
 * Where the real cluster's jobs of the sequence run: a directory of their own, writable by
 * alice and bob, since /tmp may hold another cluster's `slurm-<id>.out` with the same job id.
 */
const REAL_WORK_DIR = '/tmp/schedflow-differential';

/** A real cluster of `../shared/real-slurm/cluster.sh` as a target; jobs run as alice and bob. */
export function realTarget(cluster: RealCluster): DiffTarget {
  mkdirSync(REAL_WORK_DIR, { recursive: true });
  chmodSync(REAL_WORK_DIR, 0o1777);
  const slurm = async (command: string, args: string[]): Promise<string> => {
    const { stdout } = await exec(join(cluster.prefix, 'bin', command), args, {
      env: { ...process.env, SLURM_CONF: cluster.slurmConf },
      timeout: 60_000,
    });
    return stdout;
  };
  return {
    name: 'real',
    url: cluster.url.replace(/\/$/, ''),
    credentials: { alice: headerPair('alice', cluster.aliceJwt), bob: headerPair('bob', cluster.bobJwt) },
    badCredentials: headerPair('alice', 'not-a-jwt'),
    workDir: REAL_WORK_DIR,
    async setReservation(name, state) {
      if (state === null) {
        await slurm('scontrol', ['delete', `ReservationName=${name}`]);
        return;
      }
      await slurm('scontrol', [
        'create',
        'reservation',
        `ReservationName=${name}`,
        'StartTime=now+1hour',
        'Duration=30',
        'Nodes=localhost',
        'Users=alice',
        'Flags=MAINT',
      ]);
    },
    async setSubmitLimit(user, limit) {
      const value = limit ?? -1;
      await slurm('sacctmgr', [
        '-i',
        'modify',
        'user',
        user,
        'where',
        `account=${ACCOUNT[user]}`,
        'set',
        `MaxSubmitJobs=${value}`,
      ]);
      // slurmdbd pushes the change to slurmctld on its own time: wait until the controller has it.
      // `MaxSubmitJobs=1(0)` once set (limit and usage), `MaxSubmitJobs=` when unset.
      const taken = (shown: string) =>
        limit === null ? !/MaxSubmitJobs=\d/.test(shown) : new RegExp(`MaxSubmitJobs=${limit}\\(`).test(shown);
      const deadline = Date.now() + 30_000;
      for (;;) {
        const shown = await slurm('scontrol', [
          'show',
          'assoc_mgr',
          `users=${user}`,
          `accounts=${ACCOUNT[user]}`,
          'flags=assoc',
        ]);
        if (taken(shown)) return;
        if (Date.now() > deadline)
          throw new Error(`slurmctld did not take MaxSubmitJobs=${value} for ${user}:\n${shown}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    },
    async setDaemon(daemon, state) {
      // cluster.sh keeps its pids, and its settings, under SLURM_RUN (the parent of etc/slurm.conf).
      const run = resolve(cluster.slurmConf, '..', '..');
      if (state === 'down') {
        // SIGTERM, not SIGKILL: slurmctld saves its state first, so jobs the sequence just
        // cancelled do not come back running after the restart. Down is down to the API alike.
        await stopDaemon(join(run, 'run', `${daemon}.pid`));
        return;
      }
      const port = /^SlurmctldPort=(\d+)$/m.exec(readFileSync(cluster.slurmConf, 'utf8'))?.[1];
      if (!port) throw new Error(`no SlurmctldPort in ${cluster.slurmConf}`);
      await exec('bash', [join(REAL_SLURM_DIR, 'cluster.sh'), 'up'], {
        env: { ...process.env, SLURM_RUN: run, SLURM_PORT_BASE: port },
        timeout: 180_000,
      });
    },
  };
}

async function stopDaemon(pidFile: string): Promise<void> {
  const pid = Number(readFileSync(pidFile, 'utf8').trim());
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 300; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${pidFile}: process ${pid} did not stop`);
}
