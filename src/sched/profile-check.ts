import { SchedflowError } from '../errors.js';
import type { Profile } from './profile.js';
import { MungeError, NetworkError, RequestTimeoutError, type SchedApiError } from './sched-errors.js';

/**
 * Whether a profile can work, as one authenticated check tells it at start and on demand
 * (`schedflow sched check`): before this, a mistyped URL, a refused token or the wrong flavor
 * was said only in JSON log lines, while the banner, /readyz and the Profiles page looked
 * healthy and submissions sat `queued` (issue 31). Each problem is one plain sentence with
 * its fix, said the same way in every place that shows it.
 */

/**
 * `unreachable`: no answer at the address (which may pass by itself: a scheduler down, or a
 * mistyped URL); `credentials`: the token (or MUNGE credential) refused, 401/403 on the check;
 * `flavor`: a proxy where the profile says slurmrestd, or the reverse; `version`: no API version
 * both sides speak; `not-scheduler`: something answers at the address, but no scheduler API.
 */
export type ProfileProblemKind = 'unreachable' | 'credentials' | 'flavor' | 'version' | 'not-scheduler';

export interface ProfileProblem {
  kind: ProfileProblemKind;
  /** One plain sentence naming the profile, what is wrong and the fix. Never a secret. */
  sentence: string;
}

/** A check that found the profile cannot work as written: nothing sent to it would succeed. */
export class ProfileCheckError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_PROFILE_UNUSABLE';
  constructor(
    readonly kind: Exclude<ProfileProblemKind, 'unreachable'>,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Where the profile's credential comes from, in words that name no secret. */
export function credentialSource(profile: Profile): string {
  const { auth } = profile;
  if (auth.type === 'munge') return 'the MUNGE credential of the user schedflow runs as';
  const where = auth.tokenFile ? `the token in ${auth.tokenFile}` : `the token in $${auth.tokenEnv}`;
  return auth.type === 'header-pair' ? `${where} (user ${auth.user})` : where;
}

/** The sentence of a refused credential: the fix is a valid token, or the right scheduler. */
export function credentialsRefused(
  profile: Profile,
  status: number | null,
  why: string | null,
  cause?: unknown,
): ProfileCheckError {
  const answered = status === null ? '' : ` (${status}${why ? `: ${why}` : ''})`;
  const fix =
    profile.auth.type === 'munge'
      ? 'check that munged runs with the cluster’s key and that the user is known to Slurm'
      : `put a valid, unexpired token there${profile.flavor === 'slurmrestd' ? ' (scontrol token username=<user>)' : ' (ask the proxy’s operator for one)'}`;
  return new ProfileCheckError(
    'credentials',
    `profile "${profile.name}": the scheduler at ${profile.url} refused ${credentialSource(profile)}${answered}: ${fix}`,
    { cause },
  );
}

/** A proxy where the profile says slurmrestd, or the reverse. */
export function wrongFlavor(profile: Profile, evidence: string): ProfileCheckError {
  const is = profile.flavor === 'proxy' ? 'plain slurmrestd' : 'the site’s scheduler proxy';
  const other = profile.flavor === 'proxy' ? 'slurmrestd' : 'proxy';
  const auth =
    other === 'slurmrestd'
      ? ' with the user’s JWT (auth.type: header-pair and auth.user, or bearer)'
      : ' with the proxy’s bearer token';
  return new ProfileCheckError(
    'flavor',
    `profile "${profile.name}": ${profile.url} is ${is}, not ${profile.flavor === 'proxy' ? 'the scheduler proxy' : 'plain slurmrestd'} as the profile says (${evidence}): set flavor: ${other} in the profile${auth}, or point url at the ${profile.flavor === 'proxy' ? 'proxy' : 'slurmrestd'}`,
  );
}

/** Something answers at the address, but neither flavor's API. */
export function notScheduler(profile: Profile, evidence: string): ProfileCheckError {
  return new ProfileCheckError(
    'not-scheduler',
    `profile "${profile.name}": no scheduler API answers at ${profile.url} (${evidence}): check url in the profile (the base address, without /sched or /slurm)`,
  );
}

/** No version both sides speak, or a pinned one the scheduler does not serve. */
export function unsupportedVersion(profile: Profile, detail: string): ProfileCheckError {
  return new ProfileCheckError('version', `profile "${profile.name}": ${detail}`);
}

/**
 * The problem a failed check found, from the error it failed with: a ProfileCheckError says it;
 * no answer (refused, reset, DNS, timeout) is `unreachable` with the address tried; anything
 * else the scheduler answered that is not one of these (a 5xx, a 429) is an outage, said so.
 */
export function problemOf(profile: Profile, error: unknown): ProfileProblem {
  if (error instanceof ProfileCheckError) return { kind: error.kind, sentence: error.message };
  if (error instanceof NetworkError || error instanceof RequestTimeoutError) {
    const cause = error.detail.message ?? error.code;
    const why = error instanceof RequestTimeoutError ? `no answer in time: ${cause}` : networkWords(cause);
    return {
      kind: 'unreachable',
      sentence: `profile "${profile.name}": not connected: cannot reach the scheduler at ${profile.url} (${why}): check url in the profile, and that the scheduler runs there and this host may reach it`,
    };
  }
  if (error instanceof MungeError) {
    return { kind: 'credentials', sentence: `profile "${profile.name}": ${error.message}` };
  }
  const status = (error as SchedApiError | undefined)?.detail?.status ?? null;
  const message = error instanceof Error ? error.message : String(error);
  return {
    kind: 'unreachable',
    sentence: `profile "${profile.name}": not connected: the scheduler at ${profile.url} answered but could not be used now (${status === null ? message : `HTTP ${status}: ${message}`}): it is asked again shortly; if it lasts, check the scheduler`,
  };
}

/** Node's error codes, as a person reads them. */
function networkWords(cause: string): string {
  if (/ECONNREFUSED/.test(cause)) return 'connection refused: nothing listens at that port';
  if (/ENOTFOUND|EAI_AGAIN/.test(cause)) return 'no such host name';
  if (/EHOSTUNREACH/.test(cause)) return 'host unreachable';
  if (/ECONNRESET|EPIPE|other side closed/i.test(cause)) return 'connection reset';
  return cause;
}
