import type { Profile } from './profile.js';

/**
 * Which accounts a profile's user may charge, known before a submission fails on it. On plain
 * slurmrestd (and with MUNGE there) Slurm decides through the user's associations in slurmdbd
 * (`sacctmgr add user … account=`): a job naming an account the user has none with is refused
 * (error 2045). The associations are read at start and now and then afterwards from the
 * accounting API. On the site proxy the token is bound to one account instead (door.ts), and
 * its contract offers no associations endpoint.
 */
export interface AccountReport {
  /** `associations`: read from slurmdbd; `unknown`: could not be read (never refuses). */
  source: 'associations' | 'unknown';
  /** The Slurm user whose associations these are; null when it could not be told. */
  user: string | null;
  /** Accounts the user has an association with on this cluster; null when unknown. */
  accounts: string[] | null;
  /** The profile's `account` when the user has no association with it: every job without its own is refused. */
  defaultNotAssociated: string | null;
  /** When it was learnt (ms). */
  checkedAt: number;
  /** In words, for the banner, /readyz and the Profiles page. */
  detail: string;
}

/** Whether a profile's accounts are Slurm's associations: plain slurmrestd, whatever the credential. */
export function accountsApply(profile: Profile): boolean {
  return profile.flavor === 'slurmrestd';
}

/** What is known when the associations could not be read: submissions go through, Slurm decides. */
export function accountsUnknown(user: string | null, why: string, at = Date.now()): AccountReport {
  return {
    source: 'unknown',
    user,
    accounts: null,
    defaultNotAssociated: null,
    checkedAt: at,
    detail: `accounts unknown: ${why} (Slurm decides at submit; checked again later)`,
  };
}

/** The report of the accounts a user's associations allow. */
export function associationsReport(
  profile: Profile,
  user: string,
  accounts: readonly string[],
  at = Date.now(),
): AccountReport {
  const sorted = [...new Set(accounts)].sort();
  // slurmdbd knows no association of the user: a cluster that does not enforce them lets the
  // user charge any account, so nothing is refused on it.
  if (sorted.length === 0) return accountsUnknown(user, `slurmdbd lists no association of user "${user}"`, at);
  const defaultNotAssociated = profile.account && !sorted.includes(profile.account) ? profile.account : null;
  return {
    source: 'associations',
    user,
    accounts: sorted,
    defaultNotAssociated,
    checkedAt: at,
    detail: defaultNotAssociated
      ? `user ${user} has no association with the profile's account "${defaultNotAssociated}" (only ${sorted.join(', ')}): jobs that name no other are refused`
      : `user ${user} may charge account${sorted.length > 1 ? 's' : ''} ${sorted.join(', ')} (from slurmdbd's associations)`,
  };
}
