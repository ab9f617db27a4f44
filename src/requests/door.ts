import type { ProfileDoor } from '../daemon-info.js';
import { SubmissionRefusedError } from '../errors.js';
import type { AccountReport } from '../sched/account-check.js';
import type { JobSpec } from '../sched/job-spec.js';
import type { Profile } from '../sched/profile.js';
import { type ScopeReport, scopesApply } from '../sched/scope-check.js';

/**
 * What stands in the way of a submission to `profile`, from what the daemon has learnt of it:
 * the site proxy binds a token to one account and refuses (403) a job for another, and refuses
 * every submission of a token without `sched:jobs:manage`; without `scheddb:read` its end could
 * not be read from accounting. On plain slurmrestd (or with MUNGE) the profile's `account` is a
 * default, and Slurm lets the user charge the accounts of their associations (2045 otherwise).
 * The daemon decides from it, and writes it to daemon.json for the CLI to decide the same way.
 */
export function profileDoor(
  profile: Profile,
  scopes: ScopeReport | undefined,
  accounts: AccountReport | undefined,
): ProfileDoor {
  return {
    boundAccount: scopesApply(profile) ? (profile.account ?? null) : null,
    missingScopes: scopes?.missing ?? [],
    scopesFrom: scopes?.source ?? 'probe',
    defaultAccount: profile.account ?? null,
    user: accounts?.user ?? null,
    associatedAccounts: accounts?.accounts ?? null,
  };
}

/** Why a submission of `spec` through this door cannot succeed; null when nothing known stands in the way. */
export function doorRefusal(
  profile: string,
  door: ProfileDoor,
  spec: Pick<JobSpec, 'account'>,
): SubmissionRefusedError | null {
  const bound = door.boundAccount;
  if (bound && spec.account && spec.account !== bound) {
    return new SubmissionRefusedError(
      'SCHEDFLOW_ERR_ACCOUNT_MISMATCH',
      `the job names account "${spec.account}", but profile "${profile}"'s token is bound to account "${bound}" and the scheduler would refuse it (403): leave account out or use "${bound}"`,
    );
  }
  const scopes = scopeDoorRefusal(profile, door);
  if (scopes) return scopes;
  // Only what slurmdbd said: accounts not known (null) refuse nothing.
  const allowed = door.associatedAccounts;
  const account = spec.account ?? door.defaultAccount ?? undefined;
  if (allowed && account && !allowed.includes(account)) {
    const whose = spec.account ? 'the job names' : `profile "${profile}" charges by default`;
    return new SubmissionRefusedError(
      'SCHEDFLOW_ERR_ACCOUNT_NOT_ASSOCIATED',
      `${whose} account "${account}", but user ${door.user ?? '?'} has no association with it and Slurm would refuse the job (2045): use ${allowed.map((a) => `"${a}"`).join(' or ')}${spec.account ? '' : ' (account: in the job, or fix the profile)'}`,
    );
  }
  return null;
}

function scopeDoorRefusal(profile: string, door: ProfileDoor): SubmissionRefusedError | null {
  if (door.missingScopes.length === 0) return null;
  return new SubmissionRefusedError(
    'SCHEDFLOW_ERR_PROFILE_SCOPE_MISSING',
    `profile "${profile}"'s token lacks scope ${door.missingScopes.join(' and ')} (${door.scopesFrom === 'declared' ? 'as the profile declares' : 'the proxy answered 403'}), so the job could not be submitted or followed: ask the operator for a token with it, or use another profile`,
  );
}

/** The refusal of a submission of `spec` to `profile`, from the daemon's reports. */
export function submissionRefusal(
  profile: Profile,
  scopes: ScopeReport | undefined,
  accounts: AccountReport | undefined,
  spec: Pick<JobSpec, 'account'>,
): SubmissionRefusedError | null {
  return doorRefusal(profile.name, profileDoor(profile, scopes, accounts), spec);
}
