import type { ApiScope } from '../db/schema.js';

/**
 * Whether a token's scopes grant `scope`: `admin` holds every scope. Here,
 * beside api/ and ui/, because both ask it: the API of every route's token,
 * the web UI of every session's.
 */
export function hasScope(scopes: readonly ApiScope[], scope: ApiScope): boolean {
  return scopes.includes(scope) || scopes.includes('admin');
}
