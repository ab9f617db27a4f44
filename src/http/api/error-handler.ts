import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AdmissionRefusedError, type ErrorCode, errorSpec, SchedflowError } from '../../errors.js';
import { SchedApiError } from '../../sched/sched-errors.js';
import { ApiError, type FieldProblem, UpstreamApiError, ValidationApiError } from './api-errors.js';
import { fastifyErrorMapping } from './fastify-errors.js';

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
  app.setErrorHandler((error, request, reply) => sendError(error, request, reply));
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const shown = path.length > 200 ? `${path.slice(0, 200)}…` : path;
    // A path that exists under other methods is a 405 naming them, so a client sees its
    // mistake is the method (PUT for POST), not the address.
    const allowed = METHODS.filter((method) => app.findRoute({ method, url: path }) !== null);
    if (allowed.length > 0) {
      return reply
        .code(405)
        .header('allow', allowed.join(', '))
        .send({
          error: {
            code: 'SCHEDFLOW_ERR_METHOD_NOT_ALLOWED',
            message: `${request.method} is not allowed on ${shown}; it takes ${allowed.join(', ')}`,
          },
        });
    }
    return reply
      .code(404)
      .send({ error: { code: 'SCHEDFLOW_ERR_NOT_FOUND', message: `no route ${request.method} ${shown}` } });
  });
}

/** The methods the API's routes use (HEAD with every GET, from Fastify's exposeHeadRoutes). */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/**
 * Answers an error: the error handler's, and that of Fastify's `frameworkErrors` (a bad
 * or too long path), which come before any route or hook.
 */
export function sendError(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const answer = errorAnswer(error, request);
  if (answer.status >= 500) {
    request.log.error({ err: error, reqId: request.id, route: request.routeOptions.url }, 'API request failed');
  }
  return reply.code(answer.status).headers(answer.headers).send(answer.body);
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
  // Fastify's own client errors (body too large, bad JSON, a path parameter too long, …).
  const fastify = fastifyErrorMapping(error);
  if (fastify) {
    return { status: fastify.status, body: { error: { code: fastify.code, message: fastify.message } }, headers: {} };
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

/** What the API answers for a thrown error, when it is one we can explain. */
interface KnownAnswer {
  status: number;
  code: ErrorCode;
  message: string;
  extra: Record<string, unknown>;
  headers: Record<string, string>;
}

/** The answer a thrown error stands for: its code's status in the registry, never a guess from its name. */
function translate(error: unknown): KnownAnswer | null {
  if (error instanceof ApiError) return answerOf(error);
  const validation = (error as { validation?: unknown }).validation;
  if (Array.isArray(validation) && validation.length > 0) {
    const where = LOCATIONS[String((error as { validationContext?: string }).validationContext)] ?? 'body';
    return answerOf(new ValidationApiError(validation.flatMap((issue) => fieldProblems(issue, where))));
  }
  if (error instanceof SchedApiError) {
    return answerOf(
      new UpstreamApiError(error.message, error.retryable, {
        status: error.status,
        message: error.detail.message,
        code: error.code,
      }),
    );
  }
  if (error instanceof AdmissionRefusedError) {
    return {
      status: errorSpec(error.code).status ?? 403,
      code: error.code,
      message: error.message,
      extra: error.extra,
      headers: error.retryAfterSec === null ? {} : { 'retry-after': String(error.retryAfterSec) },
    };
  }
  if (error instanceof SchedflowError) {
    const status = errorSpec(error.code).status;
    // A code only recorded or logged (an LLM's, a webhook's) that reaches a route anyway: an
    // outage when it may pass, otherwise a bug, answered as any other (500 with a request id).
    if (status === null) {
      return error.retryable ? { status: 503, code: error.code, message: error.message, extra: {}, headers: {} } : null;
    }
    if (status >= 500 && !error.retryable) return null;
    return { status, code: error.code, message: error.message, extra: {}, headers: {} };
  }
  return null;
}

function answerOf(error: ApiError): KnownAnswer {
  return { status: error.status, code: error.code, message: error.message, extra: error.extra, headers: error.headers };
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
