import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionError, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ConfigError, SchedflowError } from '../errors.js';
import { SchedApiError } from '../sched/sched-errors.js';
import { ProfileNotConnectedError } from '../tracking/client-registry.js';
import { ApiError, type FieldProblem, ValidationApiError } from './api-errors.js';

export interface ErrorAnswer {
  status: number;
  body: { error: Record<string, unknown> & { code: string; message: string } };
  headers: Record<string, string>;
}

const LOCATIONS: Record<string, FieldProblem['in']> = {
  body: 'body',
  querystring: 'query',
  params: 'params',
  headers: 'headers',
};

/**
 * Every error answer is JSON `{ error: { code, message, … } }`, never a stack
 * trace. Known errors say what is wrong; anything else is logged with the
 * request id and answered 500 with that id only.
 */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    const answer = errorAnswer(error, request);
    if (answer.status >= 500) {
      request.log.error({ err: error, reqId: request.id, route: request.routeOptions.url }, 'API request failed');
    }
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  });
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send({
      error: { code: 'SCHEDFLOW_ERR_NOT_FOUND', message: `no route ${request.method} ${request.url.split('?')[0]}` },
    }),
  );
}

/**
 * Longest path parameter, as sent (percent-encoded), the router passes on. Past it Fastify's
 * router answers by itself (FST_ERR_MAX_PARAM_LENGTH); its default, 100, was below the 200
 * characters the schemas take. 200 characters of 4-byte UTF-8, each byte as `%XX`, are 2,400.
 */
export const MAX_PATH_PARAM_CHARS = 2400;

/**
 * Errors Fastify's router raises before any hook or the error handler runs (a path that is
 * not percent-encoded UTF-8, a parameter over MAX_PATH_PARAM_CHARS): without this, Fastify
 * answers them in its own shape (`{ error: "Bad Request", code: "FST_…" }`).
 */
export function frameworkErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const reason =
    error.code === 'FST_ERR_BAD_URL'
      ? 'the path is not valid percent-encoded UTF-8'
      : error.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? `a path parameter is longer than ${MAX_PATH_PARAM_CHARS} characters`
        : undefined;
  const answer = errorAnswer(
    reason === undefined ? error : new ValidationApiError([{ in: 'params', path: '', reason }]),
    request,
  );
  if (answer.status >= 500) request.log.error({ err: error, reqId: request.id }, 'API request failed');
  void reply.code(answer.status).headers(answer.headers).header('x-request-id', request.id).send(answer.body);
}

/**
 * Requests Node's HTTP parser refuses before Fastify sees them (a request line or headers
 * over 16 KiB, bytes that are not HTTP): answered on the socket in the API's error shape
 * rather than Fastify's default `{ error: "Bad Request", statusCode }`, then closed, as
 * Node does (the connection's framing can no longer be trusted).
 */
export function clientErrorHandler(this: FastifyInstance, error: ConnectionError, socket: Socket): void {
  // A reset connection has no one to answer (https://nodejs.org/api/http.html#event-clienterror).
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'SCHEDFLOW_ERR_HEADERS_TOO_LARGE', 'the request line and headers are over 16 KiB']
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'SCHEDFLOW_ERR_REQUEST_TIMEOUT', 'the request was not received in time']
        : [400, 'SCHEDFLOW_ERR_BAD_REQUEST', 'not a valid HTTP request'];
  const body = JSON.stringify({ error: { code, message } });
  // Like every answer, one id for the answer and its log line (there is no request to log).
  const reqId = randomUUID();
  this.log.debug({ reqId, status, err: error.code }, 'API request refused by the HTTP parser');
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${reqId}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

export function errorAnswer(error: unknown, request: FastifyRequest): ErrorAnswer {
  const known = translate(error);
  if (known) {
    return {
      status: known.status,
      body: { error: { code: known.code, message: known.message, ...known.extra } },
      headers: known.headers,
    };
  }
  const fastifyError = error as Partial<FastifyError>;
  const status = fastifyError.statusCode;
  // Fastify's own 4xx (body too large, bad JSON, unsupported media type): their messages are safe to show.
  if (typeof status === 'number' && status >= 400 && status < 500 && fastifyError.code?.startsWith('FST_')) {
    return {
      status,
      body: {
        error: {
          code: FASTIFY_CODES[fastifyError.code] ?? 'SCHEDFLOW_ERR_BAD_REQUEST',
          message: messageOf(fastifyError),
        },
      },
      headers: {},
    };
  }
  return {
    status: 500,
    body: {
      error: {
        code: 'SCHEDFLOW_ERR_INTERNAL',
        message: `internal error; the daemon's log has the details under request id ${request.id}`,
        request_id: request.id,
      },
    },
    headers: {},
  };
}

const FASTIFY_CODES: Record<string, string> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'SCHEDFLOW_ERR_BODY_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'SCHEDFLOW_ERR_UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'SCHEDFLOW_ERR_VALIDATION',
  FST_ERR_CTP_INVALID_JSON_BODY: 'SCHEDFLOW_ERR_VALIDATION',
};

function messageOf(error: Partial<FastifyError>): string {
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return 'request body too large (the limit is 1 MiB)';
  return error.message ?? 'bad request';
}

/** The API error a thrown error stands for, when it is one we can explain. */
function translate(error: unknown): ApiError | null {
  if (error instanceof ApiError) return error;
  const validation = (error as { validation?: unknown }).validation;
  if (Array.isArray(validation) && validation.length > 0) {
    const where = LOCATIONS[String((error as { validationContext?: string }).validationContext)] ?? 'body';
    return new ValidationApiError(validation.flatMap((issue) => fieldProblems(issue, where)));
  }
  if (error instanceof ProfileNotConnectedError) return new PlainApiError(503, error.code, error.message, true);
  if (error instanceof SchedApiError) {
    return new PlainApiError(error.retryable ? 503 : 502, 'SCHEDFLOW_ERR_UPSTREAM', error.message, error.retryable, {
      upstream: { status: error.status, message: error.detail.message, code: error.code },
    });
  }
  if (error instanceof ConfigError) return new PlainApiError(400, error.code, error.message, false);
  if (error instanceof SchedflowError) {
    if (error.code.endsWith('_NOT_FOUND')) return new PlainApiError(404, error.code, error.message, false);
    if (error.retryable) return new PlainApiError(503, error.code, error.message, true);
  }
  return null;
}

/** One validation issue (from the zod validator) as the fields it names. */
function fieldProblems(issue: unknown, where: FieldProblem['in']): FieldProblem[] {
  const { instancePath, message, keyword, params } = issue as {
    instancePath?: string;
    message?: string;
    keyword?: string;
    params?: { keys?: unknown };
  };
  const path = (instancePath ?? '')
    .split('/')
    .filter(Boolean)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
  if (keyword === 'unrecognized_keys' && Array.isArray(params?.keys)) {
    return params.keys.map((key) => ({
      in: where,
      path: path ? `${path}.${key}` : String(key),
      reason: 'unknown field',
    }));
  }
  return [{ in: where, path, reason: message ?? 'invalid' }];
}

class PlainApiError extends ApiError {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryable: boolean,
    extra: Record<string, unknown> = {},
  ) {
    super(message);
    Object.assign(this.extra, extra);
  }
}
