import type { FastifyInstance, FastifyRequest } from 'fastify';
import { grants } from '../../access/visibility.js';
import type { History } from '../../db/history.js';
import type { ApiScope } from '../../db/schema.js';
import { findToken, type TokenInfo, touchToken } from '../../db/tokens.js';
import { ForbiddenApiError, UnauthorizedApiError } from './api-errors.js';
import { isLocalCredential, type LocalCredential } from './local-credential.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a route needs; routes without one (health, metrics, docs) need no token. */
    scope?: ApiScope;
  }
  interface FastifyRequest {
    /** The caller's token, once authenticated (null on routes that need none). */
    apiToken: TokenInfo | null;
  }
}

const BEARER = /^Bearer[ ]+([A-Za-z0-9._~+/=-]+)[ ]*$/;

/**
 * Bearer token authentication and scopes, as the first hook of every request:
 * 401 for a missing, malformed, unknown or revoked token; 403 naming the scope
 * a valid token lacks. `admin` holds every scope; `audit` lets read routes through (src/access/visibility.ts). `local`: the CLI's credential of this start
 * (src/http/api/local-credential.ts), taken beside the tokens of the history.
 */
export function registerAuth(app: FastifyInstance, store: History, local?: LocalCredential): void {
  app.decorateRequest('apiToken', null);
  app.addHook('onRequest', async (request) => {
    const scope = request.routeOptions.config.scope;
    if (!scope) return;
    const token = await authenticate(store, request, local);
    if (!grants(token.scopes, scope)) {
      throw new ForbiddenApiError(
        `this token (${token.name}) lacks the "${scope}" scope this route needs; it has: ${token.scopes.join(', ')}`,
      );
    }
    request.apiToken = token;
    // The CLI's credential has no row to touch: it lives as long as this process.
    if (token !== local?.info) await touchToken(store, token.id);
  });
}

async function authenticate(
  store: History,
  request: FastifyRequest,
  local: LocalCredential | undefined,
): Promise<TokenInfo> {
  const header = request.headers.authorization;
  if (!header) {
    throw new UnauthorizedApiError(
      'missing Authorization: Bearer <token> (make a token with: schedflow tokens create --name <name> --scopes read,submit)',
    );
  }
  const match = BEARER.exec(header);
  if (!match?.[1]) throw new UnauthorizedApiError('the Authorization header must be "Bearer <token>"');
  if (local && isLocalCredential(local, match[1])) return local.info;
  const found = await findToken(store, match[1]);
  switch (found.kind) {
    case 'valid':
      return found.token;
    case 'revoked':
      throw new UnauthorizedApiError('this API token has been revoked');
    case 'unknown':
      throw new UnauthorizedApiError('unknown API token');
  }
}
