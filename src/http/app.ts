import { randomUUID } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest, LogController } from 'fastify';
import {
  jsonSchemaTransform,
  jsonSchemaTransformObject,
  serializerCompiler,
  validatorCompiler,
} from 'fastify-type-provider-zod';
import { packageVersion } from '../lib/package-info.js';
import { API_PREFIX } from '../views/views.js';
import { RateLimitedApiError } from './api/api-errors.js';
import { registerAuth } from './api/auth.js';
import { clientErrorHandler } from './api/client-errors.js';
import { registerErrorHandling, sendError } from './api/error-handler.js';
import { MAX_PATH_PARAM_CHARS } from './api/fastify-errors.js';
import { registerIdempotency } from './api/idempotency.js';
import { registerJsonBody } from './api/json-body.js';
import { ApiMetrics } from './api/metrics.js';
import { registerReadTurns } from './api/read-turns.js';
import { auditRoutes } from './api/routes/audit.js';
import { clusterRoutes } from './api/routes/cluster.js';
import { healthRoutes } from './api/routes/health.js';
import { historyRoutes } from './api/routes/history.js';
import { jobControlRoutes } from './api/routes/job-control.js';
import { jobOutputRoutes } from './api/routes/job-output.js';
import { jobRoutes } from './api/routes/jobs.js';
import { pipelineRoutes } from './api/routes/pipelines.js';
import { runRoutes } from './api/routes/runs.js';
import { BODY_EXAMPLES_KEY } from './api/shared-schemas.js';
import type { ApiDeps } from './deps.js';
import { UI_PREFIX } from './ui/layout.js';
import { uiPlugin } from './ui/ui-plugin.js';

export const OPENAPI_PATH = `${API_PREFIX}/openapi.json`;
export const DOCS_PATH = `${API_PREFIX}/docs`;

/** Every answer but the docs page's and the UI's: JSON and text, nothing to run or frame. */
const API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
const DOCS_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  // Swagger UI sets style attributes from its script; styles run nothing.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The local API as a Fastify app, without listening (tests may `inject`).
 * Hooks run in this order for a request: request id, auth (onRequest), body
 * parsing (1 MiB limit), idempotency hashing and the per-token rate limit
 * (preValidation), zod validation, a read's turn (preHandler), the route.
 */
