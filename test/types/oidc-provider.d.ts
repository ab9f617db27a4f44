// oidc-provider ships no types: the part of its API test/helpers/oidc-provider.ts uses.
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  interface Account {
    accountId: string;
    claims(): Promise<Record<string, unknown>>;
  }
  interface Configuration {
    clients: Record<string, unknown>[];
    claims?: Record<string, string[]>;
    scopes?: string[];
    pkce?: { required?: () => boolean };
    cookies?: { keys?: string[] };
    features?: Record<string, { enabled: boolean }>;
    findAccount?(ctx: unknown, id: string): Promise<Account | undefined>;
  }
  export default class Provider {
    constructor(issuer: string, configuration: Configuration);
    proxy: boolean;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
  }
}
