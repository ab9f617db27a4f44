import { describe, expect, it } from 'vitest';
import { getRequest, listRequests } from '../../../src/db/requests.js';
import { transition } from '../../../src/requests/transition.js';
import { apiClient, errorOf, shellSpec } from '../../helpers/api.js';
import { daemonTestEnv, startTestDaemon } from '../../helpers/daemon.js';
import { http } from '../../helpers/http.js';

/**
 * Job requests through the local API, over its real socket, against the
 * simulator: submit to completion, follow, list, cancel at each point of a
 * job's life, idempotent retries.
 */

const env = daemonTestEnv();

interface JobDetail {
  id: string;
  state: string;
  job_id: number | null;
  exit_code: number | null;
  transitions: { from: string | null; to: string; source: string }[];
  deduplicated: { token: string; idempotency_key: string; count: number; first_at: string; last_at: string }[];
  freshness: {
    stale: boolean;
    detail: string;
    profile: { last_poll_at: string | null; last_poll_ok: boolean | null; seconds_since_poll: number | null };
    job: { last_seen_at: string | null };
  };
  links: { self: string };
}

interface Page<T> {
  items: T[];
  next: string | null;
}

describe('POST /api/v1/jobs', () => {
  it('submits a job that runs to completion; GET shows its transitions and freshness', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);

    const created = await api.call('POST', '/api/v1/jobs', {
      token,
      body: {
        spec: shellSpec('api-hello', 'echo hello from $SLURM_JOB_ID\nsleep 1', sim.workDir),
        deadlines: { max_pending: 600, finish_by: new Date(Date.now() + 3600_000).toISOString() },
      },
    });
    expect(created.status).toBe(201);
    const { id, state, links } = created.json as { id: string; state: string; links: { self: string } };
    expect(state).toBe('queued');
    expect(links.self).toBe(`/api/v1/jobs/${id}`);
    expect(created.headers.get('location')).toBe(links.self);
    expect(created.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);

    await td.waitForState(id, 'completed');
    const shown = await api.call('GET', links.self, { token });
    expect(shown.status).toBe(200);
    const job = shown.json as JobDetail;
    expect(job).toMatchObject({ id, state: 'completed', exit_code: 0 });
    expect(job.job_id).toEqual(expect.any(Number));
    expect(job.transitions.map((t) => t.to)).toEqual([
      'accepted',
      'queued',
      'submitting',
      'submitted',
      'running',
      'completed',
    ]);
    expect(job.transitions[0]).toMatchObject({ from: null, source: 'api' });
    // The profile has been polled; a finished job's state is final, not stale.
    expect(job.freshness.profile.last_poll_ok).toBe(true);
    expect(job.freshness.profile.seconds_since_poll).toBeGreaterThanOrEqual(0);
    expect(job.freshness.job.last_seen_at).not.toBeNull();
    expect(job.freshness).toMatchObject({ stale: false, detail: 'final state (completed)' });
    expect((await getRequest(td.daemon.history.store, id))?.deadlines).toMatchObject({ maxPendingSec: 600 });
  });

  it("shows webhook_url's user info and query to admin tokens only; others get scheme, host, port and path", async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const reader = await api.token(['submit', 'read']);
    const admin = await api.token(['admin']);
    const webhook = 'https://hook:s3cret@hooks.example.org:8443/in/schedflow?token=abc#frag';
    const created = await api.call('POST', '/api/v1/jobs', {
      token: reader,
      body: { spec: shellSpec('api-webhook-url', 'true', sim.workDir), webhook_url: webhook },
    });
    expect(created.status).toBe(201);
    const { id } = created.json as { id: string };
    const shown = 'https://hooks.example.org:8443/in/schedflow';
    const detail = await api.call('GET', `/api/v1/jobs/${id}`, { token: reader });
    expect((detail.json as { webhook_url: string }).webhook_url).toBe(shown);
    const list = await api.call('GET', '/api/v1/jobs', { token: reader });
    const item = (list.json as Page<{ id: string; webhook_url: string }>).items.find((j) => j.id === id);
    expect(item?.webhook_url).toBe(shown);
    expect(detail.text).not.toContain('s3cret');
    expect(list.text).not.toContain('s3cret');
    // The admin sees what was given, to check or repair it.
    const full = await api.call('GET', `/api/v1/jobs/${id}`, { token: admin });
    expect((full.json as { webhook_url: string }).webhook_url).toBe(webhook);
  });

  it('refuses a spec no scheduler would take at the door: a misspelt member, an impossible size; nothing stored', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit']);
    const bad = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: { ...shellSpec('typo', 'true'), time_limt: 5, memory_per_node: '99999999999999999999999T' } },
    });
    expect(bad.status).toBe(400);
    const fields = Object.fromEntries((errorOf(bad).fields ?? []).map((f) => [f.path, f.reason]));
    expect(fields['spec.time_limt']).toBe('unknown member "time_limt"; did you mean "time_limit"?');
    expect(fields['spec.memory_per_node']).toMatch(/more memory than Slurm can take/);
    expect(await listRequests(td.daemon.history.store, {})).toEqual([]);
  });

  it('refuses hostile JSON with a 400 in the documented shape: 5,000 levels deep, a lone surrogate, __proto__', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit']);
    const post = (body: string) =>
      api.call('POST', '/api/v1/jobs', {
        token,
        body,
        headers: { 'content-type': 'application/json', 'idempotency-key': `k-${body.length}` },
      });
    const deep = await post(`{"spec":${'['.repeat(5000)}${']'.repeat(5000)}}`);
    expect(deep.status, deep.text).toBe(400);
    expect(errorOf(deep)).toMatchObject({ code: 'SCHEDFLOW_ERR_VALIDATION' });
    expect(errorOf(deep).fields?.[0]?.reason).toBe('nested deeper than 64 levels');
    const surrogate = await post(JSON.stringify({ spec: shellSpec('x', 'true') }).replace('"x"', '"\\ud800"'));
    expect(surrogate.status, surrogate.text).toBe(400);
    expect(errorOf(surrogate).fields).toEqual([
      { in: 'body', path: 'spec.name', reason: 'contains a lone UTF-16 surrogate' },
    ]);
    const proto = await post('{"spec":{"__proto__":{"admin":true}}}');
    expect(proto.status, proto.text).toBe(400);
    expect(errorOf(proto).message).toMatch(/__proto__/);
    expect(await listRequests(td.daemon.history.store, {})).toEqual([]);
  });

  it('answers 400 naming each field and the reason; an unknown profile is a field error too', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit']);

    const bad = await api.call('POST', '/api/v1/jobs', {
      token,
      body: {
        spec: { name: 'x', script: 'echo no interpreter line', tasks: 0 },
        deadlines: { start_by: 'tomorrow' },
        webhookUrl: 'http://example.invalid/',
      },
    });
    expect(bad.status).toBe(400);
    const error = errorOf(bad);
    expect(error.code).toBe('SCHEDFLOW_ERR_VALIDATION');
    const fields = Object.fromEntries((error.fields ?? []).map((f) => [f.path, f.reason]));
    expect(fields['spec.script']).toMatch(/must start with an interpreter line/);
    expect(fields['spec.tasks']).toMatch(/>0|greater|too small/i);
    expect(fields['deadlines.start_by']).toMatch(/datetime|date/i);
    expect(fields.webhookUrl).toBe('unknown field');
    expect(error.fields?.every((f) => f.in === 'body')).toBe(true);
    expect(bad.text).not.toMatch(/\bat .*\.ts:\d+/); // no stack trace

    const profile = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: shellSpec('x', 'true'), profile: 'nope' },
    });
    expect(profile.status).toBe(400);
    expect(errorOf(profile).fields).toEqual([
      { in: 'body', path: 'profile', reason: 'no scheduler profile "nope" (have: test)' },
    ]);

    const notJson = await api.call('POST', '/api/v1/jobs', {
      token,
      body: '{"spec": ',
      headers: { 'content-type': 'application/json' },
    });
    expect(notJson.status).toBe(400);
    expect(errorOf(notJson).code).toBe('SCHEDFLOW_ERR_VALIDATION');

    const big = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: shellSpec('big', `echo ${'x'.repeat(1024 * 1024)}`) },
    });
    expect(big.status).toBe(413);
    expect(errorOf(big)).toMatchObject({ code: 'SCHEDFLOW_ERR_BODY_TOO_LARGE' });
  });

  it('Idempotency-Key: the same body gets the first answer again; another body or route is a 409', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read'], 'lab-service');
    const body = { spec: shellSpec('once', 'true', sim.workDir) };
    const headers = { 'idempotency-key': 'order-42' };

    const first = await api.call('POST', '/api/v1/jobs', { token, body, headers });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    // Key order does not matter: the body is compared as canonical JSON.
    const reordered = { spec: Object.fromEntries(Object.entries(body.spec).reverse()) };
    const again = await api.call('POST', '/api/v1/jobs', { token, body: reordered, headers });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.json).toEqual(first.json);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    // One request, and the replay is recorded on it: by which token's name and key, when, how often.
    const shown = (await api.call('GET', first.headers.get('location') ?? '', { token })).json as JobDetail;
    expect(shown.deduplicated).toEqual([
      {
        token: 'lab-service',
        idempotency_key: 'order-42',
        count: 1,
        first_at: expect.any(String),
        last_at: expect.any(String),
      },
    ]);
    expect(shown.deduplicated[0]?.first_at).toBe(shown.deduplicated[0]?.last_at);

    const other = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: shellSpec('twice', 'true') },
      headers,
    });
    expect(other.status).toBe(409);
    expect(errorOf(other)).toMatchObject({ code: 'SCHEDFLOW_ERR_IDEMPOTENCY_KEY_REUSED' });
    expect(errorOf(other).message).toMatch(/another body/);
    const otherRoute = await api.call('POST', '/api/v1/pipelines/none/runs', { token, body: {}, headers });
    expect(otherRoute.status).toBe(409);
    expect(errorOf(otherRoute).message).toMatch(/was used for POST \/api\/v1\/jobs/);

    // Keys are per token: another token's same key is a new request.
    const second = await api.token(['submit']);
    const fresh = await api.call('POST', '/api/v1/jobs', { token: second, body, headers });
    expect(fresh.status).toBe(201);
    expect((fresh.json as { id: string }).id).not.toBe((first.json as { id: string }).id);

    const listed = await api.call('GET', '/api/v1/jobs', { token });
    expect((listed.json as Page<{ name: string }>).items.filter((j) => j.name === 'once')).toHaveLength(2);
    // A request answered only once has no replays.
    const freshShown = (await api.call('GET', fresh.headers.get('location') ?? '', { token })).json as JobDetail;
    expect(freshShown.deduplicated).toEqual([]);
  });
});

