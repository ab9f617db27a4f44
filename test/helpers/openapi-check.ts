import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';

/**
 * Every answer the tests get from a daemon's local API, checked against the OpenAPI document
 * the daemon serves (GET /api/v1/openapi.json): the operation must declare the status (or a
 * `4XX`-style range, or `default`), the answer's media type must be one it declares, and a JSON
 * body must match the declared schema. So a route cannot answer what its document does not say:
 * the document is what clients are generated from (issue 38).
 *
 * Called by the test helpers that talk to the daemon (http(), apiClient().call, the fuzz test's
 * own sender, `checkedFetch` for tests that need fetch's Response); a mismatch throws
 * OpenApiDriftError and fails the test that made the call.
 */

/** What was asked and what came back, as any of the helpers sees it. */
export interface ApiExchange {
  method: string;
  /** The full URL asked (origin, path, query). */
  url: string;
  status: number;
  /** The answer's Content-Type header, when it had one. */
  contentType: string | null | undefined;
  text: string;
}

export class OpenApiDriftError extends Error {
  override name = 'OpenApiDriftError';
}

interface Operation {
  responses?: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}

export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, unknown> };
}

const DOCUMENT_PATH = '/api/v1/openapi.json';

/**
 * Paths of the daemon's own that the document does not list: itself and the Swagger UI
 * (hidden routes). Everything else under /api/v1/ and the probes are checked; the UI (/ui/),
 * the simulator (/slurm/, /slurmdb/, /_sim), the proxy and webhook receivers are not ours to
 * check here.
 */
const isUnlisted = (path: string): boolean =>
  path === DOCUMENT_PATH || path === '/api/v1/docs' || path.startsWith('/api/v1/docs/');

/**
 * Origin, path and query of a URL as sent: not through `new URL`, which would resolve the dot
 * segments the fuzz test sends as they are (fetch resolves them before sending, so its callers
 * give the resolved URL).
 */
