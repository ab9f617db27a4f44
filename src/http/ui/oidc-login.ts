import type { Signer } from '@fastify/cookie';
import * as client from 'openid-client';
import { z } from 'zod';
import type { Logger } from '../../logger.js';
import { claimValues, grantOf, type OidcGrant } from './oidc-mapping.js';
import type { UiSettings } from './ui-settings.js';

type OidcUiSettings = NonNullable<UiSettings['oidc']>;

/** Paths of the single-sign-on login: where it starts, and where the provider sends the browser back. */
export const OIDC_START_PATH = '/ui/login/oidc';
export const OIDC_CALLBACK_PATH = '/ui/login/oidc/callback';

/** A login begun and not finished is good this long (the provider's pages: log in, consent). */
export const PENDING_MAX_AGE_SEC = 600;

/** Time limit of each call to the provider (discovery, token, userinfo). */
const PROVIDER_TIMEOUT_SEC = 10;

/**
 * What a begun login keeps in the browser until the provider sends it back: the state, the
 * nonce, the PKCE verifier, the page asked for, and when it stops being good. Signed with the
 * UI's cookie secret (kept in Redis), so it cannot be edited or made elsewhere; checked again
 * against the callback's state and the ID token's nonce by openid-client.
 */
const pendingSchema = z.object({
  state: z.string().min(16),
  nonce: z.string().min(16),
  verifier: z.string().min(43),
  next: z.string(),
  exp: z.number(),
});
export type PendingLogin = z.output<typeof pendingSchema>;

/** Why a callback is refused: the browser's login cannot be trusted, or the provider said no. */
export class OidcRefusal extends Error {
  constructor(
    /** 400: the callback or its cookie is wrong, expired or edited; 401: the provider refused; 502: it could not be reached. */
    readonly status: 400 | 401 | 502,
    /** Shown to the user: never a token, secret or stack. */
    message: string,
    /** For the log and the audit row. */
    readonly reason: string,
  ) {
    super(message);
  }
}

/** A user the provider vouched for, and the grant the map gives them (null: in no mapped group). */
export interface OidcUser {
  username: string;
  grant: OidcGrant | null;
  idToken: string;
}

/**
 * The web UI's OpenID Connect relying party, on openid-client: authorization code flow with
 * PKCE (S256), state and nonce. The provider's metadata is discovered at the first login (a
 * provider down at the daemon's start does not stop it) and kept; a failed discovery is tried
 * again at the next login.
 */
export class OidcLogin {
  #configuration: Promise<client.Configuration> | null = null;

  constructor(
    private readonly settings: OidcUiSettings,
    /** The redirect URL: the configured one, else made of the address the API listens on. */
    private readonly redirectUrl: () => string,
    private readonly signer: Pick<Signer, 'sign' | 'unsign'>,
    private readonly log: Logger,
  ) {}

  get name(): string {
    return this.settings.name;
  }

