import { SubmissionRefusedError } from '../errors.js';
import type { JobSpec } from '../sched/job-spec.js';
import type { Profile } from '../sched/profile.js';
import { type ScopeReport, scopesApply } from '../sched/scope-check.js';

/**
 * Why a submission to `profile` cannot succeed, known before it is recorded or sent: the site
 * proxy binds a token to one account and refuses (403) a job for another, and refuses every
 * submission of a token without `sched:jobs:manage`; without `scheddb:read` its end could not
 * be read from accounting. Null when nothing known stands in the way.
 *
 * Only a token sent to the proxy is bound to its account: on plain slurmrestd (or with MUNGE)
 * the profile's `account` is a default, and Slurm decides which accounts the user may use.
 */
export function submissionRefusal(
  profile: Profile,
  scopes: ScopeReport | undefined,
  spec: Pick<JobSpec, 'account'>,
): SubmissionRefusedError | null {
  if (scopesApply(profile) && profile.account && spec.account && spec.account !== profile.account) {
    return new SubmissionRefusedError(
      'SCHEDFLOW_ERR_ACCOUNT_MISMATCH',
      `the job names account "${spec.account}", but profile "${profile.name}"'s token is bound to account "${profile.account}" and the scheduler would refuse it (403): leave account out or use "${profile.account}"`,
    );
  }
  return scopeRefusal(profile, scopes);
}

/** The refusal for every submission to a profile whose token lacks a scope submitting needs. */
export function scopeRefusal(profile: Profile, scopes: ScopeReport | undefined): SubmissionRefusedError | null {
  if (!scopes || scopes.missing.length === 0) return null;
  return new SubmissionRefusedError(
    'SCHEDFLOW_ERR_PROFILE_SCOPE_MISSING',
    `profile "${profile.name}"'s token lacks scope ${scopes.missing.join(' and ')} (${scopes.source === 'declared' ? 'as the profile declares' : 'the proxy answered 403'}), so the job could not be submitted or followed: ask the operator for a token with it, or use another profile`,
  );
}
