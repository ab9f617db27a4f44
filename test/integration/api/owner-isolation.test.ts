import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getRequest } from '../../../src/db/requests.js';
import { getRun } from '../../../src/db/runs.js';
import type { ApiScope } from '../../../src/db/schema.js';
import { createToken } from '../../../src/db/tokens.js';
import { buildApp } from '../../../src/http/app.js';
import { Secret } from '../../../src/lib/secret.js';
import { shellSpec } from '../../helpers/api.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { DIALECTS, type Dialect, testPostgres } from '../../helpers/histories.js';
import { waitFor } from '../../helpers/http.js';
import { checkedFetch } from '../../helpers/openapi-check.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * Issue 33's isolation matrix: every route the OpenAPI document lists (so a new route is in the
 * matrix without editing this file, and a route this file cannot classify fails it) × {own,
 * another owner's, unknown id} × {each scope of owner lab-a, an admin, an auditor}, on SQLite and
 * PostgreSQL; then the UI's pages and actions the same way. Properties: another owner's id
 * answers exactly as an unknown one (status and body, the id aside), lists hold none of another
 * owner's rows, the auditor reads everything and is refused every change. The steps of a run
 * lab-a reads through a pipeline's `allow:` read as its own (job page, output) and change as
 * unknown ids. The UI's matrix is made from its Fastify route table (a UI route this file cannot
 * classify fails it), and its live feed names to each session only what it may read. One daemon
 * per dialect.
 */

const pipelineFile = (owner: string, allow: string[] = []) =>
  [
    `owner: ${owner}`,
    ...(allow.length ? [`allow: [${allow.join(', ')}]`] : []),
    'schedule:',
    '  cron: "0 0 1 1 *"',
    'steps:',
    '  only:',
    '    script: |',
    '      #!/bin/sh',
    '      sleep 60',
  ].join('\n');

/** lab-a's pipeline, lab-b's, and lab-b's that lets lab-a in. */
const PIPELINES = {
  'pa.yaml': pipelineFile('lab-a'),
  'pb.yaml': pipelineFile('lab-b'),
  'pc.yaml': pipelineFile('lab-b', ['lab-a']),
};

type Who = 'read' | 'submit' | 'cancel' | 'control' | 'admin' | 'auditor';
/** Non-admins first: an admin's changes (on lab-b's things) come last. */
const WHO: readonly Who[] = ['read', 'submit', 'cancel', 'control', 'auditor', 'admin'];
const SCOPES: Record<Who, ApiScope[]> = {
  read: ['read'],
  submit: ['submit'],
  cancel: ['cancel'],
  control: ['control'],
  admin: ['admin'],
  auditor: ['audit'],
};

/** What a route acts on, for the ids it is given: a request, a run, a pipeline; or a list. */
type Target =
  | 'job'
  | 'run'
  | 'pipeline'
  | 'jobs'
  | 'runs'
  | 'pipelines'
  | 'history'
  | 'audit'
  | 'cluster'
  | 'create'
  | 'public';

/** Each route of the OpenAPI document by what it acts on. A route missing here fails the test. */
const TARGETS: Record<string, Target> = {
  'POST /api/v1/jobs': 'create',
  'GET /api/v1/jobs': 'jobs',
  'GET /api/v1/jobs/{id}': 'job',
  'DELETE /api/v1/jobs/{id}': 'job',
  'PATCH /api/v1/jobs/{id}': 'job',
  'POST /api/v1/jobs/{id}/hold': 'job',
  'POST /api/v1/jobs/{id}/release': 'job',
  'POST /api/v1/jobs/{id}/resubmit': 'job',
  'POST /api/v1/jobs/{id}/retry-tasks': 'job',
  'GET /api/v1/jobs/{id}/output': 'job',
  'GET /api/v1/history': 'history',
  'GET /api/v1/audit': 'audit',
  'GET /api/v1/cluster/{profile}/{view}': 'cluster',
  'GET /api/v1/runs': 'runs',
  'GET /api/v1/runs/{id}': 'run',
  'POST /api/v1/runs/{id}/cancel': 'run',
  'POST /api/v1/runs/{id}/hold': 'run',
  'POST /api/v1/runs/{id}/release': 'run',
  'POST /api/v1/runs/{id}/resume': 'run',
  'GET /api/v1/pipelines': 'pipelines',
  'POST /api/v1/pipelines/{name}/runs': 'pipeline',
  'POST /api/v1/pipelines/{name}/pause': 'pipeline',
  'POST /api/v1/pipelines/{name}/resume': 'pipeline',
  'POST /api/v1/pipelines/{name}/hold': 'pipeline',
  'POST /api/v1/pipelines/{name}/release': 'pipeline',
  'GET /healthz': 'public',
  'GET /readyz': 'public',
  'GET /metrics': 'public',
};

