import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  SchedflowApiError,
  SchedflowClient,
  type SchedflowClientOptions,
  SchedflowNetworkError,
} from '../../src/client/index.js';

/**
 * The client's own behaviour against a loopback HTTP server that answers as the test says (no
 * daemon): its options refused at construction, the token never in what it throws, what it
 * retries and what not, the Idempotency-Key on its errors, and its waits through a busy daemon.
 */

type Handler = (req: IncomingMessage, res: ServerResponse, n: number) => void;

const servers: { close: () => Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A loopback server: `handle` is called with each request and its number from 1. */
async function serve(handle: Handler) {
  const seen: { method: string; url: string; key: string | undefined }[] = [];
  const server = createServer((req, res) => {
    seen.push({
      method: req.method ?? '',
      url: req.url ?? '',
      key: req.headers['idempotency-key'] as string | undefined,
    });
    req.resume();
    req.on('end', () => handle(req, res, seen.length));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  servers.push({
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
  return { url, seen };
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

const failure = (code: string, message: string, extra: Record<string, unknown> = {}) => ({
  error: { code, message, ...extra },
});

const TOKEN = 'sf_secret-token-9f8e7d';
const fast = { maxAttempts: 3, baseDelayMs: 5, maxDelayMs: 1000 };
const client = (baseUrl: string, options: Partial<SchedflowClientOptions> = {}) =>
  new SchedflowClient({ baseUrl, token: TOKEN, retry: fast, ...options });

/** Everything an error shows: its message, String(), stack and causes, as text. */
function everything(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let i = 0; i < 6 && current !== undefined; i++) {
    parts.push(String(current), JSON.stringify(current) ?? '');
    if (current instanceof Error) {
      parts.push(current.message, current.stack ?? '');
      current = current.cause;
    } else current = undefined;
  }
  return parts.join('\n');
}

describe('the client refuses options no request could be made with', () => {
  it('a token that is empty, has a space or a line break: a TypeError that never says it', () => {
    for (const token of ['', 'sf_abc\ndef', 'sf_abc\r\nX-Evil: 1', 'sf abc', 'sf_abcé', 'sf_abc\t']) {
      let thrown: unknown;
      try {
        new SchedflowClient({ baseUrl: 'http://127.0.0.1:8080', token });
      } catch (error) {
        thrown = error;
      }
      expect(thrown, JSON.stringify(token)).toBeInstanceOf(TypeError);
      expect((thrown as TypeError).message).toMatch(/token must be/);
      if (token !== '') expect(everything(thrown)).not.toContain(token);
    }
  });

  it('a baseUrl that is not an http(s) URL, or carries credentials: a TypeError with an example', () => {
    for (const baseUrl of ['127.0.0.1:8080', 'localhost:8080', '', 'ftp://127.0.0.1/', 'http://me:pw@127.0.0.1:8080']) {
      let thrown: unknown;
      try {
        new SchedflowClient({ baseUrl, token: TOKEN });
      } catch (error) {
        thrown = error;
      }
      expect(thrown, baseUrl).toBeInstanceOf(TypeError);
      expect((thrown as TypeError).message).toContain('http://127.0.0.1:8080');
      expect((thrown as TypeError).message).not.toContain('pw@');
    }
    expect(() => new SchedflowClient({ baseUrl: 'https://sched.example.org/prefix/', token: TOKEN })).not.toThrow();
  });

  it('an id of "", "." or ".." (or %2E): a TypeError, nothing sent', async () => {
    const { url, seen } = await serve((_req, res) => json(res, 200, {}));
    const sf = client(url);
    for (const id of ['', '.', '..', '%2E', '%2e%2E', '.%2E']) {
      await expect(sf.getJob(id), JSON.stringify(id)).rejects.toThrow(TypeError);
    }
    await expect(sf.triggerPipelineRun('..')).rejects.toThrow(TypeError);
    expect(seen).toEqual([]);
  });
});

describe('the token is never in what the client throws', () => {
  it('fetch refusing the request, quoting the header: thrown once, not retried, token taken out', async () => {
    let calls = 0;
    const refusing: typeof fetch = async () => {
      calls++;
      throw new TypeError(`Headers.append: "Bearer ${TOKEN}" is an invalid header value.`);
    };
    const error = await client('http://127.0.0.1:9', { fetch: refusing })
      .getJob('x')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect(error).not.toBeInstanceOf(SchedflowNetworkError);
    expect(calls).toBe(1);
    expect((error as Error).message).toContain('***');
    expect(everything(error)).not.toContain(TOKEN);
  });

  it('a network failure whose cause quotes the token: retried, then a network error without it', async () => {
    let calls = 0;
    const failing: typeof fetch = async () => {
      calls++;
      throw new TypeError('fetch failed', { cause: new Error(`socket closed while sending Bearer ${TOKEN}`) });
    };
    const error = await client('http://127.0.0.1:9', { fetch: failing })
      .getJob('x')
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SchedflowNetworkError);
    expect(calls).toBe(3);
    expect(everything(error)).toContain('***');
    expect(everything(error)).not.toContain(TOKEN);
  });

  it('a connection refused by the real fetch, and a daemon answer that quotes the token', async () => {
    const refused = await client('http://127.0.0.1:9', { retry: { maxAttempts: 1 } })
      .getJob('x')
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SchedflowNetworkError);
    expect(everything(refused)).not.toContain(TOKEN);

    const { url } = await serve((_req, res) =>
      json(res, 401, failure('SCHEDFLOW_ERR_UNAUTHORIZED', `unknown token ${TOKEN}`)),
    );
    const echoed = await client(url)
      .getJob('x')
      .catch((e: unknown) => e);
    expect(echoed).toBeInstanceOf(SchedflowApiError);
    expect((echoed as SchedflowApiError).detail.message).toBe('unknown token ***');
    expect(everything(echoed)).not.toContain(TOKEN);
  });
});

describe('what the client retries', () => {
  it('waits out 409 SCHEDFLOW_ERR_JOB_SUBMITTING after its Retry-After, then gives the answer', async () => {
    const { url, seen } = await serve((_req, res, n) =>
      n < 3
        ? json(res, 409, failure('SCHEDFLOW_ERR_JOB_SUBMITTING', 'being submitted'), { 'retry-after': '0' })
        : json(res, 202, { id: 'j1', state: 'submitted', message: 'cancel sent', links: { self: '/api/v1/jobs/j1' } }),
    );
    const cancelled = await client(url).cancelJob('j1');
    expect(cancelled.state).toBe('submitted');
    expect(seen.map((r) => r.method)).toEqual(['DELETE', 'DELETE', 'DELETE']);
  });

  it('never another 409 or 4xx', async () => {
    for (const [status, code] of [
      [409, 'SCHEDFLOW_ERR_JOB_ENDED'],
      [409, 'SCHEDFLOW_ERR_SUMMARY_PENDING'],
      [400, 'SCHEDFLOW_ERR_VALIDATION'],
      [422, 'SCHEDFLOW_ERR_PROFILE_UNUSABLE'],
    ] as const) {
      const { url, seen } = await serve((_req, res) => json(res, status, failure(code, 'no'), { 'retry-after': '0' }));
      const error = await client(url)
        .cancelJob('j1')
        .catch((e: unknown) => e);
      expect(error, code).toMatchObject({ code, status });
      expect(seen, code).toHaveLength(1);
    }
  });
});

describe("the Idempotency-Key on a call's error", () => {
  it('is on an error answer and on no answer at all: the key the call was sent with', async () => {
    const { url, seen } = await serve((_req, res) => json(res, 422, failure('SCHEDFLOW_ERR_PROFILE_UNUSABLE', 'no')));
    const sf = client(url);
    const refused = await sf.submitJob({ spec: { script: '#!/bin/sh\ntrue\n' } }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SchedflowApiError);
    expect((refused as SchedflowApiError).idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect((refused as SchedflowApiError).idempotencyKey).toBe(seen[0]?.key);

    const { url: dropping, seen: dropped } = await serve((req) => req.socket.destroy());
    const lost = await client(dropping)
      .submitJob({ spec: { script: '#!/bin/sh\ntrue\n' } }, { idempotencyKey: 'order-7' })
      .catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(SchedflowNetworkError);
    expect(lost).toMatchObject({ idempotencyKey: 'order-7', attempts: 3 });
    expect(dropped.map((r) => r.key)).toEqual(['order-7', 'order-7', 'order-7']);

    const read = await client(dropping)
      .getJob('x')
      .catch((e: unknown) => e);
    expect(read).toMatchObject({ code: 'SCHEDFLOW_CLIENT_NETWORK', idempotencyKey: null });
  });
});

describe('a wait through a busy or unreachable daemon', () => {
  const job = (state: string) => ({ id: 'j1', state });

  it('reads again after 503s and 429s past the read’s own retries, until the job ends', async () => {
    const { url, seen } = await serve((_req, res, n) => {
      if (n <= 3) json(res, 503, failure('SCHEDFLOW_ERR_UNAVAILABLE', 'busy'));
      else if (n === 4) json(res, 429, failure('SCHEDFLOW_ERR_RATE_LIMITED', 'slow down'), { 'retry-after': '0' });
      else if (n === 5) dropConnection(res);
      else json(res, 200, job(n < 7 ? 'running' : 'completed'));
    });
    const sf = client(url, { retry: { maxAttempts: 1 } });
    const states: string[] = [];
    const ended = await sf.waitForJob('j1', {
      intervalMs: 5,
      timeoutMs: 10_000,
      onUpdate: (j) => states.push(j.state),
    });
    expect(ended.state).toBe('completed');
    expect(states).toEqual(['running', 'completed']);
    expect(seen).toHaveLength(7);
  });

  it('still ends on any other error, and at its timeout while the daemon stays busy', async () => {
    const { url } = await serve((_req, res) => json(res, 404, failure('SCHEDFLOW_ERR_NOT_FOUND', 'no such job')));
    await expect(client(url).waitForJob('j1', { intervalMs: 5 })).rejects.toMatchObject({
      code: 'SCHEDFLOW_ERR_NOT_FOUND',
    });
    const { url: busy } = await serve((_req, res) => json(res, 503, failure('SCHEDFLOW_ERR_UNAVAILABLE', 'busy')));
    await expect(
      client(busy, { retry: { maxAttempts: 1 } }).waitForRun('r1', { intervalMs: 5, timeoutMs: 200 }),
    ).rejects.toMatchObject({ code: 'SCHEDFLOW_CLIENT_TIMEOUT', last: null });
  });
});

/** Drops the connection without an answer. */
function dropConnection(res: ServerResponse) {
  res.socket?.destroy();
}
