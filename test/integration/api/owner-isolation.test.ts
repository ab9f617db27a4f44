import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getRequest } from '../../../src/db/requests.js';
import type { ApiScope } from '../../../src/db/schema.js';
import { createToken } from '../../../src/db/tokens.js';
import { Secret } from '../../../src/lib/secret.js';
import { shellSpec } from '../../helpers/api.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { DIALECTS, type Dialect, testPostgres } from '../../helpers/histories.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';

/**
 * Issue 33's isolation matrix: every route the OpenAPI document lists (so a new route is in the
 * matrix without editing this file, and a route this file cannot classify fails it) × {own,
 * another owner's, unknown id} × {each scope of owner lab-a, an admin, an auditor}, on SQLite and
 * PostgreSQL; then the UI's pages and actions the same way. Properties: another owner's id
 * answers exactly as an unknown one (status and body, the id aside), lists hold none of another
 * owner's rows, the auditor reads everything and is refused every change. One daemon per dialect.
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

type Who = 'read' | 'submit' | 'cancel' | 'admin' | 'auditor';
/** Non-admins first: an admin's changes (on lab-b's things) come last. */
const WHO: readonly Who[] = ['read', 'submit', 'cancel', 'auditor', 'admin'];
const SCOPES: Record<Who, ApiScope[]> = {
  read: ['read'],
  submit: ['submit'],
  cancel: ['cancel'],
  admin: ['admin'],
  auditor: ['audit'],
};

/** What a route acts on, for the ids it is given: a request, a run, a pipeline; or a list. */
type Target = 'job' | 'run' | 'pipeline' | 'jobs' | 'runs' | 'pipelines' | 'history' | 'create' | 'public';

/** Each route of the OpenAPI document by what it acts on. A route missing here fails the test. */
const TARGETS: Record<string, Target> = {
  'POST /api/v1/jobs': 'create',
  'GET /api/v1/jobs': 'jobs',
  'GET /api/v1/jobs/{id}': 'job',
  'DELETE /api/v1/jobs/{id}': 'job',
  'POST /api/v1/jobs/{id}/resubmit': 'job',
  'POST /api/v1/jobs/{id}/retry-tasks': 'job',
  'GET /api/v1/jobs/{id}/output': 'job',
  'GET /api/v1/history': 'history',
  'GET /api/v1/runs': 'runs',
  'GET /api/v1/runs/{id}': 'run',
  'POST /api/v1/runs/{id}/cancel': 'run',
  'GET /api/v1/pipelines': 'pipelines',
  'POST /api/v1/pipelines/{name}/runs': 'pipeline',
  'POST /api/v1/pipelines/{name}/pause': 'pipeline',
  'POST /api/v1/pipelines/{name}/resume': 'pipeline',
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

describe.each(DIALECTS)('owner isolation on %s', (dialect: Dialect) => {
  const pg = testPostgres();
  let redis: TestRedis;
  let sim: TestSim;
  let td: TestDaemon;
  let url: string;
  const tokens = {} as Record<Who | 'labB', string>;
  const ids = { ownJob: '', otherJob: '', ownRun: '', otherRun: '', allowedRun: '' };

  const call = async (method: string, path: string, token: string | null, body?: unknown): Promise<Answer> => {
    const res = await fetch(`${url}${path}`, {
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
        const body = route.method === 'GET' || route.method === 'DELETE' ? undefined : {};
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
        if (otherAnswer.status !== 403) {
          // With the scope: its own id is found (whatever the action then answers).
          const ownAnswer = await call(route.method, at(own), tokens[who], body);
          cases++;
          expect(ownAnswer.status, `${label} (own): ${ownAnswer.text}`).not.toBe(404);
        }
      }
    }
    expect(cases).toBeGreaterThan(50);
  }, 60_000);

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
      if (who === 'submit' || who === 'cancel') {
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
    });

    it('pages: another owner’s job, run and pipeline are 404 as unknown ones; lists hold none of them', async () => {
      for (const who of ['read', 'submit', 'auditor', 'admin'] as const) {
        for (const target of ['job', 'run', 'pipeline'] as const) {
          const base = target === 'job' ? '/jobs/' : target === 'run' ? '/runs/' : '/pipelines/';
          const { own, other, unknown } = idsOf(target);
          const [o, x, u] = [
            await page(base + own, who),
            await page(base + other, who),
            await page(base + unknown, who),
          ];
          expect(o.status, `${who} ${target} own`).toBe(200);
          expect(u.status, `${who} ${target} unknown`).toBe(404);
          if (who === 'admin' || who === 'auditor') expect(x.status, `${who} ${target} other`).toBe(200);
          else {
            expect(x.status, `${who} ${target} other`).toBe(404);
            expect(x.text).not.toContain(other);
          }
        }
        for (const list of ['/jobs', '/runs', '/pipelines', '/history']) {
          const r = await page(list, who);
          expect(r.status, `${who} ${list}`).toBe(200);
          if (who === 'admin' || who === 'auditor') continue;
          expect(r.text, `${who} ${list}`).not.toContain(ids.otherJob);
          expect(r.text, `${who} ${list}`).not.toContain(ids.otherRun);
          expect(r.text, `${who} ${list}`).not.toContain('/ui/pipelines/pb');
          expect(r.text, `${who} ${list}`).not.toContain('>pb<');
        }
      }
      // The queue board is every owner's jobs: admins and auditors only.
      expect((await page('/queues/', 'read')).status).toBe(403);
      expect((await page('/queues-admin/', 'auditor')).status).toBe(403);
    });

    it('actions: the auditor and a reader are refused; an owner acting on another’s id meets an unknown one', async () => {
      const actions: { path: (id: string) => string; target: 'job' | 'run' | 'pipeline' }[] = [
        { path: (id) => `/jobs/${id}/cancel`, target: 'job' },
        { path: (id) => `/jobs/${id}/retry`, target: 'job' },
        { path: (id) => `/jobs/${id}/retry-tasks`, target: 'job' },
        { path: (id) => `/runs/${id}/cancel`, target: 'run' },
        { path: (id) => `/pipelines/${id}/trigger`, target: 'pipeline' },
        { path: (id) => `/pipelines/${id}/pause`, target: 'pipeline' },
        { path: (id) => `/pipelines/${id}/resume`, target: 'pipeline' },
      ];
      for (const action of actions) {
        const { other, unknown } = idsOf(action.target);
        for (const who of ['read', 'auditor'] as const) {
          expect((await post(action.path(other), who)).status, `${who} ${action.path('x')}`).toBe(403);
        }
        const x = await post(action.path(other), 'submit');
        const u = await post(action.path(unknown), 'submit');
        expect(x.status, action.path('x')).toBe(u.status);
        expect(x.location?.replaceAll(encodeURIComponent(other), '<id>') ?? null).toBe(
          u.location?.replaceAll(encodeURIComponent(unknown), '<id>') ?? null,
        );
        expect(x.text.replaceAll(other, '<id>').replace(/value="[^"]*"/g, '')).toBe(
          u.text.replaceAll(unknown, '<id>').replace(/value="[^"]*"/g, ''),
        );
      }
    });
  });
});
