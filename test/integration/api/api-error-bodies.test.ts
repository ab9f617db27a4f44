import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiClient, apiClient, errorOf } from '../../helpers/api.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * Errors raised by Fastify and Node before any route runs have the API's error body
 * `{error: {code, message}}` too, over the daemon's real socket: a malformed request or
 * oversized headers are sent as raw bytes, since no HTTP client sends them.
 */

let redis: TestRedis;
let sim: TestSim;
let td: TestDaemon;
let api: ApiClient;

beforeAll(async () => {
  redis = await startTestRedis();
  sim = await startSim();
  td = await startTestDaemon(sim.url, redis.url);
  api = apiClient(td);
});

afterAll(async () => {
  await td?.stop();
  await sim?.stop();
  await redis?.stop();
});

interface RawAnswer {
  status: number;
  headers: Map<string, string>;
  body: string;
}

/**
 * Writes `bytes` to the API's port and reads the answer until the server closes the connection;
 * `then`, when given, is written once the first answer has arrived (a second request on it).
 */
function rawRequest(bytes: string, then?: string): Promise<RawAnswer> {
  const { hostname, port } = new URL(api.url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    let next = then;
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      if (next !== undefined) {
        socket.write(next);
        next = undefined;
      }
    });
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n');
      const headers = new Map(
        lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
      );
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: text.slice(split + 4) });
      socket.destroy();
    });
    socket.write(bytes);
  });
}

/** The answer's body is exactly `{error: {code, message}}` with this code. */
function expectErrorBody(body: unknown, code: string): void {
  expect(body).toEqual({ error: { code, message: expect.any(String) } });
}

describe("Node's client errors", () => {
  it('malformed HTTP: 400 with the error body and Connection: close', async () => {
    const r = await rawRequest('NOT HTTP AT ALL\r\n\r\n');
    expect(r.status).toBe(400);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expect(r.headers.get('connection')).toBe('close');
    expectErrorBody(JSON.parse(r.body), 'SCHEDFLOW_ERR_MALFORMED_REQUEST');
  });

  it('malformed HTTP after a whole answer on a kept-alive connection: answered too', async () => {
    const r = await rawRequest('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 'NOT HTTP AT ALL\r\n\r\n');
    expect(r.status).toBe(200);
    const second = r.body.slice(r.body.indexOf('HTTP/1.1 '));
    expect(second).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(JSON.parse(second.slice(second.indexOf('\r\n\r\n') + 4))).toEqual({
      error: { code: 'SCHEDFLOW_ERR_MALFORMED_REQUEST', message: expect.any(String) },
    });
  });

  it('headers over 16 KiB: 431 with the error body and Connection: close', async () => {
    const r = await rawRequest(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(r.status).toBe(431);
    expect(r.headers.get('connection')).toBe('close');
    expectErrorBody(JSON.parse(r.body), 'SCHEDFLOW_ERR_HEADERS_TOO_LARGE');
    expect(JSON.parse(r.body).error.message).toMatch(/16 KiB/);
  });
});

describe("Fastify's errors", () => {
  it('a path parameter over the router bound (2,400 characters): 414, without echoing the path', async () => {
    const token = await api.token(['read']);
    const r = await api.call('GET', `/api/v1/jobs/${'x'.repeat(2500)}`, { token });
    expect(r.status).toBe(414);
    expectErrorBody(r.json, 'SCHEDFLOW_ERR_URI_TOO_LONG');
    expect(r.text).not.toContain('x'.repeat(2500));
    expect(r.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('a path that is not valid percent-encoding: 400', async () => {
    const r = await rawRequest('GET /api/v1/jobs/%E0%A4%A HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(r.status).toBe(400);
    expectErrorBody(JSON.parse(r.body), 'SCHEDFLOW_ERR_BAD_URL');
  });

  it('an unknown route: 404; a known path with a method it does not take: 405 with Allow', async () => {
    const missing = await api.call('GET', '/api/v1/nothing');
    expect(missing.status).toBe(404);
    expectErrorBody(missing.json, 'SCHEDFLOW_ERR_NOT_FOUND');
    const wrong = await api.call('PUT', '/api/v1/jobs', { body: {} });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET, HEAD, POST');
    expectErrorBody(wrong.json, 'SCHEDFLOW_ERR_METHOD_NOT_ALLOWED');
    expect(errorOf(wrong).message).toBe('PUT is not allowed on /api/v1/jobs; it takes GET, HEAD, POST');
  });

  it("the body's errors: empty or broken JSON, a media type the API does not read", async () => {
    const token = await api.token(['submit']);
    const empty = await api.call('POST', '/api/v1/jobs', {
      token,
      headers: { 'content-type': 'application/json' },
    });
    expect(empty.status).toBe(400);
    expectErrorBody(empty.json, 'SCHEDFLOW_ERR_VALIDATION');
    const media = await api.call('POST', '/api/v1/jobs', { token, body: 'x', headers: { 'content-type': 'text/csv' } });
    expect(media.status).toBe(415);
    expectErrorBody(media.json, 'SCHEDFLOW_ERR_UNSUPPORTED_MEDIA_TYPE');
    const broken = await api.call('POST', '/api/v1/jobs', { token, body: '{"spec": ' });
    expect(broken.status).toBe(400);
    expect(broken.json).toEqual({ error: { code: 'SCHEDFLOW_ERR_VALIDATION', message: 'the body is not valid JSON' } });
  });
});
