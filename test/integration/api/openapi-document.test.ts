import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  controlJobBody,
  retryTasksBody,
  submitJobBody,
  updateJobBody,
} from '../../../src/http/api/routes/jobs.schema.js';
import { triggerRunBody } from '../../../src/http/api/routes/pipelines.schema.js';
import { runResumeBody } from '../../../src/http/api/routes/runs.schema.js';
import { OPENAPI_FILE, openApiDocumentText } from '../../docs/openapi-document.js';

/**
 * docs/openapi.json, the document `npm run docs:openapi` writes from the routes: current, accepted
 * by `redocly lint` with its recommended rules (redocly.yaml), and what client generators need of
 * it: an operationId on every operation, the list docs/http-api.md promises; `security` on each;
 * every status a route answers, with the Error body; request bodies with examples their schema
 * takes. That a running daemon serves this same document: test/integration/api/api-routes.test.ts.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const run = promisify(execFile);

interface Operation {
  operationId?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string }[];
  requestBody?: { content: Record<string, { schema: unknown; examples?: Record<string, { value: unknown }> }> };
  responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
}
interface Document {
  servers?: { url: string }[];
  tags?: { name: string; description?: string }[];
  paths: Record<string, Record<string, Operation>>;
}

const committed = (): string => readFileSync(OPENAPI_FILE, 'utf8');
const documentOf = (): Document => JSON.parse(committed()) as Document;

function operationsOf(doc: Document): { method: string; path: string; op: Operation }[] {
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, op })),
  );
}

/** The operations that need no token: the probes and the metrics (src/http/api/routes/health.ts). */
const PUBLIC = ['getHealth', 'getReadiness', 'getMetrics'];

/** Each operation that takes a body, and the schema its route validates it with. */
const BODIES: Record<string, z.ZodType> = {
  submitJob: submitJobBody,
  updateJob: updateJobBody,
  holdJob: controlJobBody,
  releaseJob: controlJobBody,
  retryJobTasks: retryTasksBody,
  triggerPipelineRun: triggerRunBody,
  resumeRun: runResumeBody,
};

describe('docs/openapi.json', () => {
  let generated: string;
  beforeAll(async () => {
    generated = await openApiDocumentText();
  });

  it('is the document the routes declare (run `npm run docs:openapi` after changing a route or a schema)', () => {
    const lines = committed().split('\n');
    const wanted = generated.split('\n');
    const at = wanted.findIndex((line, i) => line !== lines[i]);
    const where =
      at === -1 ? '' : ` (line ${at + 1}: ${JSON.stringify(lines[at])}, the routes say ${JSON.stringify(wanted[at])})`;
    expect(committed() === generated, `docs/openapi.json is out of date${where}: run \`npm run docs:openapi\``).toBe(
      true,
    );
  });

  it('passes `redocly lint` with the recommended rules: no error, no warning', async () => {
    const { stdout } = await run(
      `${ROOT}node_modules/.bin/redocly`,
      ['lint', 'docs/openapi.json', '--config', 'redocly.yaml', '--format', 'json'],
      { cwd: ROOT, env: { ...process.env, REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', REDOCLY_TELEMETRY: 'off' } },
    ).catch((error: { stdout?: string; stderr?: string }) => {
      throw new Error(`redocly lint failed:\n${error.stdout ?? ''}\n${error.stderr ?? ''}`);
    });
    const report = JSON.parse(stdout) as { totals: { errors: number; warnings: number }; problems: unknown[] };
    expect(report.problems, JSON.stringify(report.problems, null, 2)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  });

  it('every operation has a camelCase operationId, unique, and they are the list docs/http-api.md promises', () => {
    const ids = operationsOf(documentOf()).map(({ op }) => op.operationId);
    for (const id of ids) expect(id).toMatch(/^[a-z][a-zA-Z]+$/);
    expect(new Set(ids).size).toBe(ids.length);
    // The page's table of operations: | `operationId` | `METHOD` | `/path` | …
    const page = readFileSync(`${ROOT}docs/http-api.md`, 'utf8');
    const promised = [...page.matchAll(/^\| `([a-zA-Z]+)` +\| `([A-Z]+)` +\| `([^`]+)` +\|/gm)].map(
      ([, id, method, path]) => `${id} ${method} ${path}`,
    );
    const served = operationsOf(documentOf()).map(({ method, path, op }) => `${op.operationId} ${method} ${path}`);
    expect(served.sort()).toEqual(promised.sort());
  });

  it('a relative server (the daemon that served it); security on every operation: none on the probes, a bearer token on the rest', () => {
    const doc = documentOf();
    expect(doc.servers).toEqual([{ url: '/', description: expect.any(String) }]);
    for (const { method, path, op } of operationsOf(doc)) {
      const expected = PUBLIC.includes(op.operationId ?? '') ? [] : [{ bearer: [] }];
      expect(op.security, `${method} ${path}`).toEqual(expected);
    }
  });

  it('tags: each operation has one, and each tag it names is described', () => {
    const doc = documentOf();
    const described = new Map((doc.tags ?? []).map((t) => [t.name, t.description]));
    for (const { method, path, op } of operationsOf(doc)) {
      expect(op.tags?.length, `${method} ${path}`).toBe(1);
      for (const tag of op.tags ?? []) expect(described.get(tag), `tag ${tag}`).toBeTruthy();
    }
  });

  it('every status a route answers is declared, errors with the Error body', () => {
    for (const { method, path, op } of operationsOf(documentOf())) {
      const what = `${method} ${path}`;
      const statuses = Object.keys(op.responses);
      // A bug, on any route (the error handler's 500 with a request id).
      expect(statuses, what).toContain('500');
      // A token: missing or unknown, lacking the scope, or past its rate limit.
      if (!PUBLIC.includes(op.operationId ?? ''))
        expect(statuses, what).toEqual(expect.arrayContaining(['401', '403', '429']));
      // Parameters or a body are validated.
      if ((op.parameters?.length ?? 0) > 0 || op.requestBody) expect(statuses, what).toContain('400');
      // A body is read on these methods whether the route takes one or not: too large, not JSON.
      if (['POST', 'PATCH', 'DELETE'].includes(method))
        expect(statuses, what).toEqual(expect.arrayContaining(['413', '415']));
      for (const status of statuses.filter((s) => Number(s) >= 400)) {
        // /readyz's 503 is its own answer (the checks that failed), not an error.
        if (path === '/readyz' && status === '503') continue;
        expect(op.responses[status]?.content?.['application/json']?.schema, `${what} ${status}`).toEqual({
          $ref: '#/components/schemas/Error',
        });
      }
    }
  });

  it('request bodies: each has named examples, and the schema its route validates with takes every one', () => {
    const withBody = operationsOf(documentOf()).filter(({ op }) => op.requestBody);
    expect(withBody.map(({ op }) => op.operationId).sort()).toEqual(Object.keys(BODIES).sort());
    for (const { op } of withBody) {
      const id = op.operationId ?? '';
      const examples = Object.entries(op.requestBody?.content['application/json']?.examples ?? {});
      expect(examples.length, id).toBeGreaterThan(0);
      for (const [name, example] of examples) {
        const parsed = BODIES[id]?.safeParse(example.value);
        expect(parsed?.success, `${id} example ${name}: ${JSON.stringify(parsed?.error?.issues)}`).toBe(true);
      }
    }
  });
});
