import { z } from 'zod';

/**
 * What the local API's route schemas share: the error body, paging, times,
 * list filters and the Idempotency-Key header. Each route's own schemas live
 * beside it (routes/<resource>.schema.ts). One set validates requests
 * (through fastify-type-provider-zod), shapes answers, and is the OpenAPI
 * document. JSON members use Slurm's snake_case, like the job spec they carry.
 */

/** Named examples of a request body, as OpenAPI writes them: what each shows, and the body. */
export type BodyExamples<T extends z.ZodType> = Record<string, { summary: string; value: z.input<T> }>;

/**
 * Where a schema's request examples are kept: not JSON Schema's `examples`, which zod leaves out
 * of the input form of a schema that transforms (SubmitJob, TriggerRun). @fastify/swagger moves a
 * body's `x-examples` onto its media type, and src/http/app.ts does it for a body that is a named
 * component, so the examples are on the request body and in no component.
 */
export const BODY_EXAMPLES_KEY = 'x-examples';

/**
 * Schemas given an `id` (in zod's global registry, where `.describe()` keeps
 * descriptions too) become named components of the document. `examples`: of a
 * request body (test/docs/openapi-document.test.ts checks the schema takes each).
 */
export function named<T extends z.ZodType>(id: string, schema: T, description?: string, examples?: BodyExamples<T>): T {
  z.globalRegistry.add(schema, {
    id,
    ...(description && { description }),
    ...(examples && { [BODY_EXAMPLES_KEY]: examples }),
  });
  return schema;
}

export const time = z.string().describe('ISO 8601 time, UTC');
export const webhookUrlOutput = z
  .string()
  .nullable()
  .describe('the webhook URL; without its user info and query string unless the token has the admin scope');
export const timeInput = z.iso
  .datetime({ offset: true })
  .describe('ISO 8601 time with a zone, e.g. 2026-11-01T08:00:00Z');

// ---- errors

export const fieldProblemSchema = z.object({
  in: z.enum(['body', 'query', 'params', 'headers']),
  path: z.string().describe('dotted path inside the body, query, path or headers, e.g. spec.script'),
  reason: z.string(),
});

export const errorBodySchema = named(
  'Error',
  z.object({
    error: z.object({
      code: z.string().describe('stable code, e.g. SCHEDFLOW_ERR_VALIDATION'),
      message: z.string(),
      fields: z.array(fieldProblemSchema).optional().describe('validation errors: each field and what is wrong'),
      request_id: z.string().optional().describe('given on 500: the id to look for in the daemon log'),
      upstream: z
        .object({ status: z.number().int().nullable(), message: z.string().nullable(), code: z.string() })
        .optional()
        .describe("the scheduler's answer, when it refused or could not be reached"),
      state: z.string().optional().describe('the state of the resource, when it conflicts'),
      checks: z.record(z.string(), z.string()).optional().describe('readiness checks that failed'),
      allowed_profiles: z
        .array(z.string())
        .optional()
        .describe('the profiles the token is bound to, when it named another (403 SCHEDFLOW_ERR_PROFILE_NOT_ALLOWED)'),
      limit: z
        .number()
        .int()
        .optional()
        .describe(
          "the token's quota that was reached (429, SCHEDFLOW_ERR_QUOTA_IN_FLIGHT or SCHEDFLOW_ERR_QUOTA_PER_DAY)",
        ),
      output: z
        .object({
          stream: z.enum(['stdout', 'stderr']),
          path: z.string().nullable().describe('the path tried (null: not known yet)'),
          host: z.string().describe("the daemon's host, where it was tried"),
          reason: z
            .string()
            .describe('not_submitted, not_started, not_on_this_host, no_permission, symlink, not_owner, …'),
        })
        .optional()
        .describe("a job's output that cannot be read: what was tried, where, and why"),
    }),
  }),
  'Every error answer: a code, a message, and what else helps',
);

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'invalid request (body, query, path or header): `fields` names each field and the reason',
  401: 'no token, or an unknown or revoked one',
  403: 'the token lacks the scope this route needs',
  404: 'no such resource',
  409: 'conflicts with the state of the resource or with an earlier use of the Idempotency-Key',
  413: 'body larger than 1 MiB',
  415: 'a body of a media type the API does not read: send Content-Type: application/json',
  422: "the profile cannot take this job: another account than its token's (`SCHEDFLOW_ERR_ACCOUNT_MISMATCH`), an account its Slurm user has no association with (`SCHEDFLOW_ERR_ACCOUNT_NOT_ASSOCIATED`), or its token lacks a scope (`SCHEDFLOW_ERR_PROFILE_SCOPE_MISSING`)",
  429: "the token's rate limit (on a submission, one of its quotas) is reached: see Retry-After",
  500: 'a bug; the answer carries a request id to find it in the log',
  502: 'the scheduler refused (its status and message are in `upstream`)',
  503: 'not available now (scheduler unreachable, pipelines not loaded); try again later',
};

/**
 * A documented answer: fastify serializes it with the schema, and the OpenAPI
 * document gets the description (a described copy of a named schema would
 * lose its name).
 */
export function answer<T extends z.ZodType>(description: string, schema: T) {
  return { description, content: { 'application/json': { schema } } };
}

/**
 * Error answers of a route, documented with the shared Error body: the statuses given, and 500,
 * which any route answers for a bug (the error handler's, with a request id).
 */
export function errors(...statuses: number[]): Record<number, ReturnType<typeof answer<typeof errorBodySchema>>> {
  return Object.fromEntries(
    [...statuses, 500].map((s) => [s, answer(ERROR_DESCRIPTIONS[s] ?? 'error', errorBodySchema)]),
  );
}

// ---- common inputs and paging

/**
 * A name or id in a path: no NUL, which no id or name of ours holds and PostgreSQL refuses in
 * text (`%00` answered 500 on it; SQLite only found nothing).
 */
export const pathName = z
  .string()
  .min(1)
  .max(200)
  .refine((s) => !s.includes('\u0000'), 'must not contain a NUL character');

export const idParams = z.strictObject({ id: pathName });

export const limitQuery = z.coerce
  .number()
  .int()
  .min(1)
  .max(200)
  .default(50)
  .describe('page size, 1 to 200 (default 50)');
export const cursorQuery = z
  .string()
  .min(1)
  .max(500)
  .optional()
  .describe('opaque: the `next` of the page before; absent for the first page');

/** `state=running,pending`: a comma-separated list of one enum's values. */
export function listOf<T extends string>(values: readonly T[], what: string) {
  return z
    .string()
    .transform((text, ctx) => {
      const items = text
        .split(',')
        .map((s) => s.trim().toLowerCase())
        .filter(Boolean);
      const unknown = items.filter((s) => !(values as readonly string[]).includes(s));
      if (unknown.length) {
        ctx.addIssue({ code: 'custom', message: `unknown ${what} ${unknown.join(', ')}; one of ${values.join(', ')}` });
        return z.NEVER;
      }
      return items as T[];
    })
    .describe(`comma-separated: ${values.join(', ')}`);
}

/** Optional `Idempotency-Key` header of POST routes. */
export const idempotencyHeaders = z
  .object({
    'idempotency-key': z
      .string()
      .min(1)
      .max(255)
      .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces')
      .optional()
      .describe('the same key (per token) with the same body within 24 h gives the first answer again'),
  })
  .loose();

export function pageOf<T extends z.ZodType>(item: T) {
  return z.object({
    items: z.array(item),
    next: z.string().nullable().describe('cursor of the next page; null on the last'),
  });
}
