import { spawnSync } from 'node:child_process';
import { userInfo } from 'node:os';
import { isHostUserName, passwdIds } from '../lib/host-users.js';
import { SimConfigError } from './sim-config.js';

/** A host user the simulator's job scripts run as, as slurmd runs a job as its submitter. */
export interface JobUser {
  name: string;
  uid: number;
  gid: number;
}

/**
 * The user a simulator started as root runs its jobs as, unless `jobUser` names another.
 * `schedflow setup` (and test/setup.sh) create it as a system user without a home or a shell.
 */
export const DEFAULT_JOB_USER = 'schedflow-job';

/** The command that creates the default job user, for messages and for `schedflow setup`. */
export const CREATE_JOB_USER = [
  'useradd',
  '--system',
  '--no-create-home',
  '--home-dir',
  '/nonexistent',
  '--shell',
  '/usr/sbin/nologin',
  DEFAULT_JOB_USER,
] as const;

/** A host user by name, through NSS (`getent`), so directory users count as /etc/passwd's do; null when unknown. */
export function lookupHostUser(name: string): JobUser | null {
  const run = spawnSync('getent', ['passwd', name], { encoding: 'utf8', timeout: 10_000 });
  if (run.error) throw new SimConfigError(`cannot look up host user ${name}: getent: ${run.error.message}`);
  // getent exits 2 for a name it does not know.
  if (run.status !== 0) return null;
  const ids = passwdIds(run.stdout);
  if (!ids) throw new SimConfigError(`getent passwd ${name} answered an entry without a numeric uid and gid`);
  return { name, ...ids };
}

/**
 * Whom job scripts run as. A simulator that is root must not hand root to whoever holds a token
 * with `sched:jobs:manage`: its jobs run as an unprivileged host user (`jobUser`, by default
 * schedflow-job), never root. One that is not root cannot change user, and runs them as itself
 * (null), as before.
 */
export function resolveJobUser(configured: string | undefined): JobUser | null {
  if (process.getuid?.() !== 0) {
    const self = userInfo().username;
    if (configured === undefined || configured === self) return null;
    throw new SimConfigError(
      `jobUser ${configured}: only a simulator started as root can run jobs as another user; this one runs them as ${self}. Remove jobUser, or start it as root`,
    );
  }
  const name = configured ?? DEFAULT_JOB_USER;
  const user = lookupHostUser(name);
  if (!user) {
    throw new SimConfigError(
      configured === undefined
        ? `the simulator runs as root, so it runs jobs as the host user ${name}, which does not exist: run \`schedflow setup\` as root (it runs \`${CREATE_JOB_USER.join(' ')}\`), or name an unprivileged user in jobUser (SCHEDFLOW_SIM_JOB_USER for the embedded simulator)`
        : `jobUser ${name} is not a user of this host (getent passwd ${name} knows none)`,
    );
  }
  if (user.uid === 0 || user.gid === 0) {
    throw new SimConfigError(
      `jobUser ${name} has uid ${user.uid} and gid ${user.gid}: jobs must run as an unprivileged user, never as root or root's group`,
    );
  }
  return user;
}

/**
 * The lowest uid of a person's account (Debian's UID_MIN): below it are system users (the
 * database's, the web server's), whose files a token must never reach by naming them.
 */
const FIRST_PERSON_UID = 1000;
/** The kernel's overflow uid (Debian's `nobody`): owns nothing a job should write as. */
const OVERFLOW_UID = 65534;

/**
 * Whom one submitter's jobs run as, given the simulator's job user (null: not root, its own).
 * As slurmd runs a job as its submitter, a submitter who is a person's account on this host
 * (uid at or over UID_MIN) runs as that account: its files are then its own, as on a cluster,
 * and the daemon's owner check of output (src/lib/file-tail.ts), which resolves the job's user
 * by name, finds them so. Any other submitter (a token's name with no account here, root, a
 * system user) runs as the job user. Looked up once per name.
 */
export class SubmitterUsers {
  private readonly known = new Map<string, JobUser>();

  constructor(private readonly jobUser: JobUser | null) {}

  runAs(submitter: string): JobUser | null {
    const fallback = this.jobUser;
    if (fallback === null) return null;
    let user = this.known.get(submitter);
    if (user === undefined) {
      const host = isHostUserName(submitter) ? lookupHostUser(submitter) : null;
      user = host && host.uid >= FIRST_PERSON_UID && host.uid !== OVERFLOW_UID && host.gid !== 0 ? host : fallback;
      this.known.set(submitter, user);
    }
    return user;
  }
}
