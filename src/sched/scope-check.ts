import type { Profile } from './profile.js';

/**
 * What a profile's token may do, known before a submission fails on it. The site proxy's
 * tokens carry scopes (`sched:read`, `scheddb:read`, `sched:jobs:manage`) and offer no way to
 * list them, so each is learnt from the answer to one harmless request that needs it: 403
 * means the scope is missing, any other answer from the proxy that it is there. A profile may
 * instead declare them (`scopes:` in its file). Plain slurmrestd and MUNGE have no scopes.
 */

export const SCOPES = ['sched:read', 'scheddb:read', 'sched:jobs:manage'] as const;
export type ScopeName = (typeof SCOPES)[number];

/** Without these a submission cannot succeed (or cannot be followed to its end). */
export const SUBMIT_SCOPES: readonly ScopeName[] = ['sched:jobs:manage', 'scheddb:read'];

export type ScopeState = 'granted' | 'missing' | 'unknown';

export interface ScopeReport {
  /** `probe`: learnt from the proxy's answers; `declared`: the profile's `scopes:`; `not-applicable`: no scopes. */
  source: 'probe' | 'declared' | 'not-applicable';
  scopes: Partial<Record<ScopeName, ScopeState>>;
  /** The scopes submitting needs that the token does not have. */
  missing: ScopeName[];
  /** When it was learnt (ms). */
  checkedAt: number;
  /** In words, for the banner, /readyz and the Profiles page. */
  detail: string;
}

/** Whether the profile's credential has scopes at all: only a token sent to the site proxy does. */
export function scopesApply(profile: Profile): boolean {
  return profile.flavor === 'proxy' && profile.auth.type !== 'munge';
}

export function notApplicable(profile: Profile, at = Date.now()): ScopeReport {
  const why =
    profile.flavor === 'slurmrestd'
      ? 'plain slurmrestd: no scopes (Slurm decides what the user may do)'
      : 'MUNGE: the user’s own rights on the cluster, no scopes';
  return { source: 'not-applicable', scopes: {}, missing: [], checkedAt: at, detail: `scopes not applicable (${why})` };
}

/** The report of scopes learnt one by one (probe) or listed by the profile (declared). */
export function scopeReport(
  source: 'probe' | 'declared',
  scopes: Partial<Record<ScopeName, ScopeState>>,
  at = Date.now(),
): ScopeReport {
  const missing = SUBMIT_SCOPES.filter((s) => scopes[s] === 'missing');
  const unknown = SCOPES.filter((s) => scopes[s] === 'unknown');
  const lacking = SCOPES.filter((s) => scopes[s] === 'missing');
  const words = [
    lacking.length
      ? `token lacks ${lacking.join(', ')}${missing.length ? ': submissions to this profile are refused; ask the proxy’s operator for a token with them, or use another profile' : ''}`
      : unknown.length === 0
        ? `token has ${SCOPES.join(', ')}`
        : null,
    // The token itself was accepted (the check at connect), so this is the proxy not answering
    // these requests now (a 5xx, a 429, a timeout): a passing matter, asked again.
    unknown.length
      ? `could not tell ${unknown.join(', ')}: the proxy did not answer those requests now (asked again later)`
      : null,
  ].filter(Boolean);
  return {
    source,
    scopes,
    missing,
    checkedAt: at,
    detail: `${words.join('; ')} (${source === 'declared' ? 'as the profile declares' : 'learnt from the proxy'})`,
  };
}

/** A profile's declared scopes (`scopes:` in its file): what is not listed is missing. */
export function declaredReport(declared: readonly string[], at = Date.now()): ScopeReport {
  return scopeReport(
    'declared',
    Object.fromEntries(SCOPES.map((s) => [s, declared.includes(s) ? 'granted' : 'missing'])),
    at,
  );
}