  /** Where to send the browser to log in, and the signed cookie value of the login begun. */
  async begin(next: string, now: number): Promise<{ url: string; cookie: string }> {
    const config = await this.#config();
    const pending: PendingLogin = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      verifier: client.randomPKCECodeVerifier(),
      next,
      exp: now + PENDING_MAX_AGE_SEC * 1000,
    };
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: this.redirectUrl(),
      scope: this.settings.scopes.join(' '),
      code_challenge: await client.calculatePKCECodeChallenge(pending.verifier),
      code_challenge_method: 'S256',
      state: pending.state,
      nonce: pending.nonce,
    });
    const cookie = this.signer.sign(Buffer.from(JSON.stringify(pending)).toString('base64url'));
    return { url: url.href, cookie };
  }

  /** The login begun in this browser, from its cookie: OidcRefusal (400) when missing, edited or expired. */
  pendingOf(cookie: string | undefined, now: number): PendingLogin {
    const expired = new OidcRefusal(
      400,
      'This login was not started here, or it has expired. Log in again.',
      'no valid login cookie',
    );
    if (!cookie) throw expired;
    const unsigned = this.signer.unsign(cookie);
    if (!unsigned.valid || unsigned.value === null) {
      throw new OidcRefusal(400, expired.message, 'login cookie with a wrong signature');
    }
    let parsed: ReturnType<typeof pendingSchema.safeParse>;
    try {
      parsed = pendingSchema.safeParse(JSON.parse(Buffer.from(unsigned.value, 'base64url').toString('utf8')));
    } catch {
      throw expired;
    }
    if (!parsed.success) throw expired;
    if (parsed.data.exp <= now) throw new OidcRefusal(400, expired.message, 'login cookie expired');
    return parsed.data;
  }

  /**
   * Finishes a login at the callback: checks the state, trades the code (with the PKCE verifier)
   * for tokens, checks the ID token (signature, issuer, audience, expiry, nonce), and maps the
   * configured claim, read from the ID token or else from the userinfo endpoint.
   */
  async finish(search: string, pending: PendingLogin): Promise<OidcUser> {
    const config = await this.#config();
    // The redirect URL as configured, with the callback's parameters: never the Host header.
    const current = new URL(this.redirectUrl());
    current.search = search;
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: pending.verifier,
        expectedState: pending.state,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      });
    } catch (error) {
      throw this.#refusal(error);
    }
    const claims = tokens.claims();
    const idToken = tokens.id_token;
    if (!claims || !idToken) throw new OidcRefusal(401, 'The identity provider sent no ID token.', 'no ID token');
    let values: unknown = claims[this.settings.claim];
    let username: unknown = claims[this.settings.usernameClaim];
    // Many providers put only `sub` in the ID token and the rest in the userinfo answer.
    if ((values === undefined || username === undefined) && config.serverMetadata().userinfo_endpoint) {
      try {
        const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub);
        values ??= info[this.settings.claim];
        username ??= info[this.settings.usernameClaim];
      } catch (error) {
        throw this.#refusal(error);
      }
    }
    const name = typeof username === 'string' && username.trim() ? username.trim().slice(0, 128) : claims.sub;
    return { username: name, grant: grantOf(this.settings.map, claimValues(values)), idToken };
  }

  /**
   * The provider's logout page for a session (RP-initiated logout), coming back to the login
   * page; null when the provider has no end_session_endpoint (or cannot be reached now).
   */
  async endSessionUrl(idToken: string | undefined, loginUrl: string): Promise<string | null> {
    let config: client.Configuration;
    try {
      config = await this.#config();
    } catch {
      return null;
    }
    if (!config.serverMetadata().end_session_endpoint) return null;
    const params: Record<string, string> = {
      post_logout_redirect_uri: this.settings.postLogoutRedirectUrl ?? loginUrl,
      client_id: this.settings.clientId,
    };
    if (idToken) params.id_token_hint = idToken;
    return client.buildEndSessionUrl(config, params).href;
  }

  #config(): Promise<client.Configuration> {
    if (!this.#configuration) {
      const issuer = new URL(this.settings.issuer);
      const secret = this.settings.clientSecret;
      this.#configuration = client
        .discovery(
          issuer,
          this.settings.clientId,
          secret ? secret.reveal() : undefined,
          secret ? client.ClientSecretBasic(secret.reveal()) : client.None(),
          {
            timeout: PROVIDER_TIMEOUT_SEC,
            // Plain http only to a provider on this host (docs/sso.md): elsewhere codes and tokens would cross the network in clear.
            ...(issuer.protocol === 'http:' &&
              isLoopback(issuer.hostname) && { execute: [client.allowInsecureRequests] }),
          },
        )
        .then((config) => {
          // The provider's other endpoints (token, userinfo) on plain http too, only where its issuer is.
          if (issuer.protocol === 'http:' && isLoopback(issuer.hostname)) client.allowInsecureRequests(config);
          config.timeout = PROVIDER_TIMEOUT_SEC;
          return config;
        })
        .catch((error: unknown) => {
          this.#configuration = null;
          this.log.error(
            { issuer: this.settings.issuer, reason: (error as Error).message },
            'OIDC discovery failed: single sign-on is unavailable until the provider answers',
          );
          throw new OidcRefusal(
            502,
            `${this.settings.name} cannot be reached now; try again later.`,
            'discovery failed',
          );
        });
    }
    return this.#configuration;
  }

  /** An error of openid-client as a refusal: what the provider or the browser sent is wrong, or the provider is away. */
  #refusal(error: unknown): OidcRefusal {
    if (error instanceof OidcRefusal) return error;
    if (error instanceof client.AuthorizationResponseError) {
      // The provider sent the browser back with an error (access_denied: the user said no).
      return new OidcRefusal(
        401,
        `${this.settings.name} refused the login (${error.error}).`,
        `provider: ${error.error}`,
      );
    }
    if (error instanceof client.ResponseBodyError) {
      // invalid_grant: a code already used, edited, or for another client.
      return new OidcRefusal(
        401,
        'The identity provider did not accept this login; log in again.',
        `token endpoint: ${error.error}`,
      );
    }
    if (error instanceof client.ClientError) {
      // A state, nonce, issuer, audience or signature that does not match: an edited or replayed callback.
      return new OidcRefusal(
        400,
        'This login answer is not valid; log in again.',
        `${error.code ?? 'check'}: ${error.message}`,
      );
    }
    this.log.error(
      { reason: (error as Error).message },
      'OIDC login failed: the identity provider could not be reached',
    );
    return new OidcRefusal(
      502,
      `${this.settings.name} cannot be reached now; try again later.`,
      'provider unreachable',
    );
  }
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '[::1]' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
