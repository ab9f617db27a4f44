import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { http } from '../../helpers/http.js';
import {
  checkedFetch,
  forgetDocument,
  type OpenApiDocument,
  OpenApiDriftError,
  problemsOf,
} from '../../helpers/openapi-check.js';

/**
 * The check every test's API answers go through (test/helpers/openapi-check.ts) can fail: a
 * server that serves a made-up document and answers as told, some answers agreeing with the
 * document and some not. Without this, a check that let everything through would look the same
 * as an API that agrees with its document.
 */

const DOCUMENT: OpenApiDocument = {
  paths: {
    '/api/v1/things/{id}': {
      get: {
        responses: {
          '200': { content: { 'application/json': { schema: { $ref: '#/components/schemas/Thing' } } } },
          '404': { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
          '5XX': { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
        },
      },
    },
    '/metrics': { get: { responses: { '200': { content: { 'text/plain': { schema: { type: 'string' } } } } } } },
  },
  components: {
    schemas: {
      Thing: {
        type: 'object',
        properties: { id: { type: 'string' }, state: { enum: ['on', 'off'] } },
        required: ['id', 'state'],
        additionalProperties: false,
      },
      Error: {
        type: 'object',
        properties: {
          error: {
            type: 'object',
            properties: { code: { type: 'string' }, message: { type: 'string' } },
            required: ['code', 'message'],
          },
        },
        required: ['error'],
      },
    },
  },
};

/** What the server answers to each path (status, Content-Type, body). */
const ANSWERS: Record<string, [number, string, string]> = {
  '/api/v1/things/right': [200, 'application/json; charset=utf-8', '{"id":"right","state":"on"}'],
  '/api/v1/things/wrong': [200, 'application/json; charset=utf-8', '{"id":7,"state":"sideways","extra":true}'],
  '/api/v1/things/teapot': [418, 'application/json; charset=utf-8', '{"error":{"code":"X","message":"tea"}}'],
  '/api/v1/things/broken': [503, 'application/json; charset=utf-8', '{"error":{"code":"X","message":"later"}}'],
  '/api/v1/nowhere': [404, 'application/json; charset=utf-8', '{"error":{"code":"X","message":"no route"}}'],
  '/metrics': [200, 'text/plain; version=0.0.4; charset=utf-8', 'up 1\n'],
  '/_sim/anything': [200, 'application/json', '{"not":"checked"}'],
};

let server: Server;
let origin: string;

beforeAll(async () => {
  server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0] ?? '/';
    if (path === '/api/v1/openapi.json') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(DOCUMENT));
      return;
    }
    const [status, type, body] = ANSWERS[path] ?? [500, 'text/plain', 'unknown'];
    response.writeHead(status, { 'content-type': type }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  // A daemon given this port later must be checked against its own document, not this one.
  forgetDocument(origin);
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const failureOf = async (call: Promise<unknown>): Promise<string> => {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OpenApiDriftError);
  return (error as Error).message;
};

describe('answers checked against the document', () => {
  it('lets through answers that agree with it: a declared status and schema, a status range, text, other paths', async () => {
    expect((await http(`${origin}/api/v1/things/right`)).status).toBe(200);
    expect((await http(`${origin}/api/v1/things/broken`)).status).toBe(503);
    expect((await http(`${origin}/metrics`)).text).toBe('up 1\n');
    // No operation: the daemon's 404, in the error body.
    expect((await http(`${origin}/api/v1/nowhere`)).status).toBe(404);
    expect((await http(`${origin}/_sim/anything`)).status).toBe(200);
    expect((await checkedFetch(`${origin}/api/v1/things/right`)).status).toBe(200);
  });

  it('fails a body that does not match the schema of its status, naming each problem and where to fix it', async () => {
    const message = await failureOf(http(`${origin}/api/v1/things/wrong`));
    expect(message).toContain('GET /api/v1/things/wrong (200');
    expect(message).toMatch(/\/id: must be string/);
    expect(message).toMatch(/\/state: must be equal to one of the allowed values \(\["on","off"\]\)/);
    expect(message).toMatch(/must NOT have additional properties \(extra\)/);
    expect(message).toContain('src/http/api/routes/*.schema.ts');
    await failureOf(checkedFetch(`${origin}/api/v1/things/wrong`));
  });

  it('fails a status the operation does not declare', async () => {
    const message = await failureOf(http(`${origin}/api/v1/things/teapot`));
    expect(message).toContain('status 418 is not declared for GET /api/v1/things/{id} (declared: 200, 404, 5XX)');
  });

  it('fails a media type the status does not declare, and a success where there is no operation', () => {
    const exchange = { method: 'GET', url: `${origin}/metrics`, status: 200, text: '{}' };
    expect(problemsOf(DOCUMENT, { ...exchange, contentType: 'application/json' })).toEqual([
      'Content-Type application/json is not one the document declares (text/plain)',
    ]);
    expect(problemsOf(DOCUMENT, { ...exchange, method: 'POST', contentType: 'application/json' })).toEqual([
      'POST /metrics answered 200 but the document lists no such operation',
    ]);
    // HEAD is GET's, without a body.
    expect(problemsOf(DOCUMENT, { ...exchange, method: 'HEAD', text: '', contentType: 'text/plain' })).toEqual([]);
  });
});