export async function buildApp(deps: ApiDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.logger.child({ component: 'api' }) as FastifyBaseLogger,
    // Requests are logged once, on response, with route, status and time (below).
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'reqId' }),
    bodyLimit: deps.settings.bodyLimitBytes,
    genReqId: () => randomUUID(),
    // Errors met before any route or hook (a bad or too long path, malformed HTTP) get the
    // same error body as every other answer, rather than Fastify's or Node's own.
    routerOptions: { maxParamLength: MAX_PATH_PARAM_CHARS },
    frameworkErrors: (error, request, reply) => {
      reply.header('x-request-id', request.id);
      sendError(error, request, reply);
    },
    clientErrorHandler: clientErrorHandler(deps.logger.child({ component: 'api' })),
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);
  registerJsonBody(app);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    // An answer of the API is data, never a page: a browser shown one runs, loads and frames
    // nothing of it. The docs page and the UI set their own policies over this one.
    reply.header('content-security-policy', API_CSP);
    reply.header('x-frame-options', 'DENY');
    reply.header('x-content-type-options', 'nosniff');
  });
  registerAuth(app, deps.store, deps.localCredential);

  const metrics = new ApiMetrics({
    store: deps.store,
    queues: deps.queues,
    profiles: [...deps.profiles.keys()],
    logger: deps.logger,
    upstreamHealth: (profile) => deps.clients.health(profile),
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const seconds = reply.elapsedTime / 1000;
    metrics.httpRequests.inc({ method: request.method, route, status: reply.statusCode });
    metrics.httpDuration.observe({ method: request.method, route }, seconds);
    const quiet = !route.startsWith(API_PREFIX) || route.startsWith(DOCS_PATH);
    // The token's name, never the token (the logger also redacts authorization headers).
    request.log[quiet ? 'debug' : 'info'](
      {
        reqId: request.id,
        method: request.method,
        url: request.url.split('?')[0],
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
        tokenName: request.apiToken?.name,
      },
      'API request',
    );
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'schedflow local API',
        version: packageVersion(),
        description:
          "Submit, follow and cancel Slurm jobs and pipeline runs through the schedflow daemon. Authenticate with `Authorization: Bearer <token>`; tokens are made with `schedflow tokens create --name <name> --scopes read,submit,cancel`. Each operation's `operationId` never changes within /api/v1 (docs/http-api.md).",
        license: { name: 'MIT', identifier: 'MIT' },
      },
      // Relative: the daemon that served the document, at whatever address the client reached it
      // (OpenAPI 3.1 resolves a relative server URL against the document's own URL). The listen
      // address would be wrong behind a proxy or a port forward, and would make the committed
      // docs/openapi.json depend on the machine. Paths are absolute (`/api/v1/...`, `/healthz`),
      // as the API's own links are, so the server is the root of the daemon's address.
      servers: [{ url: '/', description: 'the daemon that serves this document' }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'a token from `schedflow tokens create`' },
        },
      },
      tags: [
        { name: 'jobs', description: 'job requests' },
        { name: 'pipelines', description: 'pipelines and their runs' },
        { name: 'history', description: "Slurm's accounting records" },
        { name: 'audit', description: 'the audit log: who did what' },
        { name: 'cluster', description: "the cluster's partitions, nodes, reservations and queue" },
        { name: 'operations', description: 'health, readiness and metrics' },
      ],
    },
    transform: jsonSchemaTransform,
    transformObject: (document) => withBodyExamples(withoutUnusedSchemas(jsonSchemaTransformObject(document))),
  });
  // Registered before the rate limit, so the docs page and its assets are not counted.
  await app.register(swaggerUi, {
    routePrefix: DOCS_PATH,
    // Its page, scripts and styles are all served from here (no inline script, no validator
    // badge): nothing else may run in it, and no other site may frame it (clickjacking the
    // "Authorize" dialog, where a token is pasted).
    staticCSP: DOCS_CSP,
  });
  app.get(OPENAPI_PATH, { schema: { hide: true } }, async () => app.swagger());

  await app.register(rateLimit, {
    global: true,
    max: deps.settings.rateLimitPerMin,
    timeWindow: 60_000,
    // After authentication (onRequest: the API's token, the UI's session), so the limit is per
    // token or per UI session rather than per address: what others at the same address (behind
    // the same proxy) send never spends theirs.
    hook: 'preValidation',
    keyGenerator: (request) => rateKeyOf(request).key,
    // The UI's pages without a session answer a redirect or the login page, which read nothing:
    // not counted, so that no flood of them from an address locks its users out of logging in.
    // Failed logins have their own bound (ui-plugin.ts).
    allowList: (request) => !request.apiToken && !request.uiSession && isUiPath(request.url),
    // One limit per token for the deployment, not one per web process.
    ...(deps.rateLimitCounts && {
      redis: deps.rateLimitCounts.redis,
      nameSpace: `${deps.rateLimitCounts.prefix}:api-rate:`,
      // Redis away: requests go on uncounted rather than all failing (reads need no Redis).
      skipOnError: true,
    }),
    errorResponseBuilder: (request, context) =>
      new RateLimitedApiError(Number(context.max), Math.max(1, Math.ceil(context.ttl / 1000)), rateKeyOf(request).of),
  });
  registerIdempotency(app, deps.store, deps.logger);
  registerReadTurns(app);

  await app.register(healthRoutes, { deps, metrics });
  await app.register(jobRoutes, { deps });
  await app.register(jobControlRoutes, { deps });
  await app.register(jobOutputRoutes, { deps });
  await app.register(historyRoutes, { deps });
  await app.register(runRoutes, { deps });
  await app.register(auditRoutes, { deps });
  await app.register(clusterRoutes, { deps });
  await app.register(pipelineRoutes, { deps });
  if (deps.ui) await app.register(uiPlugin, { deps, settings: deps.ui });
  // A browser pointed at the daemon's address lands on a page, not on a JSON 404.
  app.get('/', { schema: { hide: true } }, async (_request, reply) =>
    reply.redirect(deps.ui ? `${UI_PREFIX}/` : DOCS_PATH),
  );
  return app;
}

