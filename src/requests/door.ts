import { SubmissionRefusedError } from '../errors.js';
import type { AccountReport } from '../sched/account-check.js';
import { ArraySyntaxError, DEFAULT_MAX_ARRAY_SIZE, parseArrayExpression } from '../sched/job-array.js';
import type { JobSpec } from '../sched/job-spec.js';
import type { Profile } from '../sched/profile.js';
import type { ProfileProblem } from '../sched/profile-check.js';
import { type ScopeReport, scopesApply } from '../sched/scope-check.js';

/** What stands in the way of a submission to one profile, known before it is sent. */
export interface ProfileDoor {
  /** The account the proxy token is bound to; null: not bound. */
  boundAccount: string | null;
  /** The scopes submitting needs that the token lacks. */
  missingScopes: string[];
  /** How the missing scopes are known. */
  scopesFrom?: 'probe' | 'declared' | 'not-applicable';
  /** The account charged when a job names none (the profile's `account`). */
  defaultAccount?: string | null;
  /** The Slurm user whose associations `associatedAccounts` are. */
  user?: string | null;
  /** The accounts the user has an association with; null or absent: not known, nothing refused. */
  associatedAccounts?: string[] | null;
  /** The profile's `maxArraySize`. Absent: Slurm's default, 1001. */
  maxArraySize?: number;
  /**
   * Why the profile cannot work now, as the daemon's check of it found (src/sched/profile-check.ts):
   * `kind` and one sentence with the fix. Null or absent: nothing known against it.
   */
  problem?: { kind: string; sentence: string } | null;
}

/**
 * What stands in the way of a submission to `profile`, from what the daemon has learnt of it:
 * the site proxy binds a token to one account and refuses (403) a job for another, and refuses
 * every submission of a token without `sched:jobs:manage`; without `scheddb:read` its end could
 * not be read from accounting. On plain slurmrestd (or with MUNGE) the profile's `account` is a
 * default, and Slurm lets the user charge the accounts of their associations (2045 otherwise).
 * An array past the cluster's MaxArraySize (the profile's `maxArraySize`) is refused by
 * slurmctld (2081). The daemon decides from it at its one door (src/requests/accept.ts), which
 * the API, the CLI (through the API) and pipelines all go through.
 */
export function profileDoor(
  profile: Profile,
  scopes: ScopeReport | undefined,
  accounts: AccountReport | undefined,
  problem: ProfileProblem | null = null,
): ProfileDoor {
  return {
    problem,
    boundAccount: scopesApply(profile) ? (profile.account ?? null) : null,
    missingScopes: scopes?.missing ?? [],
    scopesFrom: scopes?.source ?? 'probe',
    defaultAccount: profile.account ?? null,
    user: accounts?.user ?? null,
    associatedAccounts: accounts?.accounts ?? null,
    maxArraySize: profile.maxArraySize,
  };
}

/** The spec's members the door reads. */
export type DoorSpec = Pick<JobSpec, 'account' | 'array'>;

/** Why a submission of `spec` through this door cannot succeed; null when nothing known stands in the way. */
export function doorRefusal(profile: string, door: ProfileDoor, spec: DoorSpec): SubmissionRefusedError | null {
  // First: nothing else is worth saying of a job for a profile that cannot work now.
  const problem = problemRefusal(door);
  if (problem) return problem;
  // Then: nothing else is worth saying of an array no cluster of this profile would take.
  const array = arrayRefusal(profile, door, spec);
  if (array) return array;
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

/**
 * An array whose largest index is not below the profile's `maxArraySize`, read without listing
 * its indexes: before anything is recorded, a 4-million-task array wrote a row per task (1.46 GB)
 * for slurmctld to refuse (issue 30). MaxArraySize bounds the largest index, and so the count.
 * An expression that does not parse is left to the spec's own check, which names the mistake.
 */
function arrayRefusal(profile: string, door: ProfileDoor, spec: DoorSpec): SubmissionRefusedError | null {
  if (typeof spec.array !== 'string') return null;
  const limit = door.maxArraySize ?? DEFAULT_MAX_ARRAY_SIZE;
  let maxIndex: number;
  try {
    maxIndex = parseArrayExpression(spec.array).maxIndex;
  } catch (error) {
    if (error instanceof ArraySyntaxError) return null;
    throw error;
  }
  if (maxIndex < limit) return null;
  return new SubmissionRefusedError(
    'SCHEDFLOW_ERR_ARRAY_TOO_LARGE',
    `the array names index ${maxIndex}, but profile "${profile}" takes indexes 0 to ${limit - 1} (maxArraySize ${limit}, the cluster's MaxArraySize) and Slurm would refuse it (2081): submit arrays of indexes below ${limit}, offsetting the work in the script, or raise maxArraySize in the profile if the cluster allows more`,
  );
}

/**
 * A profile whose check failed: its token refused, the wrong flavor or version, no scheduler at
 * its url; or no answer at all since the daemon started (a mistyped url looks so, and nothing
 * tells it from an outage then: refused with a retryable code). Queued, such a request sat
 * `queued` for minutes with no word anywhere (issue 31). A profile that did connect and then
 * went down is not refused: its requests wait out the outage in the queue, as before.
 */
function problemRefusal(door: ProfileDoor): SubmissionRefusedError | null {
  const problem = door.problem;
  if (!problem) return null;
  return new SubmissionRefusedError(
    problem.kind === 'unreachable' ? 'SCHEDFLOW_ERR_PROFILE_NOT_CONNECTED' : 'SCHEDFLOW_ERR_PROFILE_UNUSABLE',
    `${problem.sentence} (nothing was queued)`,
  );
}

function scopeDoorRefusal(profile: string, door: ProfileDoor): SubmissionRefusedError | null {
  if (door.missingScopes.length === 0) return null;
  return new SubmissionRefusedError(
    'SCHEDFLOW_ERR_PROFILE_SCOPE_MISSING',
    `profile "${profile}"'s token lacks scope ${door.missingScopes.join(' and ')} (${door.scopesFrom === 'declared' ? 'as the profile declares' : 'the proxy answered 403'}), so the job could not be submitted or followed: ask the operator for a token with it, or use another profile`,
  );
}

/** What the daemon has learnt of each profile (its scheduler clients: src/sched/client-registry.ts). */
export interface ProfileReports {
  scopes(profile: string): ScopeReport | undefined;
  accounts(profile: string): AccountReport | undefined;
  problem(profile: string): ProfileProblem | null;
}

/** The door's refusal of some specs to one profile: the first that cannot succeed; null for none (or an unknown profile). */
export type RefusalPolicy = (profile: string, specs: readonly DoorSpec[]) => SubmissionRefusedError | null;

/**
 * The door policy of a daemon, written once for every way in (a request, a retry of array
 * tasks, a pipeline run's steps): the door of each profile as known now, asked per spec.
 */
export function refusalPolicy(profiles: ReadonlyMap<string, Profile>, reports: ProfileReports): RefusalPolicy {
  return (profile, specs) => {
    const p = profiles.get(profile);
    if (!p) return null;
    const door = profileDoor(p, reports.scopes(profile), reports.accounts(profile), reports.problem(profile));
    for (const spec of specs) {
      const refused = doorRefusal(profile, door, spec);
      if (refused) return refused;
    }
    return null;
  };
}
