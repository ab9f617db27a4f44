import { hasScope } from '../access/principal.js';
import type { TokenInfo } from '../db/tokens.js';
import type { Viewer } from '../views/views.js';

/** What a token may see of a view: a webhook URL whole, or without its credentials (admins only). */
export const viewerOf = (token: TokenInfo | null): Viewer => ({
  admin: token !== null && hasScope(token.scopes, 'admin'),
});
