import { request } from 'node:http';
import { checkApiAnswer } from './openapi-check.js';

/**
 * Small fetch wrapper for tests: JSON or text body, status and headers. An answer of a daemon's
 * local API is checked against its OpenAPI document (see openapi-check.ts).
 */
export interface HttpResult {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

export async function http(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: unknown } = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { ...init.headers };
  let body: string | undefined;
  if (init.body !== undefined) {
    body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
    headers['content-type'] ??= 'application/json';
  }
  const method = init.method ?? 'GET';
  const response = await fetch(url, { method, headers, body });
  const text = await response.text();
  // As fetch sent it: dot segments resolved.
  await checkApiAnswer({
    method,
    url: new URL(url).href,
    status: response.status,
    contentType: response.headers.get('content-type'),
    text,
  });
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

export const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

/**
 * Polls `check` until it returns a value or the deadline passes. The default deadline bounds a
 * hang: on a loaded CI run (six files, tsc and biome on 2 cores) a wait that takes 2 s alone has
 * taken past 15.
 */
export async function waitFor<T>(
  check: () => Promise<T | undefined>,
  { timeoutMs = 30_000, intervalMs = 200, what = 'condition' } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * A GET sent with its path exactly as written (fetch would normalise it), from `localAddress`
 * when given.
 */
export function rawGet(
  host: string,
  port: number,
  path: string,
  options: { localAddress?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, ...options }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
