import type { FastifyInstance } from 'fastify';
import { ValidationApiError } from './api-errors.js';

/**
 * Deepest nesting a JSON body may have. Job specs and requests nest a few levels; a body
 * thousands deep would overflow the stack of every recursive reader after the parser
 * (hashing for idempotency keys, drizzle's JSON columns) and answer 500.
 */
export const MAX_BODY_DEPTH = 64;

/** In `u` mode a surrogate pair is one code point: only an unpaired half matches. */
const LONE_SURROGATE = /\p{Surrogate}/u;

/**
 * JSON bodies through Fastify's own parser (which refuses `__proto__` and `constructor.prototype`
 * members), then refused when nested deeper than MAX_BODY_DEPTH or holding a lone UTF-16
 * surrogate (`"\ud800"`): SQLite would store that as invalid UTF-8, unreadable elsewhere.
 */
export function registerJsonBody(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    // Fastify's default JSON parser answers through the callback; its type also allows a promise.
    void parse(request, text, (error, value) => {
      if (error) return done(isJson(text) ? prototypeMember() : error, undefined);
      const problem = problemOf(value);
      if (problem) return done(new ValidationApiError([{ in: 'body', path: problem.path, reason: problem.reason }]));
      done(null, value);
    });
  });
}

/** Valid JSON that Fastify's parser refused: it was for a prototype member, its only other refusal. */
function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function prototypeMember(): ValidationApiError {
  return new ValidationApiError([
    { in: 'body', path: '', reason: 'a member named "__proto__", or "constructor" with "prototype", is not allowed' },
  ]);
}

/** The first problem of a parsed body, found without recursion (the body may be deep). */
function problemOf(value: unknown): { path: string; reason: string } | null {
  const stack: { value: unknown; path: string; depth: number }[] = [{ value, path: '', depth: 0 }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    if (typeof item.value === 'string') {
      if (LONE_SURROGATE.test(item.value)) return { path: item.path, reason: 'contains a lone UTF-16 surrogate' };
      continue;
    }
    if (item.value === null || typeof item.value !== 'object') continue;
    if (item.depth >= MAX_BODY_DEPTH) {
      return { path: item.path, reason: `nested deeper than ${MAX_BODY_DEPTH} levels` };
    }
    for (const [key, child] of Object.entries(item.value)) {
      const path = item.path ? `${item.path}.${key}` : key;
      if (LONE_SURROGATE.test(key))
        return { path: item.path, reason: 'a member name contains a lone UTF-16 surrogate' };
      stack.push({ value: child, path, depth: item.depth + 1 });
    }
  }
  return null;
}
