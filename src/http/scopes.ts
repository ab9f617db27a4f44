import type { ApiScope } from '../db/schema.js';
import type { TokenInfo } from '../db/tokens.js';
import type { Viewer } from '../views/views.js';

/**
 * Whether a token's scopes grant `scope`: `admin` holds every scope. Here,
 * beside api/ and ui/, because both ask it: the API of every route's token,
 * the web UI of every session's.
 */
export function hasScope(scopes: readonly ApiScope[], scope: ApiScope): boolean {
  return scopes.includes(scope) || scopes.includes('admin');
}

/** What a token may see of a view: a webhook URL whole, or without its credentials (admins only). */
export const viewerOf = (token: TokenInfo | null): Viewer => ({
  admin: token !== null && hasScope(token.scopes, 'admin'),
});
