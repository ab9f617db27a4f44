import { DEFAULT_OWNER } from '../../access/principal.js';
import type { OidcMapping } from '../../config/oidc-settings.js';
import { API_SCOPES, type ApiScope } from '../../db/schema.js';

/** What a single-sign-on user is granted: one owner and its scopes. */
export interface OidcGrant {
  owner: string;
  scopes: ApiScope[];
}

/** The values of a claim: a text, or the texts of a list (groups); anything else holds none. */
export function claimValues(claim: unknown): string[] {
  if (typeof claim === 'string') return [claim];
  if (Array.isArray(claim)) return claim.filter((v): v is string => typeof v === 'string');
  return [];
}

/**
 * The grant of a user whose claim holds `values`, or null when no entry of the map matches (the
 * login is refused). A principal has one owner, so with several matching entries:
 *
 * - the owner is the one named by the first matching entry (in the map's order) that names
 *   one, else `default`;
 * - the scopes are those of every matching entry that names that owner or none; an entry naming
 *   another owner adds nothing, as its scopes were granted on that owner's things alone.
 *
 * So a user in `hpc-admins` (scopes [admin], no owner) and `lab-a` (owner lab-a) is an admin
 * acting as lab-a; one in `lab-a` and `lab-b` acts as whichever is listed first.
 */
export function grantOf(map: readonly OidcMapping[], values: readonly string[]): OidcGrant | null {
  const held = new Set(values);
  const matched = map.filter((m) => held.has(m.value));
  if (matched.length === 0) return null;
  const owner = matched.find((m) => m.owner !== undefined)?.owner ?? DEFAULT_OWNER;
  const granted = new Set<ApiScope>();
  for (const m of matched) {
    if (m.owner === undefined || m.owner === owner) for (const s of m.scopes) granted.add(s);
  }
  return { owner, scopes: API_SCOPES.filter((s) => granted.has(s)) };
}
