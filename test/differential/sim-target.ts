import type { SimConfigInput } from '../../src/sim/sim-config.js';
import { ALICE_TOKEN, BOB_TOKEN, type TestSim } from '../helpers/sim.js';
import { type DiffTarget, headerPair } from './target.js';

/**
 * A simulator set up as the real cluster of `cluster.sh` is: alice in account lab, bob in
 * account other, partitions debug (default) and lab-owner (account lab only, no time limit),
 * MinJobAge 60 s, JobAcctGatherFrequency 5 s, two CPUs.
 */
export const CLUSTER_LIKE_SIM: SimConfigInput = {
  cpus: 2,
  minJobAgeSec: 60,
  killWaitSec: 1,
  jobAcctGatherFrequencySec: 5,
  partitions: [
    { name: 'debug', default: true },
    { name: 'lab-owner', allowAccounts: ['lab'] },
  ],
  users: {
    alice: { uid: 1001, defaultAccount: 'lab', accounts: ['lab'] },
    bob: { uid: 1002, defaultAccount: 'other', accounts: ['other'] },
  },
};

/**
 * The simulator as a target of the sequence: its plain-slurmrestd paths (`/slurm`, `/slurmdb`,
 * X-SLURM-USER-* headers), or with `flavor: 'proxy'` the same requests through its proxy paths
 * (`/sched`, `/scheddb`, X-SCHED-USER-* headers).
 */
export function simTarget(sim: TestSim, flavor: 'slurmrestd' | 'proxy' = 'slurmrestd'): DiffTarget {
  const pair = (user: string, token: string): Record<string, string> =>
    flavor === 'slurmrestd' ? headerPair(user, token) : { 'x-sched-user-name': user, 'x-sched-user-token': token };
  return {
    name: flavor === 'slurmrestd' ? 'sim' : 'sim (proxy paths)',
    url: sim.url,
    credentials: { alice: pair('alice', ALICE_TOKEN), bob: pair('bob', BOB_TOKEN) },
    badCredentials: pair('alice', 'not-a-token-0123456789'),
    ...(flavor === 'proxy' && { prefixes: { controller: '/sched', accounting: '/scheddb' } }),
    workDir: sim.workDir,
    async setSubmitLimit(user, limit) {
      // The simulator's stand-in for `sacctmgr modify user … set MaxSubmitJobs=`.
      const res = await fetch(`${sim.url}/_sim/users/${user}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', ...sim.admin },
        body: JSON.stringify({ maxSubmitJobs: limit }),
      });
      if (res.status !== 200) {
        throw new Error(`the simulator refused the submit limit: ${res.status} ${await res.text()}`);
      }
    },
    async setReservation(name, state) {
      // The simulator's stand-in for `scontrol create|delete reservation`.
      const res = await fetch(`${sim.url}/_sim/reservations/${name}`, {
        method: state === null ? 'DELETE' : 'PUT',
        headers: state === null ? sim.admin : { 'content-type': 'application/json', ...sim.admin },
        ...(state !== null && {
          body: JSON.stringify({ startInSec: 3600, durationMin: 30, users: ['alice'], flags: ['MAINT'] }),
        }),
      });
      if (res.status !== 200)
        throw new Error(`the simulator refused the reservation: ${res.status} ${await res.text()}`);
    },
    async setDaemon(daemon, state) {
      // The simulator's stand-in for a daemon that is gone: its admin switch.
      const res = await fetch(`${sim.url}/_sim/upstream`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', ...sim.admin },
        body: JSON.stringify({ [daemon]: state }),
      });
      if (res.status !== 200) throw new Error(`the simulator refused the upstream switch: ${res.status}`);
    },
  };
}
