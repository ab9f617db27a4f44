import { createHash, timingSafeEqual } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import { isLoopback } from './loopback.js';
import { MungeUnavailableError, unmunge } from './munge.js';
import type { Scope, TokenEntry } from './sim-config.js';

/** Who a request acts for, after the proxy has checked its credential. */
export type Principal =
  | { kind: 'bearer'; user: string; account: string; scopes: ReadonlySet<Scope> }
  | { kind: 'munge'; user: string; uid: number };

export type AuthResult = { ok: true; principal: Principal } | { ok: false; status: 401; message: string };

export interface AuthHeaders {
  authorization?: string | undefined;
  userName?: string | undefined;
  userToken?: string | undefined;
}

/** The MUNGE contract: exactly this TTL (`munge -t 5`), no more, no less. */
export const MUNGE_TTL_SEC = 5;

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

function localAddresses(): Set<string> {
  const found = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const info of list ?? []) found.add(info.address);
  }
  return found;
}

/**
 * Checks bearer tokens (in constant time, against every token) and MUNGE
 * credentials. Knows nothing of HTTP beyond the three headers it reads.
 */
export class Authenticator {
  private readonly tokens: { hash: Buffer; entry: TokenEntry }[];

  constructor(
    tokens: ReadonlyMap<string, TokenEntry>,
    private readonly options: { munge: boolean },
  ) {
    this.tokens = [...tokens].map(([token, entry]) => ({ hash: digest(token), entry }));
  }

  private findToken(token: string): TokenEntry | undefined {
    const presented = digest(token);
    let found: TokenEntry | undefined;
    // No early exit: the time taken does not depend on which token matched.
    for (const candidate of this.tokens) {
      if (timingSafeEqual(candidate.hash, presented)) found = candidate.entry;
    }
    return found;
  }

  async authenticate(headers: AuthHeaders, remoteAddress: string): Promise<AuthResult> {
    const fail = (message: string): AuthResult => ({ ok: false, status: 401, message });
    const auth = headers.authorization?.trim();
    if (auth) {
      const space = auth.indexOf(' ');
      const scheme = (space > 0 ? auth.slice(0, space) : auth).toLowerCase();
      const credential = space > 0 ? auth.slice(space + 1).trim() : '';
      if (credential === '') return fail('malformed Authorization header: no credential after the scheme');
      if (scheme === 'bearer') return this.bearer(credential);
      if (scheme === 'munge') return this.munge(credential, remoteAddress);
      return fail(`unsupported authorization scheme "${scheme}" (use Bearer or MUNGE)`);
    }
    if (headers.userToken !== undefined || headers.userName !== undefined) {
      if (!headers.userToken || !headers.userName) {
        return fail('X-Sched-User-Name and X-Sched-User-Token must be sent together');
      }
      const result = this.bearer(headers.userToken);
      if (result.ok && result.principal.user !== headers.userName) {
        return fail('X-Sched-User-Name does not match the user the token was issued to');
      }
      return result;
    }
    return fail(
      'authentication required: send Authorization: Bearer <token>, the X-Sched-User-Name and X-Sched-User-Token pair, or Authorization: MUNGE <credential>',
    );
  }

  private bearer(token: string): AuthResult {
    const entry = this.findToken(token);
    if (!entry) return { ok: false, status: 401, message: 'invalid or expired token' };
    return {
      ok: true,
      principal: { kind: 'bearer', user: entry.user, account: entry.account, scopes: new Set(entry.scopes) },
    };
  }

  private async munge(credential: string, remoteAddress: string): Promise<AuthResult> {
    const fail = (message: string): AuthResult => ({ ok: false, status: 401, message });
    if (!this.options.munge) return fail('MUNGE authentication is disabled on this service');
    let decoded: Awaited<ReturnType<typeof unmunge>>;
    try {
      decoded = await unmunge(credential);
    } catch (error) {
      if (error instanceof MungeUnavailableError) return fail(`MUNGE credential cannot be checked: ${error.message}`);
      throw error;
    }
    if (decoded.statusCode !== 0) return fail(`MUNGE credential rejected: ${decoded.status}`);
    if (decoded.ttlSec !== MUNGE_TTL_SEC) {
      return fail(`MUNGE credential TTL is ${decoded.ttlSec}s; it must be exactly ${MUNGE_TTL_SEC}s (munge -n -t 5)`);
    }
    // The credential must come from the machine that sends the request.
    const sameHost = isLoopback(remoteAddress)
      ? isLoopback(decoded.encodeAddress) || localAddresses().has(decoded.encodeAddress)
      : remoteAddress.replace(/^::ffff:/, '') === decoded.encodeAddress;
    if (!sameHost) return fail('MUNGE credential was not generated on the host that sent the request');
    return { ok: true, principal: { kind: 'munge', user: decoded.userName, uid: decoded.uid } };
  }
}

/** MUNGE callers have the access of the user on the cluster: every scope. */
export function hasScope(principal: Principal, scope: Scope): boolean {
  return principal.kind === 'munge' || principal.scopes.has(scope);
}