describe('GET /api/v1/jobs', () => {
  it('filters by state, profile and creation time, a page at a time with an opaque cursor', async () => {
    const sim = await env.sim();
    // No worker: requests stay queued, so the listing is stable.
    const td = await env.daemon(sim.url, { roles: ['scheduler', 'web'] });
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);
    const before = new Date().toISOString();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await api.call('POST', '/api/v1/jobs', { token, body: { spec: shellSpec(`page-${i}`, 'true') } });
      ids.push((r.json as { id: string }).id);
    }

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = `?limit=2&state=queued,accepted&profile=test&created_since=${encodeURIComponent(before)}${cursor ? `&cursor=${cursor}` : ''}`;
      const r = await api.call('GET', `/api/v1/jobs${query}`, { token });
      expect(r.status).toBe(200);
      const page = r.json as Page<{ id: string; state: string }>;
      expect(page.items.length).toBeLessThanOrEqual(2);
      seen.push(...page.items.map((j) => j.id));
      cursor = page.next;
      pages++;
    } while (cursor && pages < 10);
    expect(pages).toBe(3);
    expect(seen).toEqual([...ids].reverse());

    const none = await api.call('GET', '/api/v1/jobs?state=completed', { token });
    expect((none.json as Page<unknown>).items).toEqual([]);
    const until = await api.call('GET', `/api/v1/jobs?created_until=${encodeURIComponent(before)}`, { token });
    expect((until.json as Page<unknown>).items).toEqual([]);

    const bad = await api.call('GET', '/api/v1/jobs?state=done&limit=500&cursor=zzz&color=red', { token });
    expect(bad.status).toBe(400);
    const fields = Object.fromEntries((errorOf(bad).fields ?? []).map((f) => [f.path, f]));
    expect(fields.state?.reason).toMatch(/unknown state done/);
    expect(fields.limit).toMatchObject({ in: 'query', reason: expect.stringMatching(/200/) });
    expect(fields.color?.reason).toBe('unknown field');
    const badCursor = await api.call('GET', '/api/v1/jobs?cursor=zzz', { token });
    expect(errorOf(badCursor).fields).toEqual([{ in: 'query', path: 'cursor', reason: expect.any(String) }]);

    const missing = await api.call('GET', '/api/v1/jobs/no-such-request', { token });
    expect(missing.status).toBe(404);
    expect(errorOf(missing)).toMatchObject({ code: 'SCHEDFLOW_ERR_NOT_FOUND' });
  });
});