interface Route {
  method: string;
  path: string;
  /** The scope the document says it needs (from its description's `Scope:`), null: none. */
  secured: boolean;
}

interface Answer {
  status: number;
  text: string;
}

/** An answer with the id it was asked about (and per-request ids) taken out. */
function normalized(answer: Answer, id: string): string {
  return answer.text.replaceAll(id, '<id>').replace(/"request_id":"[^"]*"/g, '"request_id":"<r>"');
}

const UNKNOWN = {
  job: '00000000-0000-4000-8000-000000000000',
  run: '00000000-0000-4000-8000-000000000001',
  pipeline: 'nope',
};

/** What a UI route acts on: a request, run or pipeline (by its id), a list, or else. */
type UiTarget =
  | 'job'
  | 'run'
  | 'pipeline'
  | 'list'
  | 'audit'
  | 'admin'
  | 'board'
  | 'board-admin'
  | 'feed'
  | 'cluster'
  | 'public'
  | 'session';

/** Each route of the UI's route table by what it acts on. A UI route missing here fails the test. */
const UI_TARGETS: Record<string, UiTarget> = {
  'GET /ui': 'public',
  'GET /ui/': 'public',
  'GET /ui/login': 'public',
  'POST /ui/login': 'public',
  'GET /ui/assets/app.css': 'public',
  'GET /ui/assets/app.js': 'public',
  'POST /ui/logout': 'session',
  // What it sends: the live-feed test below.
  'GET /ui/events': 'feed',
  'GET /ui/jobs': 'list',
  'GET /ui/runs': 'list',
  'GET /ui/pipelines': 'list',
  'GET /ui/history': 'list',
  'GET /ui/profiles': 'list',
  'GET /ui/audit': 'audit',
  'GET /ui/cluster': 'cluster',
  'GET /ui/cluster/:profile': 'cluster',
  'GET /ui/jobs/:id': 'job',
  'POST /ui/jobs/:id/cancel': 'job',
  'POST /ui/jobs/:id/retry': 'job',
  'POST /ui/jobs/:id/retry-tasks': 'job',
  'POST /ui/jobs/:id/hold': 'job',
  'POST /ui/jobs/:id/release': 'job',
  'POST /ui/jobs/:id/update': 'job',
  'GET /ui/runs/:id': 'run',
  'POST /ui/runs/:id/cancel': 'run',
  'POST /ui/runs/:id/hold': 'run',
  'POST /ui/runs/:id/release': 'run',
  'POST /ui/runs/:id/resume': 'run',
  'GET /ui/pipelines/:name': 'pipeline',
  'POST /ui/pipelines/:name/trigger': 'pipeline',
  'POST /ui/pipelines/:name/pause': 'pipeline',
  'POST /ui/pipelines/:name/resume': 'pipeline',
  'POST /ui/queue-actions/:name/:action': 'admin',
};

interface UiRoute {
  method: string;
  path: string;
}

/** The queue boards' own routes (bull-board's pages, API and assets) are one target each. */
function uiTargetOf(route: UiRoute): UiTarget | undefined {
  if (route.path === '/ui/queues' || route.path.startsWith('/ui/queues/')) return 'board';
  if (route.path === '/ui/queues-admin' || route.path.startsWith('/ui/queues-admin/')) return 'board-admin';
  return UI_TARGETS[`${route.method} ${route.path}`];
}

/** A route's path under /ui with its first parameter set to `id` and any other to `x`. */
function uiPath(path: string, id: string): string {
  let first = true;
  const filled = path.replace(/:[A-Za-z]+|\*/g, () => {
    const value = first ? encodeURIComponent(id) : 'x';
    first = false;
    return value;
  });
  return filled.slice('/ui'.length);
}

/**
 * The routes under /ui of Fastify's route table, read from its printed tree (`printRoutes`, one
 * node a line, four columns a level, a node's methods in brackets). HEAD routes are the GET
 * routes' own.
 */
