import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { cliActor, DEFAULT_OWNER, type Principal, tokenActor } from '../../access/principal.js';
import type { ApiScope } from '../../db/schema.js';
import { hashToken, type TokenInfo } from '../../db/tokens.js';
import { escapeControls } from '../../lib/control-characters.js';

/**
 * The CLI's credential for the local API: `schedflow jobs submit`, `cancel`, `retry-tasks`,
 * `resubmit` and `runs trigger`, `cancel` go through the same routes as a lab service's token,
 * so every job request is accepted by the one door (src/requests/accept.ts). It is made afresh
 * at each start of the process serving the API, kept here only as its hash, and given to the CLI
 * in an owner-only file of the data dir (src/daemon-info.ts, `local-api.json`): whoever can read
 * that file can already read the history and the Redis URL beside it. It is never logged, never
 * stored in the history, and not a login of the web UI.
 */

/** The id a request's token carries when it is the CLI's (never a row of the token table). */
export const LOCAL_CLI_TOKEN_ID = 'cli-local';

/**
 * What the CLI does through the API: read, submit, cancel, hold and update, on every owner's requests. Whoever
 * can read the credential's file can read the whole history beside it, so the CLI is the host's
 * operator: an admin, whose requests belong to `default` unless it names another owner.
 */
const CLI_SCOPES: readonly ApiScope[] = ['admin'];

export interface LocalCredential {
  /** Hex SHA-256 of the token, as the token table stores its own. */
  readonly hash: string;
  readonly info: TokenInfo;
}

/** A new credential: the token for the file, and what the API keeps of it. */
export function makeLocalCredential(at = Date.now()): { token: string; credential: LocalCredential } {
  const token = `sfc_${randomBytes(32).toString('base64url')}`;
  return {
    token,
    credential: {
      hash: hashToken(token),
      info: {
        id: LOCAL_CLI_TOKEN_ID,
        name: 'cli (local)',
        scopes: [...CLI_SCOPES],
        owner: DEFAULT_OWNER,
        profiles: null,
        maxInFlight: null,
        maxPerDay: null,
        createdAt: at,
        lastUsedAt: null,
        revokedAt: null,
      },
    },
  };
}

/** Whether `presented` is the credential, compared in constant time. */
export function isLocalCredential(credential: LocalCredential, presented: string): boolean {
  const wanted = Buffer.from(credential.hash, 'hex');
  const given = Buffer.from(hashToken(presented), 'hex');
  return wanted.length === given.length && timingSafeEqual(wanted, given);
}

/** The header in which the CLI says who runs it, `CLI (alice, pid 4242)`: taken from its credential only. */
export const CLI_WHO_HEADER = 'x-schedflow-who';

/** Who asks, as the history records it: a request's origin (or a run's trigger) and the words for `by`. */
export interface Caller {
  origin: 'api' | 'cli';
  who: string;
  /** For whom it acts and what it may see (src/access/principal.ts). */
  principal: Principal;
}

/**
 * The caller of a route: the CLI (its credential) in the words it sends, as the CLI's queued
 * jobs recorded it before it went through the API; any other token by its name.
 */
export function callerOf(request: FastifyRequest): Caller {
  const token = request.apiToken;
  if (!token) throw new Error('callerOf: a route without a scope has no caller');
  if (token.id === LOCAL_CLI_TOKEN_ID) {
    const said = request.headers[CLI_WHO_HEADER];
    // One line of printable text, kept short: it is shown in the history and the UI.
    const who = typeof said === 'string' ? escapeControls(said).slice(0, 200).trim() : '';
    // `CLI (alice, pid 4242)`: the Unix user is the actor.
    const user = /^CLI \(([^,()]+),/.exec(who)?.[1]?.trim() ?? 'unknown';
    return {
      origin: 'cli',
      who: who || 'CLI',
      principal: { owner: token.owner, actor: cliActor(user), scopes: token.scopes },
    };
  }
  return {
    origin: 'api',
    who: `API token "${token.name}"`,
    principal: { owner: token.owner, actor: tokenActor(token.name), scopes: token.scopes },
  };
}
