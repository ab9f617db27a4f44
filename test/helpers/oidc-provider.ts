import { createServer, type Server } from 'node:http';
import Provider from 'oidc-provider';

/**
 * A real OpenID provider (the `oidc-provider` package) on loopback, for the web UI's single
 * sign-on tests: one confidential client, users whose `groups` claim the tests map, and the
 * package's development login and consent pages (any password logs a known user in). Its
 * discovery, authorization, token, userinfo and end-session endpoints are the package's own.
 */
export interface TestOidcProvider {
  issuer: string;
  stop(): Promise<void>;
}

export interface TestOidcClient {
  clientId: string;
  clientSecret: string;
  redirectUris: string[];
  postLogoutRedirectUris: string[];
}

export async function startOidcProvider(
  port: number,
  client: TestOidcClient,
  users: Record<string, { groups: string[] }>,
): Promise<TestOidcProvider> {
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: client.clientId,
        client_secret: client.clientSecret,
        redirect_uris: client.redirectUris,
        post_logout_redirect_uris: client.postLogoutRedirectUris,
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    claims: { openid: ['sub'], profile: ['preferred_username', 'name'], groups: ['groups'] },
    scopes: ['openid', 'profile', 'groups'],
    pkce: { required: () => true },
    cookies: { keys: ['schedflow-test-cookie-key'] },
    features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
    async findAccount(_ctx, id) {
      const user = users[id];
      if (!user) return undefined;
      return {
        accountId: id,
        async claims() {
          return { sub: id, preferred_username: id, name: id, groups: user.groups };
        },
      };
    },
  });
  // Plain http on loopback: the package wants to be told it is not behind a TLS proxy.
  provider.proxy = false;
  const server: Server = createServer(provider.callback());
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    issuer,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