function uiRoutesOf(tree: string): UiRoute[] {
  const stack: string[] = [];
  const routes: UiRoute[] = [];
  for (const line of tree.split('\n')) {
    const m = /^([│ ]*)[└├]── (.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    stack.length = (m[1] ?? '').length / 4;
    stack.push(m[2] ?? '');
    const path = stack.join('');
    for (const method of m[3]?.split(', ') ?? []) {
      if (method !== 'HEAD' && (path === '/ui' || path.startsWith('/ui/'))) routes.push({ method, path });
    }
  }
  return routes;
}

/** A change as the live feed sends it to a page. */
interface FeedChange {
  kind: 'job' | 'run';
  id: string;
  state: string;
  run?: string | null;
}

describe.each(DIALECTS)('owner isolation on %s', (dialect: Dialect) => {
  const pg = testPostgres();
  let redis: TestRedis;
  let sim: TestSim;
  let td: TestDaemon;
  let url: string;
  const tokens = {} as Record<Who | 'labB', string>;
  const ids = {
    ownJob: '',
    otherJob: '',
    ownRun: '',
    otherRun: '',
    allowedRun: '',
    /** A step of allowedRun: lab-b's request, which lab-a reads (as the run) and may not change. */
    allowedStep: '',
    /** A step of otherRun: lab-b's, as unknown to lab-a as otherJob. */
    otherStep: '',
  };

  const call = async (method: string, path: string, token: string | null, body?: unknown): Promise<Answer> => {
    const res = await checkedFetch(`${url}${path}`, {
      method,
      redirect: 'manual',
      headers: {
        ...(token && { authorization: `Bearer ${token}` }),
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, text: await res.text() };
  };

  beforeAll(async () => {
    redis = await startTestRedis();
    sim = await startSim();
    td = await startTestDaemon(
      sim.url,
      redis.url,
      dialect === 'postgres'
        ? { databaseUrl: new Secret(await pg.createDatabase('iso')), webhookSecret: new Secret('test-webhook-secret') }
        : {},
      {},
      PIPELINES,
    );
    if (!td.daemon.apiUrl) throw new Error('no local API');
    url = td.daemon.apiUrl;
    const store = td.daemon.history.store;
    for (const who of WHO) {
      const owner = who === 'admin' ? 'default' : who === 'auditor' ? 'auditors' : 'lab-a';
      tokens[who] = (await createToken(store, { name: `iso-${who}`, scopes: SCOPES[who], owner })).token;
    }
    tokens.labB = (
      await createToken(store, { name: 'iso-lab-b', scopes: ['read', 'submit', 'cancel'], owner: 'lab-b' })
    ).token;
    const labA = (
      await createToken(store, { name: 'iso-lab-a-all', scopes: ['read', 'submit', 'cancel'], owner: 'lab-a' })
    ).token;
    const submit = async (token: string) => {
      const r = await call('POST', '/api/v1/jobs', token, { spec: shellSpec('iso', 'sleep 60') });
      expect(r.status, r.text).toBe(201);
      return (JSON.parse(r.text) as { id: string }).id;
    };
    ids.ownJob = await submit(labA);
    ids.otherJob = await submit(tokens.labB);
    const trigger = async (token: string, pipeline: string) => {
      const r = await call('POST', `/api/v1/pipelines/${pipeline}/runs`, token, {});
      expect(r.status, r.text).toBe(201);
      return (JSON.parse(r.text) as { id: string }).id;
    };
    ids.ownRun = await trigger(labA, 'pa');
    ids.otherRun = await trigger(tokens.labB, 'pb');
    ids.allowedRun = await trigger(labA, 'pc');
    const stepOf = (run: string) =>
      waitFor(
        async () => {
          const r = await call('GET', `/api/v1/runs/${run}`, tokens.admin);
          return (JSON.parse(r.text) as { steps?: { id: string }[] }).steps?.[0]?.id;
        },
        { what: `a step of run ${run}` },
      );
    ids.allowedStep = await stepOf(ids.allowedRun);
    ids.otherStep = await stepOf(ids.otherRun);
  }, 60_000);

  afterAll(async () => {
    await td?.stop();
    await sim?.stop();
    await redis?.stop();
  });

  const idsOf = (target: 'job' | 'run' | 'pipeline') =>
    target === 'job'
      ? { own: ids.ownJob, other: ids.otherJob, unknown: UNKNOWN.job }
      : target === 'run'
        ? { own: ids.ownRun, other: ids.otherRun, unknown: UNKNOWN.run }
        : { own: 'pa', other: 'pb', unknown: UNKNOWN.pipeline };

  const routes = async (): Promise<Route[]> => {
    const doc = JSON.parse((await call('GET', '/api/v1/openapi.json', null)).text) as {
      paths: Record<string, Record<string, { security?: unknown[] }>>;
    };
    return Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({
        method: method.toUpperCase(),
        path,
        secured: (op.security?.length ?? 0) > 0,
      })),
    );
  };

  it('classifies every route of the OpenAPI document (a new route must be added to the matrix)', async () => {
    const unknown = (await routes()).map((r) => `${r.method} ${r.path}`).filter((key) => !(key in TARGETS));
    expect(unknown, 'give these routes a target in TARGETS').toEqual([]);
  });

  it('every route × {own, another owner’s, unknown id} × {each scope, admin, auditor}: another’s id ≡ unknown', async () => {
    const all = (await routes()).filter((r) => r.secured);
    // Reads before changes: a change on an own id must not make the later reads differ.
    const ordered = [...all.filter((r) => r.method === 'GET'), ...all.filter((r) => r.method !== 'GET')];
    let cases = 0;
    const lastChangeOfOther = new Map<string, string | undefined>();
    const stateOf = async (target: string, id: string) =>
      target === 'job' ? (await getRequest(td.daemon.history.store, id))?.state : target;
    for (const who of WHO) {
      if (who === 'admin') {
        // Before the admin's turn: lab-a's changes reached nothing of lab-b's.
        expect((await getRequest(td.daemon.history.store, ids.otherJob))?.state).not.toBe('cancelled');
      }
      for (const route of ordered) {
        const target = TARGETS[`${route.method} ${route.path}`];
        if (target !== 'job' && target !== 'run' && target !== 'pipeline') continue;
        const { own, other, unknown } = idsOf(target);
        const at = (id: string) => route.path.replace(/\{(id|name)\}/, encodeURIComponent(id));
        // A PATCH needs a change to name (an empty one is the caller's mistake, 400 before any id is read).
        const body =
          route.method === 'GET' || route.method === 'DELETE'
            ? undefined
            : route.method === 'PATCH'
              ? { comment: 'isolation' }
              : {};
        const label = `${who} ${route.method} ${route.path}`;
        const otherAnswer = await call(route.method, at(other), tokens[who], body);
        const unknownAnswer = await call(route.method, at(unknown), tokens[who], body);
        cases += 2;
        const changes = route.method !== 'GET';
        if (who === 'auditor' && changes) {
          // The auditor changes nothing, anyone's.
          expect(otherAnswer.status, label).toBe(403);
          expect(unknownAnswer.status, label).toBe(403);
          continue;
        }
        if (who === 'admin' || (who === 'auditor' && !changes)) {
          // Admins and auditors see every owner's: another's id is no unknown one to them.
          expect(otherAnswer.status, `${label}: ${otherAnswer.text}`).not.toBe(404);
          expect(unknownAnswer.status, label).toBe(404);
          continue;
        }
        // A principal of lab-a: another owner's id answers exactly as an unknown one.
        if (changes && !lastChangeOfOther.has(target)) {
          const before = await stateOf(target, other);
          lastChangeOfOther.set(target, before);
        }
        expect(otherAnswer.status, `${label}: ${otherAnswer.text}`).toBe(unknownAnswer.status);
        expect(normalized(otherAnswer, other), label).toBe(normalized(unknownAnswer, unknown));
        expect(otherAnswer.text, label).not.toContain('lab-b');
        if (target === 'job') {
          // A step of a run lab-b owns: as unknown as any of lab-b's requests.
          const otherStep = await call(route.method, at(ids.otherStep), tokens[who], body);
          // A step of a run lab-a reads through `allow:`: read as the run is; changed as unknown.
          const allowedStep = await call(route.method, at(ids.allowedStep), tokens[who], body);
          cases += 2;
          expect(normalized(otherStep, ids.otherStep), `${label} (another's step)`).toBe(
            normalized(unknownAnswer, unknown),
          );
          if (changes || unknownAnswer.status === 403) {
            expect(allowedStep.status, `${label} (allowed step): ${allowedStep.text}`).toBe(unknownAnswer.status);
            expect(normalized(allowedStep, ids.allowedStep), `${label} (allowed step)`).toBe(
              normalized(unknownAnswer, unknown),
            );
          } else {
            expect(allowedStep.text, `${label} (allowed step)`).not.toContain('no job request');
            if (route.path === '/api/v1/jobs/{id}') expect(allowedStep.status, label).toBe(200);
          }
        }
        if (otherAnswer.status !== 403) {
          // With the scope: its own id is found (whatever the action then answers).
          const ownAnswer = await call(route.method, at(own), tokens[who], body);
          cases++;
          expect(ownAnswer.status, `${label} (own): ${ownAnswer.text}`).not.toBe(404);
        }
      }
    }
    expect(cases).toBeGreaterThan(50);
  }, 120_000);

  it('lists: never another owner’s rows; admins and auditors see every owner’s', async () => {
    for (const who of WHO) {
      const jobs = JSON.parse((await call('GET', '/api/v1/jobs?limit=200', tokens[who])).text) as {
        items?: { id: string; owner: string }[];
      };
      const runs = JSON.parse((await call('GET', '/api/v1/runs?limit=200', tokens[who])).text) as {
        items?: { id: string; owner: string; pipeline: string }[];
      };
      const pipelines = JSON.parse((await call('GET', '/api/v1/pipelines', tokens[who])).text) as {
        items?: { name: string; owner: string; allow: string[] }[];
      };
      const history = await call('GET', '/api/v1/history?limit=200', tokens[who]);
      // Every owner's actions: admins and auditors only (docs/audit.md).
      const audit = await call('GET', '/api/v1/audit', tokens[who]);
      expect(audit.status, `${who} audit`).toBe(who === 'admin' || who === 'auditor' ? 200 : 403);
      if (who === 'submit' || who === 'cancel' || who === 'control') {
        // Without read (or audit) the lists are refused outright.
        expect(jobs.items, who).toBeUndefined();
        continue;
      }
      const everyOwner = who === 'admin' || who === 'auditor';
      const jobIds = jobs.items?.map((j) => j.id) ?? [];
      const runIds = runs.items?.map((r) => r.id) ?? [];
      const names = pipelines.items?.map((p) => p.name) ?? [];
      expect(jobIds, who).toContain(ids.ownJob);
      expect(runIds, who).toContain(ids.ownRun);
      expect(runIds, `${who}: a run of a pipeline that allows lab-a`).toContain(ids.allowedRun);
      expect(names, who).toEqual(expect.arrayContaining(['pa', 'pc']));
      if (everyOwner) {
        expect(jobIds, who).toContain(ids.otherJob);
        expect(runIds, who).toContain(ids.otherRun);
        expect(names, who).toContain('pb');
      } else {
        expect(
          jobs.items?.every((j) => j.owner === 'lab-a'),
          who,
        ).toBe(true);
        expect(jobIds, who).not.toContain(ids.otherJob);
        expect(runIds, who).not.toContain(ids.otherRun);
        expect(names, who).not.toContain('pb');
        expect(history.text, who).not.toContain(ids.otherJob);
        expect(history.text, who).not.toContain('lab-b');
      }
      // The cluster's queue is every user's: job names, users and accounts to admins and auditors only.
      const queue = JSON.parse((await call('GET', '/api/v1/cluster/test/queue', tokens[who])).text) as {
        anonymised?: boolean;
        jobs?: { name: string | null; user: string | null; account: string | null }[];
      };
      expect(queue.anonymised, `${who} queue`).toBe(!everyOwner);
      if (!everyOwner)
        expect(queue.jobs?.every((j) => j.name === null && j.user === null && j.account === null)).toBe(true);
      expect(JSON.stringify(queue), who).not.toContain(ids.otherJob);
    }
  });

  it('the auditor is refused every state-changing route, even on an unknown id', async () => {
    for (const route of (await routes()).filter((r) => r.secured && r.method !== 'GET')) {
      const path = route.path.replace(/\{(id|name)\}/, 'x');
      const r = await call(route.method, path, tokens.auditor, route.method === 'DELETE' ? undefined : {});
      expect(r.status, `${route.method} ${route.path}`).toBe(403);
    }
  });

  describe('the web UI', () => {
    const sessions = {} as Record<Who, string>;
    let uiRoutes: UiRoute[] = [];

    /** An open `/ui/events` stream of a session: the changes it was sent, as they come. */
    const openFeed = async (cookie: string) => {
      const controller = new AbortController();
      const res = await fetch(`${url}/ui/events`, {
        headers: { cookie: `schedflow_ui=${cookie}` },
        signal: controller.signal,
      });
      expect(res.status).toBe(200);
      const seen: FeedChange[] = [];
      const body = res.body;
      const reading = (async () => {
        if (!body) return;
        const decoder = new TextDecoder();
        let text = '';
        try {
          for await (const chunk of body) {
            text += decoder.decode(chunk as Uint8Array, { stream: true });
            for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n')) {
              const block = text.slice(0, end);
              text = text.slice(end + 2);
              const data = /^data: (.*)$/m.exec(block)?.[1];
              if (block.startsWith('event: change\n') && data) seen.push(...(JSON.parse(data) as FeedChange[]));
            }
          }
        } catch {
          // Closed by the test.
        }
      })();
      return {
        seen,
        has: (id: string) => seen.some((c) => c.id === id),
        close: async () => {
          controller.abort();
          await reading;
        },
      };
    };

    const logIn = async (token: string): Promise<string> => {
      const nonce = 'login-nonce';
      const res = await fetch(`${url}/ui/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `schedflow_ui_login=${nonce}` },
        body: new URLSearchParams({ _login: nonce, next: '/ui/jobs', token }).toString(),
      });
      const cookie = res.headers
        .getSetCookie()
        .map((c) => /^schedflow_ui=([^;]+)/.exec(c)?.[1])
        .find((v) => v);
      if (!cookie) throw new Error(`login failed (${res.status}): ${(await res.text()).slice(0, 200)}`);
      return cookie;
    };
    const page = async (path: string, who: Who) => {
      const res = await fetch(`${url}/ui${path}`, {
        redirect: 'manual',
        headers: { cookie: `schedflow_ui=${sessions[who]}` },
      });
      return { status: res.status, text: await res.text(), location: res.headers.get('location') };
    };
    const post = async (path: string, who: Who) => {
      const csrf = /name="_csrf" value="([^"]+)"/.exec((await page('/jobs', who)).text)?.[1] ?? '';
      const res = await fetch(`${url}/ui${path}`, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          cookie: `schedflow_ui=${sessions[who]}`,
          'content-type': 'application/x-www-form-urlencoded',
          'x-csrf-token': csrf,
        },
        body: new URLSearchParams({ _csrf: csrf }).toString(),
      });
      return { status: res.status, text: await res.text(), location: res.headers.get('location') };
    };

    beforeAll(async () => {
      // Only tokens with read (or audit) log in to the UI.
      for (const who of ['read', 'auditor', 'admin'] as const) sessions[who] = await logIn(tokens[who]);
      const store = td.daemon.history.store;
      const actor = (
        await createToken(store, { name: 'iso-ui-actor', scopes: ['read', 'submit', 'cancel'], owner: 'lab-a' })
      ).token;
      sessions.submit = await logIn(actor);
      sessions.cancel = sessions.submit;
      // The UI's route table: an app built as the daemon's is (its routes are registered at once),
      // read and closed; the daemon's own app is not exposed.
      const d = td.daemon;
      const app = await buildApp({
        store: d.history.store,
        logger: pino({ level: 'silent' }),
        profiles: d.profiles,
        clients: d.clients,
        queues: d.queues,
        pipelines: d.pipelines,
        submit: (input) => d.submit(input),
        retryTasks: (retry) => d.retryArrayTasks(retry),
        resubmit: (input) => d.resubmitWithSuggestion(input),
        pingRedis: async () => {},
        settings: { rateLimitPerMin: 1000, bodyLimitBytes: 1024 * 1024, pollCeilingMs: 60_000 },
        ui: { password: null, protectedDirs: [], sessions: { redis: { url: redis.url }, prefix: 'iso-route-table' } },
      });
      try {
        await app.ready();
        uiRoutes = uiRoutesOf(app.printRoutes({ commonPrefix: false }));
      } finally {
        await app.close();
      }
    });

    it('classifies every UI route of the route table (a new UI route must be added to UI_TARGETS)', () => {
      const unclassified = uiRoutes.filter((r) => uiTargetOf(r) === undefined).map((r) => `${r.method} ${r.path}`);
      expect(unclassified, 'give these UI routes a target in UI_TARGETS').toEqual([]);
      // The table is the app's: the pages of the matrix below are in it.
      expect(uiRoutes.map((r) => `${r.method} ${r.path}`)).toEqual(
        expect.arrayContaining(['GET /ui/jobs/:id', 'POST /ui/runs/:id/cancel', 'GET /ui/events']),
      );
    });

    it('pages: another owner’s job, run and pipeline are 404 as unknown ones; lists hold none of them', async () => {
      const pages = uiRoutes.filter((r) => r.method === 'GET');
      let cases = 0;
      for (const who of ['read', 'submit', 'auditor', 'admin'] as const) {
        const everyOwner = who === 'admin' || who === 'auditor';
        for (const route of pages) {
          const target = uiTargetOf(route);
          const label = `${who} ${route.method} ${route.path}`;
          if (target === 'job' || target === 'run' || target === 'pipeline') {
            const { own, other, unknown } = idsOf(target);
            const [o, x, u] = [
              await page(uiPath(route.path, own), who),
              await page(uiPath(route.path, other), who),
              await page(uiPath(route.path, unknown), who),
            ];
            cases += 3;
            expect(o.status, `${label} own`).toBe(200);
            expect(u.status, `${label} unknown`).toBe(404);
            if (everyOwner) expect(x.status, `${label} other`).toBe(200);
            else {
              expect(x.status, `${label} other`).toBe(404);
              // The same page but for the id (and the form tokens, new on each page).
              const shown = (text: string, id: string) =>
                text.replaceAll(id, '<id>').replace(/value="[^"]*"/g, 'value=""');
              expect(shown(x.text, other), label).toBe(shown(u.text, unknown));
            }
            if (target === 'job') {
              // The step of a run lab-a reads through `allow:` reads as the run (offering no
              // action on lab-b's request); another's step is unknown.
              const step = await page(uiPath(route.path, ids.allowedStep), who);
              const otherStep = await page(uiPath(route.path, ids.otherStep), who);
              cases += 2;
              expect(step.status, `${label} allowed step`).toBe(200);
              if (!everyOwner) {
                expect(step.text, label).not.toContain(`${ids.allowedStep}/cancel`);
                expect(step.text, label).not.toContain(`${ids.allowedStep}/retry`);
                expect(otherStep.status, `${label} another's step`).toBe(404);
              }
            }
          } else if (target === 'list') {
            const r = await page(uiPath(route.path, ''), who);
            cases++;
            expect(r.status, label).toBe(200);
            if (everyOwner) continue;
            expect(r.text, label).not.toContain(ids.otherJob);
            expect(r.text, label).not.toContain(ids.otherRun);
            expect(r.text, label).not.toContain(ids.otherStep);
            expect(r.text, label).not.toContain('/ui/pipelines/pb');
            expect(r.text, label).not.toContain('>pb<');
          } else if (target === 'cluster') {
            // The cluster's page is every reader's; the queue on it names no job, user or account
            // but to admins and auditors (the API's rule), and never a request of schedflow's.
            const r = await page(uiPath(route.path, 'test'), who);
            cases++;
            if (!route.path.includes(':')) {
              expect([r.status, r.location], label).toEqual([303, '/ui/cluster/test']);
              continue;
            }
            expect(r.status, label).toBe(200);
            expect(r.text, label).not.toContain(ids.otherJob);
            if (!everyOwner) expect(r.text, label).not.toMatch(/data-label="(Name|User|Account)">(iso|alice|lab)</);
            // While the jobs run (they sleep a minute), the queue lists them: named to admins and auditors only.
            if (r.text.includes('<tr data-job=')) {
              if (everyOwner) expect(r.text, label).toMatch(/data-label="Name">[^<]/);
              else expect(r.text, label).toMatch(/data-label="Name"><span class="muted">hidden</);
            }
            expect((await page(uiPath(route.path, 'nope'), who)).status, `${label} unknown`).toBe(404);
          } else if (target === 'audit') {
            // Every owner's actions: admins and auditors only.
            const r = await page(uiPath(route.path, ''), who);
            cases++;
            expect(r.status, label).toBe(everyOwner ? 200 : 403);
          } else if (target === 'board' || target === 'board-admin') {
            // The queue board is every owner's jobs: admins and auditors only (with actions: admins).
            const r = await page(uiPath(route.path, 'x'), who);
            cases++;
            const allowed = who === 'admin' || (who === 'auditor' && target === 'board');
            if (allowed) expect(r.status, label).not.toBe(403);
            else if (route.path.endsWith('*')) {
              // The board's static files: printRoutes names the wildcard without its own prefix
              // (static/), so the path asked is none of them; refused or not found, never served.
              expect([403, 404], label).toContain(r.status);
            } else expect(r.status, label).toBe(403);
          }
        }
      }
      expect(cases).toBeGreaterThan(50);
    });

    it('actions: the auditor and a reader are refused; an owner acting on another’s id meets an unknown one', async () => {
      const actions = uiRoutes.filter((r) => r.method === 'POST');
      let cases = 0;
      for (const route of actions) {
        const target = uiTargetOf(route);
        const label = `${route.method} ${route.path}`;
        if (target === 'admin') {
          for (const who of ['read', 'submit', 'auditor'] as const) {
            expect((await post(uiPath(route.path, 'submit'), who)).status, `${who} ${label}`).toBe(403);
            cases++;
          }
          continue;
        }
        if (target !== 'job' && target !== 'run' && target !== 'pipeline') continue;
        const { other, unknown } = idsOf(target);
        for (const who of ['read', 'auditor'] as const) {
          expect((await post(uiPath(route.path, other), who)).status, `${who} ${label}`).toBe(403);
          cases++;
        }
        const u = await post(uiPath(route.path, unknown), 'submit');
        const same = (x: { status: number; text: string; location: string | null }, id: string) => {
          expect(x.status, `${label} on ${id}`).toBe(u.status);
          expect(x.location?.replaceAll(encodeURIComponent(id), '<id>') ?? null, label).toBe(
            u.location?.replaceAll(encodeURIComponent(unknown), '<id>') ?? null,
          );
          expect(x.text.replaceAll(id, '<id>').replace(/value="[^"]*"/g, ''), label).toBe(
            u.text.replaceAll(unknown, '<id>').replace(/value="[^"]*"/g, ''),
          );
        };
        same(await post(uiPath(route.path, other), 'submit'), other);
        cases += 2;
        if (target === 'job') {
          // lab-a reads the step of a run of a pipeline that allows it, and changes none of it.
          same(await post(uiPath(route.path, ids.allowedStep), 'submit'), ids.allowedStep);
          same(await post(uiPath(route.path, ids.otherStep), 'submit'), ids.otherStep);
          cases += 2;
        }
      }
      expect(cases).toBeGreaterThan(15);
      // None of it reached lab-b's step.
      const step = await getRequest(td.daemon.history.store, ids.allowedStep);
      expect(step?.state).not.toBe('cancelled');
    });

    it('the live feed: each session is told only of changes to what it may read', async () => {
      const labB = await logIn(tokens.labB);
      const feeds = {
        labA: await openFeed(sessions.read),
        labB: await openFeed(labB),
        auditor: await openFeed(sessions.auditor),
      };
      try {
        const submit = async (token: string) => {
          const r = await call('POST', '/api/v1/jobs', token, { spec: shellSpec('iso-live', 'sleep 60') });
          expect(r.status, r.text).toBe(201);
          return (JSON.parse(r.text) as { id: string }).id;
        };
        const trigger = async (token: string, pipeline: string) => {
          const r = await call('POST', `/api/v1/pipelines/${pipeline}/runs`, token, {});
          expect(r.status, r.text).toBe(201);
          return (JSON.parse(r.text) as { id: string }).id;
        };
        const labAToken = (
          await createToken(td.daemon.history.store, { name: 'iso-live-a', scopes: ['read', 'submit'], owner: 'lab-a' })
        ).token;
        // Every stream is listening once the auditor's hears of the admin's request.
        const first = await submit(tokens.admin);
        await waitFor(async () => (feeds.auditor.has(first) ? true : undefined), { what: 'the first change' });
        const bJob = await submit(tokens.labB);
        const bRun = await trigger(tokens.labB, 'pb');
        const aJob = await submit(labAToken);
        // lab-b's pipeline that lets lab-a in: its run and its steps are lab-a's to read.
        const cRun = await trigger(labAToken, 'pc');
        await waitFor(
          async () =>
            feeds.labA.has(aJob) &&
            feeds.labA.has(cRun) &&
            feeds.labA.seen.some((c) => c.kind === 'job' && c.run === cRun)
              ? true
              : undefined,
          { what: "lab-a's request, the allowed run and its step in lab-a's feed" },
        );
        await waitFor(
          async () => (feeds.labB.has(bJob) && feeds.labB.has(bRun) && feeds.labB.has(cRun) ? true : undefined),
          { what: "lab-b's request and runs in lab-b's feed" },
        );
        await waitFor(
          async () => ([first, aJob, bJob, bRun, cRun].every((id) => feeds.auditor.has(id)) ? true : undefined),
          {
            what: 'every change in the auditor’s feed',
          },
        );
        // The last word: a change after all of the above reached both, so whatever of the above
        // a stream was to be sent, it has been.
        const aLast = await submit(labAToken);
        const bLast = await submit(tokens.labB);
        await waitFor(async () => (feeds.labA.has(aLast) && feeds.labB.has(bLast) ? true : undefined), {
          what: 'the last changes',
        });
        for (const id of [first, bJob, bRun, bLast]) expect(feeds.labA.has(id), `lab-a told of ${id}`).toBe(false);
        for (const id of [first, aJob, aLast]) expect(feeds.labB.has(id), `lab-b told of ${id}`).toBe(false);
        // Whatever else each was told of is its owner's, or (lab-a) of the pipeline that allows it.
        const store = td.daemon.history.store;
        const whose = async (c: FeedChange) => {
          if (c.kind === 'run') {
            const run = await getRun(store, c.id);
            return { owner: run?.owner, pipeline: run?.pipeline };
          }
          const row = await getRequest(store, c.id);
          const run = row?.runId ? await getRun(store, row.runId) : undefined;
          return { owner: row?.owner, pipeline: run?.pipeline };
        };
        for (const c of feeds.labA.seen) {
          const of = await whose(c);
          expect(of.owner === 'lab-a' || of.pipeline === 'pc', `lab-a told of ${c.kind} ${c.id}`).toBe(true);
        }
        for (const c of feeds.labB.seen)
          expect((await whose(c)).owner, `lab-b told of ${c.kind} ${c.id}`).toBe('lab-b');
        // Only ids and states go to the page: not whose they are.
        expect(JSON.stringify(feeds.labA.seen)).not.toContain('lab-b');
      } finally {
        for (const feed of Object.values(feeds)) await feed.close();
      }
    });
  });
});
