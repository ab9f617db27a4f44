import { execFile } from 'node:child_process';
import { userInfo } from 'node:os';

/**
 * The uid a user name has on the daemon's host, for the owner check of a job's output
 * (src/lib/file-tail.ts). The scheduler names a job's user by name; Slurm runs the job as that
 * user, so its output files belong to that user's uid wherever the name resolves the same (a
 * shared directory service, or the same host). A name with no account here (a simulator's
 * token user) resolves to null: the owner cannot be told, and is not checked.
 */

/** How long `getent` may take: a directory service (LDAP, SSSD) that hangs must not hold a reader. */
const LOOKUP_TIMEOUT_MS = 2_000;
/** A name not found is asked about again after this: an account may be made meanwhile. */
const MISS_TTL_MS = 5 * 60_000;
/** A portable user name (POSIX, plus the `$` of machine accounts); anything else is not looked up. */
const USER_NAME = /^[A-Za-z0-9_.][A-Za-z0-9_.-]*\$?$/;

/** Whether `name` may be looked up as a host user: never one `getent` could read as an option. */
export function isHostUserName(name: string): boolean {
  return USER_NAME.test(name);
}

/** The uid and gid of `getent passwd NAME`'s answer (its first line); null when it has none. */
export function passwdIds(answer: string): { uid: number; gid: number } | null {
  const [, , uid, gid] = answer.split('\n')[0]?.split(':') ?? [];
  const ids = { uid: Number(uid), gid: Number(gid) };
  return uid && gid && Number.isInteger(ids.uid) && ids.uid >= 0 && Number.isInteger(ids.gid) && ids.gid >= 0
    ? ids
    : null;
}

const found = new Map<string, number>();
const misses = new Map<string, number>();
const pending = new Map<string, Promise<number | null | undefined>>();

/** A uid; null: no such user (exit 2); undefined: not told (a timeout, no getent), not kept. */
function getentUid(name: string): Promise<number | null | undefined> {
  return new Promise((resolve) => {
    // No shell, and the name checked above, so it cannot be read as an option.
    execFile('getent', ['passwd', name], { timeout: LOOKUP_TIMEOUT_MS }, (error, stdout) => {
      if (error) return resolve(error.code === 2 ? null : undefined);
      resolve(passwdIds(stdout)?.uid ?? null);
    });
  });
}

/** The host uid of `name`; null when it has none here or it cannot be told. Cached. */
export async function hostUidOf(name: string | null | undefined): Promise<number | null> {
  if (!name || !isHostUserName(name)) return null;
  const known = found.get(name);
  if (known !== undefined) return known;
  const missedAt = misses.get(name);
  if (missedAt !== undefined && Date.now() - missedAt < MISS_TTL_MS) return null;
  const own = process.getuid?.();
  if (own !== undefined && name === userInfo().username) {
    found.set(name, own);
    return own;
  }
  let lookup = pending.get(name);
  if (!lookup) {
    lookup = getentUid(name).finally(() => pending.delete(name));
    pending.set(name, lookup);
  }
  const uid = await lookup;
  // A lookup that timed out (a loaded host, a slow directory) is asked again next time: kept
  // as a miss, it said "no such user" for five minutes of a user that has one.
  if (uid === undefined) return null;
  if (uid === null) misses.set(name, Date.now());
  else {
    misses.delete(name);
    found.set(name, uid);
  }
  return uid;
}

/**
 * The uid a simulator started as root in this process (the embedded one) runs the jobs of
 * submitters with no account here as (its job user): theirs is then known too.
 */
let unmappedJobUid: number | null = null;

/** Said by the composition root when the embedded simulator runs jobs as its job user. */
export function setUnmappedJobUid(uid: number | null): void {
  unmappedJobUid = uid;
}

/**
 * The uid a job of scheduler user `name` ran as on this host: the host's account of that name
 * (Slurm runs a job as its submitter), else the embedded simulator's job user, else null.
 */
export async function jobUidOf(name: string | null | undefined): Promise<number | null> {
  return (await hostUidOf(name)) ?? unmappedJobUid;
}