/** What a request's requests per minute are counted under. */
function rateKeyOf(request: FastifyRequest): { key: string; of: 'token' | 'UI session' | 'address' } {
  if (request.apiToken) return { key: `token:${request.apiToken.id}`, of: 'token' };
  if (request.uiSession) return { key: `ui-session:${request.uiSession.sessionKey}`, of: 'UI session' };
  return { key: `ip:${request.ip}`, of: 'address' };
}

const isUiPath = (url: string): boolean =>
  url === UI_PREFIX || url.startsWith(`${UI_PREFIX}/`) || url.startsWith(`${UI_PREFIX}?`);

type OpenApiDocument = ReturnType<typeof jsonSchemaTransformObject>;

/**
 * The type provider puts an input and an output variant of every named schema
 * into the components; keeps those the paths use (directly or through other
 * components), so the document lists what the API really takes and gives, in
 * the order of their names.
 */
function withoutUnusedSchemas(document: OpenApiDocument): OpenApiDocument {
  const openapi = document as { paths?: unknown; components?: { schemas?: Record<string, unknown> } };
  const schemas = openapi.components?.schemas;
  if (!schemas) return document;
  const used = new Set<string>();
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) {
      for (const item of value) visit(item);
    } else if (value !== null && typeof value === 'object') {
      for (const [key, child] of Object.entries(value)) {
        const name =
          key === '$ref' && typeof child === 'string' ? /^#\/components\/schemas\/(.+)$/.exec(child)?.[1] : undefined;
        if (name !== undefined && !used.has(name)) {
          used.add(name);
          visit(schemas[name]);
        } else {
          visit(child);
        }
      }
    }
  };
  visit(openapi.paths);
  // By name: the registry's order is the order the schema modules were first imported in, which
  // differs between the daemon, the CLI and a script, and the document is the same for all.
  const kept = Object.fromEntries(
    Object.entries(schemas)
      .filter(([name]) => used.has(name))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
  return { ...document, components: { ...openapi.components, schemas: kept } } as OpenApiDocument;
}

/**
 * A request body that is a named component (`$ref`) gets that component's examples
 * (BODY_EXAMPLES_KEY, src/http/api/shared-schemas.ts) on its media type, as @fastify/swagger
 * does itself for a body written in place; the components keep none (documentation tools and
 * client generators read a body's examples from its media type).
 */
function withBodyExamples(document: OpenApiDocument): OpenApiDocument {
  type Media = { schema?: { $ref?: string }; examples?: unknown };
  const openapi = document as {
    paths?: Record<string, Record<string, { requestBody?: { content?: Record<string, Media> } }>>;
    components?: { schemas?: Record<string, Record<string, unknown>> };
  };
  const schemas = openapi.components?.schemas ?? {};
  for (const operations of Object.values(openapi.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      for (const media of Object.values(operation.requestBody?.content ?? {})) {
        const name = /^#\/components\/schemas\/(.+)$/.exec(media.schema?.$ref ?? '')?.[1];
        const examples = name === undefined ? undefined : schemas[name]?.[BODY_EXAMPLES_KEY];
        if (examples !== undefined && media.examples === undefined) media.examples = examples;
      }
    }
  }
  for (const schema of Object.values(schemas)) delete schema[BODY_EXAMPLES_KEY];
  return document;
}
