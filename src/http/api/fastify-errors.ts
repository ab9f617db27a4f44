import type { FastifyError } from 'fastify';
import { type ErrorCode, errorSpec } from '../../errors.js';

/**
 * Longest path parameter the router passes on (Fastify's default is 100). Ids the routes'
 * schemas accept are up to 200 characters: those judge an id's length, with a field error;
 * the router's limit only stops what no schema would ever take.
 */
export const MAX_PATH_PARAM_CHARS = 2400;

/** What the API answers for one of Fastify's own errors (`FST_ERR_…`). */
export interface FastifyErrorMapping {
  status: number;
  code: ErrorCode;
  message: string;
}

/**
 * Fastify's errors that can reach a client, each as a `SCHEDFLOW_ERR_…` code and a message
 * that says what to change. Fastify's own messages name its internals or echo the request
 * (a whole over-long path), so none is passed on as it is.
 */
const MAPPINGS: Record<string, Omit<FastifyErrorMapping, 'status'>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: {
    code: 'SCHEDFLOW_ERR_BODY_TOO_LARGE',
    message: 'request body too large (the limit is 1 MiB)',
  },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: 'SCHEDFLOW_ERR_UNSUPPORTED_MEDIA_TYPE',
    message: 'unsupported media type: send the body as JSON with Content-Type: application/json',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    code: 'SCHEDFLOW_ERR_BAD_REQUEST',
    message: 'the body is not as long as its Content-Length header says',
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    code: 'SCHEDFLOW_ERR_VALIDATION',
    message: 'the body is empty but Content-Type says application/json: send a JSON value or no Content-Type',
  },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    code: 'SCHEDFLOW_ERR_VALIDATION',
    message: 'the body is not valid JSON',
  },
  FST_ERR_ROUTE_MISSING_CONTENT_TYPE: {
    code: 'SCHEDFLOW_ERR_VALIDATION',
    message: 'this route needs a body with Content-Type: application/json',
  },
  FST_ERR_ROUTE_MISSING_CONTENT: {
    code: 'SCHEDFLOW_ERR_VALIDATION',
    message: 'this route needs a body',
  },
  FST_ERR_BAD_URL: {
    code: 'SCHEDFLOW_ERR_BAD_URL',
    message: 'the path is not a valid URL: a % must start a percent-encoded UTF-8 byte such as %2F',
  },
  FST_ERR_INVALID_URL: {
    code: 'SCHEDFLOW_ERR_BAD_URL',
    message: 'the request has no valid URL',
  },
  // find-my-way's maxParamLength (100): no id, name or key of the API is that long.
  FST_ERR_MAX_PARAM_LENGTH: {
    code: 'SCHEDFLOW_ERR_URI_TOO_LONG',
    message: `a path parameter is longer than ${MAX_PATH_PARAM_CHARS} characters; no id or name of this API is`,
  },
  FST_ERR_NOT_FOUND: { code: 'SCHEDFLOW_ERR_NOT_FOUND', message: 'not found' },
};

/**
 * The answer to a Fastify error, or null when it is none of Fastify's client errors (a 5xx
 * of Fastify's is a bug of ours or of a plugin, answered as any other: 500 with a request id).
 * A client error Fastify adds later is still answered as one, with its own message.
 */
export function fastifyErrorMapping(error: unknown): FastifyErrorMapping | null {
  const fastifyError = error as Partial<FastifyError>;
  const code = fastifyError.code;
  if (typeof code !== 'string' || !code.startsWith('FST_')) return null;
  const mapping = MAPPINGS[code];
  // Each of these codes has a status in the registry.
  if (mapping) return { ...mapping, status: errorSpec(mapping.code).status ?? 400 };
  const status = fastifyError.statusCode;
  // Fastify's own 4xx is kept: it says more than the registry's 400 for a client error it adds later.
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return { status, code: 'SCHEDFLOW_ERR_BAD_REQUEST', message: fastifyError.message ?? 'bad request' };
  }
  return null;
}
