import type { ApiScope } from '../../src/db/schema.js';
import { createToken } from '../../src/db/tokens.js';
import type { TestDaemon } from './daemon.js';
import { bearer, type HttpResult, http } from './http.js';

/** The local API of an in-process test daemon, called over its real socket. */
export interface ApiClient {
  url: string;
  /**
   * A new token with these scopes (named uniquely unless a name is given), of owner `default`
   * (as every token made before owners existed: tests of other things see what they saw) unless
   * another is given.
   */
  token(scopes: ApiScope[], name?: string, owner?: string): Promise<string>;
  call(
    method: string,
    path: string,
    init?: { token?: string | null; body?: unknown; headers?: Record<string, string> },
  ): Promise<HttpResult>;
}

let tokenCount = 0;

export function apiClient(td: TestDaemon): ApiClient {
  const url = td.daemon.apiUrl;
  if (!url) throw new Error('the test daemon runs no local API (roles without web?)');
  return {
    url,
    token: async (scopes, name, owner = 'default') =>
      (await createToken(td.daemon.history.store, { name: name ?? `test-${++tokenCount}`, scopes, owner })).token,
    call: (method, path, init = {}) =>
      http(`${url}${path}`, {
        method,
        body: init.body,
        headers: { ...(init.token ? bearer(init.token) : {}), ...init.headers },
      }),
  };
}

/** The error body every error answer has. */
export interface ApiErrorBody {
  error: {
    code: string;
    message: string;
    fields?: { in: string; path: string; reason: string }[];
    request_id?: string;
    upstream?: { status: number | null; message: string | null; code: string };
    state?: string;
    checks?: Record<string, string>;
  };
}

export const errorOf = (r: HttpResult): ApiErrorBody['error'] => (r.json as ApiErrorBody).error;

/** A job spec that runs `body` in a shell on the simulator. */
export function shellSpec(name: string, body: string, cwd?: string): Record<string, unknown> {
  return {
    name,
    script: `#!/bin/sh\n${body}\n`,
    ...(cwd && { current_working_directory: cwd }),
  };
}