describe('DELETE /api/v1/jobs/{id}', () => {
  it('cancels a running job upstream (202); the poller records it CANCELLED', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read', 'cancel']);
    const r = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: shellSpec('long', 'sleep 60', sim.workDir) },
    });
    const { id } = r.json as { id: string };
    await td.waitForState(id, 'running');

    const cancel = await api.call('DELETE', `/api/v1/jobs/${id}`, { token });
    expect(cancel.status).toBe(202);
    expect(cancel.json).toMatchObject({
      id,
      state: 'running',
      message: expect.stringMatching(/sent to the scheduler/),
    });
    const row = await td.waitForState(id, 'cancelled');
    expect(row.rawState).toMatch(/CANCELLED/);

    const again = await api.call('DELETE', `/api/v1/jobs/${id}`, { token });
    expect(again.status).toBe(409);
    expect(errorOf(again)).toMatchObject({ code: 'SCHEDFLOW_ERR_JOB_ENDED', state: 'cancelled' });
    expect(errorOf(again).message).toMatch(/already ended: cancelled/);
  });

  it('cancels a job not yet submitted: its submit job is withdrawn and it never reaches the scheduler', async () => {
    const sim = await env.sim();
    // No worker in this daemon: what is queued stays queued until cancelled.
    const td = await env.daemon(sim.url, { roles: ['scheduler', 'web'] });
    const api = apiClient(td);
    const token = await api.token(['admin']);
    const r = await api.call('POST', '/api/v1/jobs', { token, body: { spec: shellSpec('never', 'true') } });
    const { id } = r.json as { id: string };
    expect(await td.daemon.queues.submit.getJob(id)).toBeDefined();

    const cancel = await api.call('DELETE', `/api/v1/jobs/${id}`, { token });
    expect(cancel.status).toBe(200);
    expect(cancel.json).toMatchObject({ id, state: 'cancelled', message: 'cancelled before it was submitted' });
    expect(await td.daemon.queues.submit.getJob(id)).toBeUndefined();
    const shown = (await api.call('GET', `/api/v1/jobs/${id}`, { token })).json as JobDetail;
    expect(shown.transitions.at(-1)).toMatchObject({ from: 'queued', to: 'cancelled', source: 'api' });
    expect(shown.job_id).toBeNull();

    // A request caught mid-submission: ask again later.
    const r2 = await api.call('POST', '/api/v1/jobs', { token, body: { spec: shellSpec('busy', 'true') } });
    const busy = (r2.json as { id: string }).id;
    await transition(td.daemon.history.store, busy, { to: 'submitting', source: 'submit', at: Date.now() });
    const conflict = await api.call('DELETE', `/api/v1/jobs/${busy}`, { token });
    expect(conflict.status).toBe(409);
    expect(errorOf(conflict)).toMatchObject({ code: 'SCHEDFLOW_ERR_JOB_SUBMITTING', state: 'submitting' });
    expect(Number(conflict.headers.get('retry-after'))).toBeGreaterThan(0);

    const missing = await api.call('DELETE', '/api/v1/jobs/nothing-here', { token });
    expect(missing.status).toBe(404);
  });

  it("passes the scheduler's refusal on as 502 and an outage as 503, with the upstream's status and message", async () => {
    const sim = await env.sim();
    const td = await startTestDaemon(
      sim.url,
      env.redis.url,
      { roles: ['scheduler', 'web'] },
      { retries: { attempts: 1 } },
    );
    env.defer(() => td.stop());
    const api = apiClient(td);
    const token = await api.token(['admin']);
    const r = await api.call('POST', '/api/v1/jobs', { token, body: { spec: shellSpec('ghost', 'true') } });
    const { id } = r.json as { id: string };
    // Recorded as running a job the scheduler does not know.
    await (await td.daemon.queues.submit.getJob(id))?.remove();
    await transition(td.daemon.history.store, id, {
      to: 'running',
      source: 'poll',
      at: Date.now(),
      patch: { jobId: 987_654 },
    });

    const refused = await api.call('DELETE', `/api/v1/jobs/${id}`, { token });
    expect(refused.status).toBe(502);
    expect(errorOf(refused)).toMatchObject({
      code: 'SCHEDFLOW_ERR_UPSTREAM',
      upstream: { status: 200, code: 'SCHEDFLOW_ERR_SCHED_CANCEL_FAILED', message: expect.any(String) },
    });
    expect(errorOf(refused).message).toMatch(/cancel of job 987654 failed/);

    await http(`${sim.url}/_sim/upstream`, { headers: sim.admin, method: 'PUT', body: { slurmctld: 'down' } });
    const down = await api.call('DELETE', `/api/v1/jobs/${id}`, { token });
    expect(down.status).toBe(503);
    expect(errorOf(down)).toMatchObject({ code: 'SCHEDFLOW_ERR_UPSTREAM', upstream: { status: 500 } });
    await http(`${sim.url}/_sim/upstream`, { headers: sim.admin, method: 'PUT', body: { slurmctld: 'up' } });
  });
});