export function splitUrl(url: string): { origin: string; pathname: string; search: string } | undefined {
  const match = /^(https?:\/\/[^/?#]+)(\/[^?#]*)?(\?[^#]*)?/.exec(url);
  if (!match?.[1]) return undefined;
  return { origin: match[1], pathname: match[2] ?? '/', search: match[3] ?? '' };
}

/**
 * The path as the router matches it: an escaped ASCII character is that character (`%6Aobs` is
 * `jobs`), but for those that would change the path's shape (`/`, `?`, `#`, `%`).
 */
function routed(path: string): string {
  return path.replace(/%([0-7][0-9a-f])/gi, (escaped, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return '/?#%'.includes(char) ? escaped : char;
  });
}

/** Whether an answer to this URL is the local API's, to be checked against the document. */
export function isApiPath(path: string): boolean {
  if (isUnlisted(path)) return false;
  return path.startsWith('/api/v1/') || path === '/healthz' || path === '/readyz' || path === '/metrics';
}

/**
 * Statuses Node's HTTP parser and Fastify's router answer before any route (a request line or
 * headers over 16 KiB, a path parameter over the router's bound): the README's table lists them,
 * not each operation.
 */
const BEFORE_ANY_ROUTE = new Set([414, 431]);

// ---- the document, once per daemon origin

/**
 * Per origin; shared by every test file a fork runs (isolate: false), which is fine: every daemon
 * of a run serves the same document. A port reused by another file's daemon serves it too.
 */
const documents = new Map<string, Promise<OpenApiDocument>>();
/** The last document read from any daemon: for a daemon already stopped (or stopping) when first asked. */
let lastDocument: { origin: string; document: OpenApiDocument } | undefined;

/**
 * Forgets what an origin served: for the test of this check, whose server serves a made-up
 * document, which a daemon later given the same port must not be checked against.
 */
export function forgetDocument(origin: string): void {
  documents.delete(origin);
  if (lastDocument?.origin === origin) lastDocument = undefined;
}

/** docs/openapi.json, the committed copy of the served document, when the branch has it. */
const COMMITTED = fileURLToPath(new URL('../../docs/openapi.json', import.meta.url));

async function documentOf(origin: string): Promise<OpenApiDocument> {
  let pending = documents.get(origin);
  if (!pending) {
    pending = fetchDocument(origin);
    documents.set(origin, pending);
    // A failed read is not kept: the next answer of that origin asks again.
    pending.catch(() => documents.delete(origin));
  }
  try {
    return await pending;
  } catch (error) {
    if (lastDocument) return lastDocument.document;
    if (existsSync(COMMITTED)) return JSON.parse(readFileSync(COMMITTED, 'utf8')) as OpenApiDocument;
    throw new OpenApiDriftError(
      `cannot check the answer against the OpenAPI document: ${origin}${DOCUMENT_PATH} could not be read (${(error as Error).message}) and no document was read before`,
    );
  }
}

async function fetchDocument(origin: string): Promise<OpenApiDocument> {
  const response = await fetch(`${origin}${DOCUMENT_PATH}`, { signal: AbortSignal.timeout(10_000) });
  if (response.status !== 200) {
    await response.body?.cancel();
    throw new Error(`answered ${response.status}`);
  }
  // Every daemon of a run serves the same text: one parsed document for them all, and so one
  // compile of each schema (compiledOf is keyed by the document) rather than one per daemon.
  const text = await response.text();
  let document = byText.get(text);
  if (!document) {
    document = JSON.parse(text) as OpenApiDocument;
    byText.set(text, document);
  }
  lastDocument = { origin, document };
  return document;
}

const byText = new Map<string, OpenApiDocument>();

/**
 * Reads the document of a daemon just started and compiles every schema its answers declare, so
 * that no test's first call to the API pays for it inside what it times.
 */
export async function prepareApiCheck(origin: string): Promise<void> {
  const document = await documentOf(origin);
  for (const operations of Object.values(document.paths)) {
    for (const operation of Object.values(operations ?? {})) {
      for (const response of Object.values(operation?.responses ?? {})) {
        for (const [type, media] of Object.entries(response?.content ?? {})) {
          if (isJson(mediaTypeOf(type)) && media.schema !== undefined) validatorFor(document, media.schema);
        }
      }
    }
  }
}

// ---- operations and their schemas

interface CompiledDocument {
  ajv: Ajv2020;
  /** Fewest parameters first: a literal path wins over a template that would match it too. */
  templates: { template: string; pattern: RegExp }[];
  validators: Map<string, ValidateFunction>;
}

const compiled = new WeakMap<OpenApiDocument, CompiledDocument>();
let documentCount = 0;

function compiledOf(document: OpenApiDocument): CompiledDocument {
  let found = compiled.get(document);
  if (found) return found;
  // Formats are not checked: the document's only formats (date-time, uri) are on inputs, and
  // checking them would need ajv-formats, which is not a dependency of ours.
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema({ $id: componentsId(document), components: document.components ?? {} });
  const templates = Object.keys(document.paths)
    .map((template) => ({
      template,
      pattern: new RegExp(
        `^${template
          .split(/\{[^}]+\}/)
          .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
          .join('[^/]+')}$`,
      ),
    }))
    .sort((a, b) => countParams(a.template) - countParams(b.template));
  found = { ajv, templates, validators: new Map() };
  compiled.set(document, found);
  return found;
}

const countParams = (template: string): number => template.split('{').length - 1;

const componentIds = new WeakMap<OpenApiDocument, string>();
function componentsId(document: OpenApiDocument): string {
  let id = componentIds.get(document);
  if (!id) {
    id = `urn:schedflow:openapi-check:${++documentCount}`;
    componentIds.set(document, id);
  }
  return id;
}

/** The schema with its `#/components/...` references pointed at the document's components. */
function rebased(schema: unknown, id: string): unknown {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', `"${id}#/components/`));
}

/** One compile per schema of a document: routes that answer the same schema (Error) share it. */
function validatorFor(document: OpenApiDocument, schema: unknown): ValidateFunction {
  const { ajv, validators } = compiledOf(document);
  const key = JSON.stringify(schema);
  let validate = validators.get(key);
  if (!validate) {
    validate = ajv.compile(rebased(schema, componentsId(document)) as object);
    validators.set(key, validate);
  }
  return validate;
}

const mediaTypeOf = (contentType: string | null | undefined): string =>
  (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';

const isJson = (mediaType: string): boolean => mediaType === 'application/json' || mediaType.endsWith('+json');

function describeErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .slice(0, 12)
    .map((e) => {
      const where = e.instancePath || '(the body)';
      const extra =
        e.keyword === 'additionalProperties'
          ? ` (${String((e.params as { additionalProperty?: unknown }).additionalProperty)})`
          : e.keyword === 'enum'
            ? ` (${JSON.stringify((e.params as { allowedValues?: unknown }).allowedValues)})`
            : '';
      return `  ${where}: ${e.message ?? e.keyword}${extra}`;
    })
    .join('\n');
}

const HINT =
  'Fix the route (its answer is what users get) or its schema and declared statuses (src/http/api/routes/*.schema.ts and the `response:` of the route) so that they agree.';

/**
 * The problems of an answer against a document, none when it agrees. Pure: its test
 * (test/integration/api/openapi-check.test.ts) gives it a made-up document and answers.
 */
export function problemsOf(document: OpenApiDocument, exchange: ApiExchange): string[] {
  const path = routed(splitUrl(exchange.url)?.pathname ?? '');
  const method = exchange.method.toUpperCase();
  const { templates } = compiledOf(document);
  const template = templates.find((t) => t.pattern.test(path))?.template;
  // HEAD is every GET's (Fastify's exposeHeadRoutes), with no body.
  const operation = template ? document.paths[template]?.[method === 'HEAD' ? 'get' : method.toLowerCase()] : undefined;
  const mediaType = mediaTypeOf(exchange.contentType);
  const hasBody = method !== 'HEAD' && exchange.text.length > 0;

  let response: { content?: Record<string, { schema?: unknown }> } | undefined;
  if (!operation) {
    // No operation: the daemon's 404 (no route) or 405 (another method), in the error body.
    if (exchange.status < 400) {
      return [`${method} ${path} answered ${exchange.status} but the document lists no such operation`];
    }
    if (!document.components?.schemas?.Error) return [];
    response = { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
  } else {
    const responses = operation.responses ?? {};
    const declared =
      responses[String(exchange.status)] ?? responses[`${Math.floor(exchange.status / 100)}XX`] ?? responses.default;
    if (!declared) {
      if (!BEFORE_ANY_ROUTE.has(exchange.status)) {
        return [
          `status ${exchange.status} is not declared for ${method === 'HEAD' ? 'GET' : method} ${template} (declared: ${Object.keys(responses).join(', ') || 'none'})`,
        ];
      }
      response = { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    } else {
      response = declared;
    }
  }

  if (!hasBody) return [];
  const content = response.content ?? {};
  const declaredTypes = Object.keys(content);
  if (declaredTypes.length === 0) {
    return [`a body (${mediaType || 'no Content-Type'}) where the document declares none`];
  }
  const media =
    content[mediaType] ?? Object.entries(content).find(([type]) => mediaTypeOf(type) === mediaType)?.[1] ?? undefined;
  if (!media) {
    return [`Content-Type ${mediaType || '(none)'} is not one the document declares (${declaredTypes.join(', ')})`];
  }
  if (!isJson(mediaType) || media.schema === undefined) return [];
  let body: unknown;
  try {
    body = JSON.parse(exchange.text);
  } catch {
    return [`the body is not JSON though its Content-Type is ${mediaType}`];
  }
  const validate = validatorFor(document, media.schema);
  return validate(body) ? [] : [`the body does not match the declared schema:\n${describeErrors(validate.errors)}`];
}

/** Throws OpenApiDriftError when the answer disagrees with the document its daemon serves. */
export async function checkApiAnswer(exchange: ApiExchange): Promise<void> {
  const url = splitUrl(exchange.url);
  // A request target that is no path (the fuzz test's absolute-form or `*`): no operation's.
  if (!url || !isApiPath(routed(url.pathname))) return;
  const document = await documentOf(url.origin);
  const problems = problemsOf(document, exchange);
  if (problems.length === 0) return;
  const shown = exchange.text.length > 1000 ? `${exchange.text.slice(0, 1000)}…` : exchange.text;
  throw new OpenApiDriftError(
    [
      `The answer to ${exchange.method.toUpperCase()} ${url.pathname}${url.search} (${exchange.status}, ${exchange.contentType ?? 'no Content-Type'}) does not agree with the OpenAPI document:`,
      ...problems.map((p) => `- ${p}`),
      `body: ${shown}`,
      HINT,
    ].join('\n'),
  );
}

/**
 * fetch, with the answer checked when it is the local API's: for tests that need the Response,
 * and for the typed client's tests (its `fetch` option).
 */
export const checkedFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init);
  const url = new URL(input instanceof Request ? input.url : input);
  if (!isApiPath(url.pathname)) return response;
  const text = await response.clone().text();
  await checkApiAnswer({
    method: init?.method ?? (input instanceof Request ? input.method : 'GET'),
    url: url.href,
    status: response.status,
    contentType: response.headers.get('content-type'),
    text,
  });
  return response;
};
